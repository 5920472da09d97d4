package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Reading what an interval carries in Lambda's window state: the
// partials (intervalstate.go) and the session and sliding points
// (keyedcarry.go), each one entry in the same framing, and the sequence
// numbers in them.

// Bounds on what a decoded entry may claim.
const (
	maxStateKinds    = 64  // window kinds in a pipeline's state
	maxKindIDBytes   = 256 // a kind's id ("hopping:5m0s:1m0s")
	maxPartialWindow = int64(100 * 365 * 24 * time.Hour / time.Millisecond)
)

// errStateTruncated: an entry ends inside what it claims to hold.
var errStateTruncated = errors.New("truncated")

// appendStateHeader appends the head of an entry: its version, its window
// kinds (uvarint how many, then each one's uvarint length and id), a base
// time (varint, Unix ms) and how many keys follow (uvarint).
func appendStateHeader(b []byte, version byte, kinds []string, base int64, keys int) []byte {
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(kinds)))
	for _, id := range kinds {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	b = binary.AppendVarint(b, base)
	return binary.AppendUvarint(b, uint64(keys))
}

// header reads what appendStateHeader wrote, refusing another version, no
// kinds or more than maxStateKinds, and more keys than bytes left.
func (r *stateReader) header(version byte) (kinds []string, base int64, keys uint64, err error) {
	if v := r.byte(); r.err == nil && v != version {
		return nil, 0, 0, fmt.Errorf("version %d, want %d", v, version)
	}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > maxStateKinds) {
		return nil, 0, 0, fmt.Errorf("%d window kinds, want 1 to %d", n, maxStateKinds)
	}
	for range n {
		id := r.bytes(maxKindIDBytes)
		if r.err != nil {
			return nil, 0, 0, r.err
		}
		kinds = append(kinds, string(id))
	}
	base, keys = r.varint(), r.uvarint()
	if r.err != nil {
		return nil, 0, 0, r.err
	}
	if keys > uint64(len(r.b)) {
		return nil, 0, 0, fmt.Errorf("%d keys in %d bytes", keys, len(r.b))
	}
	return kinds, base, keys, nil
}

// Sequence numbers in carried state: Kinesis's are 56 decimal digits, and
// those of one shard's interval share all but the last few, so each is
// written as the length it shares with a reference (the one before it, or
// the state's own) and the digits that follow, packed two a byte.

// appendSeq appends seq against ref: uvarint the length it shares with
// ref, uvarint the rest's length shifted left once with the low bit set
// when the rest is all digits, then the rest, packed (appendDigits) or as
// it is.
func appendSeq(b []byte, seq, ref string) []byte {
	shared := 0
	for shared < len(seq) && shared < len(ref) && seq[shared] == ref[shared] {
		shared++
	}
	rest := seq[shared:]
	b = binary.AppendUvarint(b, uint64(shared))
	if allDigits(rest) {
		b = binary.AppendUvarint(b, uint64(len(rest))<<1|1)
		return appendDigits(b, rest)
	}
	b = binary.AppendUvarint(b, uint64(len(rest))<<1)
	return append(b, rest...)
}

// readSeq reads what appendSeq wrote against ref, appending the sequence
// number to dst; it returns dst and what follows in b.
func readSeq(dst, b, ref []byte) ([]byte, []byte, error) {
	shared, k := binary.Uvarint(b)
	if k <= 0 || shared > uint64(len(ref)) {
		return dst, nil, fmt.Errorf("sequence number shares %d of its reference's %d bytes", shared, len(ref))
	}
	b = b[k:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return dst, nil, errStateTruncated
	}
	digits, n := n&1 == 1, n>>1
	if n > maxCarriedSeq || shared+n > maxCarriedSeq {
		return dst, nil, fmt.Errorf("sequence number longer than %d bytes", maxCarriedSeq)
	}
	b = b[k:]
	dst = append(dst, ref[:shared]...)
	if digits {
		return readDigits(dst, b, int(n))
	}
	if uint64(len(b)) < n {
		return dst, nil, errStateTruncated
	}
	return append(dst, b[:n]...), b[n:], nil
}

// appendDigits appends decimal digits packed two a byte, the first in the
// high nibble; an odd count leaves the last low nibble 0.
func appendDigits(b []byte, digits string) []byte {
	for j := 0; j < len(digits); j += 2 {
		hi, lo := digits[j]-'0', byte(0)
		if j+1 < len(digits) {
			lo = digits[j+1] - '0'
		}
		b = append(b, hi<<4|lo)
	}
	return b
}

// readDigits reads n digits appendDigits packed, appending them to dst as
// text; it returns dst and what follows in b.
func readDigits(dst, b []byte, n int) ([]byte, []byte, error) {
	packed := (n + 1) / 2
	if len(b) < packed {
		return dst, nil, errStateTruncated
	}
	for j := range n {
		d := b[j/2] >> 4
		if j%2 == 1 {
			d = b[j/2] & 0x0f
		}
		if d > 9 {
			return dst, nil, fmt.Errorf("a sequence number digit is %d", d)
		}
		dst = append(dst, '0'+d)
	}
	return dst, b[packed:], nil
}

// stateReader reads an entry; the first error sticks.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) fail() {
	if r.err == nil {
		r.err = errStateTruncated
	}
	r.b = nil
}

func (r *stateReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *stateReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a uvarint length, at most limit, and that many bytes.
func (r *stateReader) bytes(limit int) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// seq reads a sequence number appendSeq wrote against ref, appending it
// to dst.
func (r *stateReader) seq(dst, ref []byte) ([]byte, error) {
	var err error
	dst, r.b, err = readSeq(dst, r.b, ref)
	if err != nil {
		r.b = nil
	}
	return dst, err
}
