package agg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestAppendFramedIsLengthThenBody checks the framing against its
// definition, a uvarint length and the body, for lengths of one, two and
// three varint bytes, after an empty and a non-empty prefix.
func TestAppendFramedIsLengthThenBody(t *testing.T) {
	for _, prefix := range [][]byte{nil, {1, 2, 3}} {
		for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 70000} {
			body := make([]byte, n)
			for i := range body {
				body[i] = byte(i*7 + n)
			}
			got, err := appendFramed(bytes.Clone(prefix), func(b []byte) ([]byte, error) { return append(b, body...), nil })
			if err != nil {
				t.Fatal(err)
			}
			want := append(binary.AppendUvarint(bytes.Clone(prefix), uint64(n)), body...)
			if !bytes.Equal(got, want) {
				t.Errorf("prefix %v, body of %d bytes: got %d bytes, want %d", prefix, n, len(got), len(want))
			}
		}
	}
	_, err := appendFramed([]byte{1}, func(b []byte) ([]byte, error) { return b, fmt.Errorf("refused") })
	if err == nil {
		t.Error("an encoder's error was not returned")
	}
}

// TestClearedStateIsNew checks that a state cleared and filled again
// encodes, and answers, byte for byte as a new state filled with the same
// values, whatever it held before: small and large fills (the sketch's
// buffer compacts into pages), negative and zero values, repeated clears.
func TestClearedStateIsNew(t *testing.T) {
	spec, err := NewSpec([]string{"count", "sum", "min", "max", "mean", "quantiles"}, []float64{0.5, 0.99})
	if err != nil {
		t.Fatal(err)
	}
	fill := func(st *State, n, seed int) {
		for i := range n {
			st.Add(float64((i*seed)%997-300)/7, nil)
		}
	}
	reused := spec.New()
	for round, c := range []struct{ before, after, seed int }{
		{0, 3, 1}, {3, 2, 5}, {500, 1, 7}, {2, 500, 11}, {5000, 40, 13}, {40, 0, 17}, {0, 9, 19},
	} {
		fill(reused, c.before, c.seed+1)
		reused.Clear()
		fill(reused, c.after, c.seed)
		fresh := spec.New()
		fill(fresh, c.after, c.seed)
		got, err := reused.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("round %d (%d values, cleared, %d values): encodings differ\n got %x\nwant %x", round, c.before, c.after, got, want)
		}
		if g, w := fmt.Sprint(reused.Result()), fmt.Sprint(fresh.Result()); g != w {
			t.Errorf("round %d: result %s, want %s", round, g, w)
		}
		reused.Clear()
	}
}

// TestSetBinaryIsDecode checks that decoding into a reused state gives
// what Decode gives (encoding and result), whatever the state held, and
// that a refused encoding is refused as Decode refuses it.
func TestSetBinaryIsDecode(t *testing.T) {
	spec, err := NewSpec([]string{"count", "sum", "min", "max", "mean", "quantiles"}, []float64{0.5, 0.99})
	if err != nil {
		t.Fatal(err)
	}
	reused := spec.New()
	for round, n := range []int{0, 1, 3, 200, 5000, 2, 0, 70} {
		st := spec.New()
		for i := range n {
			st.Add(float64((i*31)%1009-400)/3, nil)
		}
		enc, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := reused.SetBinary(enc); err != nil {
			t.Fatal(err)
		}
		fresh, err := spec.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := reused.MarshalBinary()
		want, _ := fresh.MarshalBinary()
		if !bytes.Equal(got, want) || !bytes.Equal(got, enc) {
			t.Errorf("round %d (%d values): encodings differ", round, n)
		}
		if g, w := fmt.Sprint(reused.Result()), fmt.Sprint(fresh.Result()); g != w {
			t.Errorf("round %d: result %s, want %s", round, g, w)
		}
	}
	if err := reused.SetBinary([]byte{9}); err == nil {
		t.Error("a wrong version was accepted")
	}
}
