package binenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

var errCodec = errors.New("codec: malformed")

// uv is x as a uvarint.
func uv(x uint64) []byte { return binary.AppendUvarint(nil, x) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReaderReadsWhatAppendWrites(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = binary.AppendUvarint(b, math.MaxUint64)
	b = binary.AppendVarint(b, math.MinInt64)
	b = binary.AppendVarint(b, -1)
	b = AppendString(b, "héllo")
	b = AppendString(b, "")
	b = AppendBytes(b, []byte{0, 1, 2})
	b = AppendBytes(b, nil)
	b = AppendFloat64(b, -0.5)
	b = AppendFloat64(b, math.Inf(1))
	b = binary.AppendUvarint(b, 3) // a count
	b = append(b, 9, 8)

	r := NewReader(b, errCodec)
	if got := r.Byte(); got != 7 {
		t.Errorf("Byte: %d", got)
	}
	if got := r.Uvarint(); got != math.MaxUint64 {
		t.Errorf("Uvarint: %d", got)
	}
	if got := r.Varint(); got != math.MinInt64 {
		t.Errorf("Varint: %d", got)
	}
	if got := r.Varint(); got != -1 {
		t.Errorf("Varint: %d", got)
	}
	if got := r.LenString(); got != "héllo" {
		t.Errorf("LenString: %q", got)
	}
	if got := r.LenString(); got != "" {
		t.Errorf("LenString: %q", got)
	}
	if got := r.LenBytes(); !bytes.Equal(got, []byte{0, 1, 2}) {
		t.Errorf("LenBytes: %v", got)
	}
	if got := r.LenBytes(); len(got) != 0 {
		t.Errorf("LenBytes: %v", got)
	}
	if got := r.Float64(); got != -0.5 {
		t.Errorf("Float64: %v", got)
	}
	if got := r.Float64(); !math.IsInf(got, 1) {
		t.Errorf("Float64: %v", got)
	}
	if got := r.Count(3); got != 3 {
		t.Errorf("Count: %d", got)
	}
	if r.Len() != 2 {
		t.Errorf("Len: %d, want 2", r.Len())
	}
	if got := r.Bytes(2); !bytes.Equal(got, []byte{9, 8}) {
		t.Errorf("Bytes: %v", got)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("after reading everything: Err %v, Len %d", r.Err(), r.Len())
	}
}

// TestAppendBytesAreTheFormat pins the bytes the helpers write: the codecs'
// stored state is made of them.
func TestAppendBytesAreTheFormat(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{"string", AppendString([]byte{0xaa}, "ab"), []byte{0xaa, 2, 'a', 'b'}},
		{"empty string", AppendString(nil, ""), []byte{0}},
		{"bytes", AppendBytes(nil, make([]byte, 130))[:2], []byte{0x82, 0x01}},
		{"float64", AppendFloat64(nil, 1.5), []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}},
	} {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s: % x, want % x", tt.name, tt.got, tt.want)
		}
	}
}

