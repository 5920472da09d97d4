package binenc

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrMalformed is what a Reader reports when NewReader was given no error
// of the codec's own.
var ErrMalformed = errors.New("binenc: malformed encoding")

// Reader reads a binary encoding front to back. The first read that does
// not fit (past the end, an overlong varint, a length larger than what is
// left, a count over its limit) or a call to Fail sets Err and empties the
// Reader, so every later read returns a zero value; a decoder can read on
// and check Err once.
type Reader struct {
	b   []byte
	err error
	bad error // what Err reports once a read failed
}

// NewReader returns a Reader of b that reports bad (ErrMalformed when nil)
// when a read fails. The Reader does not copy b: Bytes and LenBytes return
// parts of it.
func NewReader(b []byte, bad error) Reader {
	if bad == nil {
		bad = ErrMalformed
	}
	return Reader{b: b, bad: bad}
}

// Err is nil while every read has fit, then the error given to NewReader.
func (r *Reader) Err() error { return r.err }

// Len is the number of bytes not yet read (0 after a failure).
func (r *Reader) Len() int { return len(r.b) }

// Fail marks the encoding malformed, for checks only the decoder can make
// (an index out of its table, an unknown tag); the first failure sticks.
func (r *Reader) Fail() {
	if r.err == nil {
		r.err = r.bad
	}
	r.b = nil
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) == 0 {
		r.Fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Uvarint reads an unsigned varint (binary.AppendUvarint); one longer
// than 10 bytes or past 64 bits fails.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zigzag varint (binary.AppendVarint).
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Count reads a uvarint that is a number of things to come, and fails
// when it exceeds limit. Bounding a count before allocating for it keeps
// a forged one from costing more memory than the blob is worth: the
// codecs pass the blob's length (each thing takes at least a byte).
func (r *Reader) Count(limit int) int {
	n := r.Uvarint()
	if n > uint64(max(limit, 0)) {
		r.Fail()
		return 0
	}
	return int(n)
}

// Bytes reads the next n bytes, as a part of the input (copy it to keep
// it past the input's life); a negative n or one past the end fails and
// returns nil.
func (r *Reader) Bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.Fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// LenBytes reads a uvarint length and that many bytes (AppendBytes), as a
// part of the input.
func (r *Reader) LenBytes() []byte {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.Fail()
		return nil
	}
	return r.Bytes(int(n))
}

// LenString reads a uvarint length and that many bytes (AppendString).
func (r *Reader) LenString() string { return string(r.LenBytes()) }

// Float64 reads 8 bytes little-endian as an IEEE 754 float64
// (AppendFloat64).
func (r *Reader) Float64() float64 {
	if len(r.b) < 8 {
		r.Fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// AppendBytes appends b's length as a uvarint, then b (LenBytes reads it).
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendString appends s's length as a uvarint, then s (LenString reads
// it).
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendFloat64 appends v's IEEE 754 bits, 8 bytes little-endian (Float64
// reads it).
func AppendFloat64(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
