package agg

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// libSketch is the sketch as the library builds it, the way State did
// before the copy: stored sketches were written by it.
func libSketch(t testing.TB) *ddsketch.DDSketch {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		t.Fatal(err)
	}
	return ddsketch.NewDDSketchFromStoreProvider(m, store.BufferedPaginatedStoreConstructor)
}

func libEncode(s *ddsketch.DDSketch) []byte {
	var b []byte
	s.Encode(&b, true)
	return b
}

func ourEncode(s *sketch) []byte {
	var b []byte
	s.encode(&b)
	return b
}

// values draws values of the shapes a pipeline sees: latencies, counts,
// negatives, zeros, a wide range.
func values(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		switch rng.IntN(6) {
		case 0:
			out[i] = float64(rng.IntN(3000))
		case 1:
			out[i] = rng.ExpFloat64() * 250
		case 2:
			out[i] = -rng.ExpFloat64() * 40
		case 3:
			out[i] = 0
		case 4:
			out[i] = math.Pow(10, rng.Float64()*30-10)
		default:
			out[i] = 100 + float64(i%900)
		}
	}
	return out
}

// The copy writes the library's bytes for the same history of adds,
// merges and copies, decodes the library's bytes into a sketch that
// encodes them again unchanged, and reports the same quantiles.
func TestSketchMatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	qs := []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1}
	for round := range 300 {
		n := []int{1, 2, 5, 31, 64, 65, 200, 1000, 5000}[round%9]
		lib, ours := libSketch(t), newSketch()
		for _, v := range values(rng, n) {
			if err := lib.Add(v); err != nil {
				t.Fatal(err)
			}
			if err := ours.add(v); err != nil {
				t.Fatal(err)
			}
		}
		if round%3 == 1 { // merge another sketch in, as State.Merge does
			lib2, ours2 := libSketch(t), newSketch()
			for _, v := range values(rng, rng.IntN(400)+1) {
				_ = lib2.Add(v)
				_ = ours2.add(v)
			}
			if err := lib.MergeWith(lib2); err != nil {
				t.Fatal(err)
			}
			ours.mergeWith(ours2)
		}
		if round%4 == 2 { // go on from a copy
			lib, ours = lib.Copy(), ours.copy()
			for _, v := range values(rng, 50) {
				_ = lib.Add(v)
				_ = ours.add(v)
			}
		}
		for _, q := range qs {
			want, err1 := lib.GetValueAtQuantile(q)
			got, err2 := ours.valueAtQuantile(q)
			if (err1 == nil) != (err2 == nil) || (err1 == nil && got != want) {
				t.Fatalf("round %d: quantile %v = %v (%v), library %v (%v)", round, q, got, err2, want, err1)
			}
		}
		if lib.IsEmpty() != ours.isEmpty() {
			t.Fatalf("round %d: isEmpty differs", round)
		}
		want, got := libEncode(lib), ourEncode(ours)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d (%d values): encodings differ:\nours    %x\nlibrary %x", round, n, got, want)
		}
		// Old bytes decode, and encode back to themselves; and the
		// library reads ours.
		dec := newSketch()
		if err := decodeSketch(dec, want); err != nil {
			t.Fatalf("round %d: decoding the library's bytes: %v", round, err)
		}
		if again := ourEncode(dec); !bytes.Equal(again, want) {
			t.Fatalf("round %d: the library's bytes decoded and encoded again differ", round)
		}
		m, _ := mapping.NewLogarithmicMapping(RelativeAccuracy)
		back, err := ddsketch.DecodeDDSketch(got, store.BufferedPaginatedStoreConstructor, m)
		if err != nil || !bytes.Equal(libEncode(back), want) {
			t.Fatalf("round %d: the library cannot read ours back (%v)", round, err)
		}
	}
}

// A State with quantiles encodes as it did with the library: the window
// items and the interval state already stored stay readable and equal.
func TestStateWithQuantilesEncodesAsBefore(t *testing.T) {
	spec, err := NewSpec([]string{"count", "sum", "min", "max", "mean", "quantiles"}, []float64{0.5, 0.99})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	st, lib := spec.New(), libSketch(t)
	for _, v := range values(rng, 3000) {
		st.Add(v, nil)
		_ = lib.Add(v)
	}
	blob, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	body := libEncode(lib)
	if !bytes.HasSuffix(blob, body) {
		t.Fatalf("the State's encoding does not end with the library's sketch bytes")
	}
	dec, err := spec.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := dec.MarshalBinary()
	if !bytes.Equal(again, blob) {
		t.Errorf("decoded and encoded again, the State's bytes differ")
	}
}

// A new sketch's two stores start on one array (one allocation): filling
// each half to its capacity and past it keeps the positive and negative
// buckets apart, as the library's separate stores do.
func TestNewSketchStoresDoNotShareBuckets(t *testing.T) {
	var sink *sketch
	if n := testing.AllocsPerRun(100, func() { sink = newSketch() }); n > 1 {
		t.Errorf("newSketch made %.0f allocations, want 1", n)
	}
	_ = sink
	for _, n := range []int{newBufferCap, newBufferCap + 1, 3 * newBufferCap} {
		lib, ours := libSketch(t), newSketch()
		for i := range n {
			for _, v := range []float64{float64(10 + i), -float64(1000 + 7*i)} {
				if err := lib.Add(v); err != nil {
					t.Fatal(err)
				}
				if err := ours.add(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got, want := ourEncode(ours), libEncode(lib); !bytes.Equal(got, want) {
			t.Errorf("%d values of each sign: encodings differ:\nours    %x\nlibrary %x", n, got, want)
		}
	}
}
