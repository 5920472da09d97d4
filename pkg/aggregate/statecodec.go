package aggregate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/internal/binenc"
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

// readStateHeader reads what appendStateHeader wrote, refusing another version, no
// kinds or more than maxStateKinds, and more keys than bytes left.
func readStateHeader(r *binenc.Reader, version byte) (kinds []string, base int64, keys uint64, err error) {
	if v := r.Byte(); r.Err() == nil && v != version {
		return nil, 0, 0, fmt.Errorf("version %d, want %d", v, version)
	}
	n := r.Uvarint()
	if r.Err() == nil && (n == 0 || n > maxStateKinds) {
		return nil, 0, 0, fmt.Errorf("%d window kinds, want 1 to %d", n, maxStateKinds)
	}
	for range n {
		id := r.LenBytes()
		if len(id) > maxKindIDBytes {
			r.Fail()
		}
		if r.Err() != nil {
			return nil, 0, 0, r.Err()
		}
		kinds = append(kinds, string(id))
	}
	base, keys = r.Varint(), r.Uvarint()
	if r.Err() != nil {
		return nil, 0, 0, r.Err()
	}
	if keys > uint64(r.Len()) {
		return nil, 0, 0, fmt.Errorf("%d keys in %d bytes", keys, r.Len())
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
// number to dst.
func readSeq(r *binenc.Reader, dst, ref []byte) ([]byte, error) {
	shared, n := r.Uvarint(), r.Uvarint()
	if err := r.Err(); err != nil {
		return dst, err
	}
	if shared > uint64(len(ref)) {
		r.Fail()
		return dst, fmt.Errorf("sequence number shares %d of its reference's %d bytes", shared, len(ref))
	}
	digits, n := n&1 == 1, n>>1
	if n > maxCarriedSeq || shared+n > maxCarriedSeq {
		r.Fail()
		return dst, fmt.Errorf("sequence number longer than %d bytes", maxCarriedSeq)
	}
	dst = append(dst, ref[:shared]...)
	if !digits {
		rest := r.Bytes(int(n))
		return append(dst, rest...), r.Err()
	}
	packed := r.Bytes((int(n) + 1) / 2)
	if err := r.Err(); err != nil {
		return dst, err
	}
	dst, _, err := readDigits(dst, packed, int(n))
	if err != nil {
		r.Fail()
	}
	return dst, err
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