// TestReaderRefusesHostileInput: every malformed input sets the codec's
// error, returns zero values from then on, and neither panics nor
// allocates for a length the input does not hold.
func TestReaderRefusesHostileInput(t *testing.T) {
	overlong := bytes.Repeat([]byte{0x80}, 10)                                   // a varint longer than 10 bytes…
	overlong = append(overlong, 0x01)                                            // …ending on the 11th
	over64 := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02} // past 64 bits
	for _, tt := range []struct {
		name string
		in   []byte
		read func(r *Reader) any
	}{
		{"byte of nothing", nil, func(r *Reader) any { return r.Byte() }},
		{"uvarint of nothing", nil, func(r *Reader) any { return r.Uvarint() }},
		{"truncated uvarint", []byte{0x80, 0x80}, func(r *Reader) any { return r.Uvarint() }},
		{"overlong uvarint", overlong, func(r *Reader) any { return r.Uvarint() }},
		{"uvarint past 64 bits", over64, func(r *Reader) any { return r.Uvarint() }},
		{"truncated varint", []byte{0xff}, func(r *Reader) any { return r.Varint() }},
		{"overlong varint", overlong, func(r *Reader) any { return r.Varint() }},
		{"float64 of 7 bytes", make([]byte, 7), func(r *Reader) any { return r.Float64() }},
		{"bytes past the end", []byte{1, 2}, func(r *Reader) any { return r.Bytes(3) }},
		{"negative length", []byte{1, 2}, func(r *Reader) any { return r.Bytes(-1) }},
		{"string longer than the rest", cat(uv(4), []byte("abc")), func(r *Reader) any { return r.LenString() }},
		{"huge string length", cat(uv(1<<62), []byte("abc")), func(r *Reader) any { return r.LenString() }},
		{"length that is negative as an int", cat(uv(math.MaxUint64), []byte("abc")), func(r *Reader) any { return r.LenBytes() }},
		{"bytes with a truncated length", []byte{0x80}, func(r *Reader) any { return r.LenBytes() }},
		{"count over its limit", uv(11), func(r *Reader) any { return r.Count(10) }},
		{"huge count", uv(math.MaxUint64), func(r *Reader) any { return r.Count(math.MaxInt) }},
		{"count with a negative limit", uv(1), func(r *Reader) any { return r.Count(-1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Reader
			allocs := testing.AllocsPerRun(1, func() {
				r = NewReader(tt.in, errCodec)
				got := tt.read(&r)
				if v, ok := got.([]byte); ok && v != nil {
					t.Errorf("read %v, want nil", v)
				}
			})
			if allocs > 1 { // the any of the result
				t.Errorf("%v allocations reading a malformed input", allocs)
			}
			if !errors.Is(r.Err(), errCodec) {
				t.Fatalf("Err = %v, want the codec's error", r.Err())
			}
			if r.Len() != 0 || r.Byte() != 0 || r.Uvarint() != 0 || r.LenString() != "" || r.Float64() != 0 {
				t.Errorf("reads after a failure return data")
			}
			if r.Err() != errCodec {
				t.Errorf("Err after more reads = %v, want the first error, unchanged", r.Err())
			}
		})
	}
}

// TestReaderLeavesTrailingBytes: a decoder finds bytes past its structure
// with Len (the codecs refuse them).
func TestReaderLeavesTrailingBytes(t *testing.T) {
	for _, tt := range []struct {
		in   []byte
		left int
	}{
		{cat(uv(5)), 0},
		{cat(uv(5), []byte{0}), 1},
		{cat(uv(300), []byte{1, 2, 3}), 3},
	} {
		r := NewReader(tt.in, errCodec)
		r.Uvarint()
		if r.Err() != nil || r.Len() != tt.left {
			t.Errorf("% x: Err %v, Len %d, want nil and %d", tt.in, r.Err(), r.Len(), tt.left)
		}
	}
}

func TestFailSticksAndDefaults(t *testing.T) {
	r := NewReader([]byte{1, 2, 3}, nil)
	r.Fail()
	if r.Err() != ErrMalformed || r.Len() != 0 {
		t.Fatalf("Fail: Err %v, Len %d, want ErrMalformed and 0", r.Err(), r.Len())
	}
	r2 := NewReader([]byte{1}, errCodec)
	r2.Byte()
	r2.Byte() // fails
	r2.Fail()
	if r2.Err() != errCodec {
		t.Fatalf("Err %v, want the codec's error", r2.Err())
	}
}

// TestBytesDoesNotLetAppendsOverwriteTheInput: a part returned by Bytes is
// capped, so appending to it copies instead of writing over what follows.
func TestBytesDoesNotLetAppendsOverwriteTheInput(t *testing.T) {
	in := []byte{1, 2, 3, 4}
	r := NewReader(in, errCodec)
	_ = append(r.Bytes(2), 9)
	if in[2] != 3 {
		t.Fatalf("input overwritten: %v", in)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte{1, 0x80, 0x01, 3, 'a', 'b', 'c'}, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, op uint8) {
		r := NewReader(b, errCodec)
		for i := 0; r.Len() > 0 && i < len(b)+1; i++ {
			before := r.Len()
			switch (int(op) + i) % 7 {
			case 0:
				r.Byte()
			case 1:
				r.Uvarint()
			case 2:
				r.Varint()
			case 3:
				r.LenBytes()
			case 4:
				r.Float64()
			case 5:
				r.Count(len(b))
			case 6:
				r.Bytes(int(int8(op)))
			}
			if r.Err() == nil && r.Len() >= before && (int(op)+i)%7 != 6 {
				t.Fatalf("a read that did not fail consumed nothing")
			}
			if r.Err() != nil && r.Len() != 0 {
				t.Fatalf("failed with %d bytes left", r.Len())
			}
		}
	})
}
