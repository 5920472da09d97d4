package join

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/internal/binenc"
)

// The state's encoding: the whole item is rewritten (and billed by its
// size) on every fold, so it is compact binary: times as deltas from the
// previous record's (records are kept in time order), ordinals and counts
// as varints, ids and data as length-prefixed bytes.

const stateVersion = 1

// flags of an encoded record.
const (
	flagRight   = 1 << 0
	flagMatched = 1 << 1
	flagClosed  = 1 << 2
)

// recBytes bounds a record's encoding: flags, time delta, ordinal, and the
// id and data with their lengths.
func recBytes(r *rec) int { return 1 + binary.MaxVarintLen64 + 5 + 3 + len(r.id) + 5 + len(r.data) }

func encodeState(dst []byte, st *keyState) []byte {
	dst = append(dst, stateVersion)
	dst = binary.AppendUvarint(dst, uint64(st.next))
	dst = binary.AppendUvarint(dst, uint64(len(st.recs)))
	var prev int64
	for i := range st.recs {
		r := &st.recs[i]
		var f byte
		if r.side == SideRight {
			f |= flagRight
		}
		if r.matched {
			f |= flagMatched
		}
		if r.closed {
			f |= flagClosed
		}
		dst = append(dst, f)
		dst = binary.AppendVarint(dst, r.t-prev)
		prev = r.t
		dst = binary.AppendUvarint(dst, uint64(r.n))
		dst = binenc.AppendString(dst, r.id)
		if r.data == nil {
			dst = binary.AppendUvarint(dst, 0)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(r.data))+1)
			dst = append(dst, r.data...)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.rates)))
	for _, rt := range st.rates {
		dst = appendRate(dst, rt)
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.out)))
	for _, o := range st.out {
		dst = append(dst, byte(o.kind))
		switch o.kind {
		case outJoined:
			dst = binary.AppendUvarint(dst, uint64(o.l))
			dst = binary.AppendUvarint(dst, uint64(o.r))
		case outLeftOnly:
			dst = binary.AppendUvarint(dst, uint64(o.l))
		case outRightOnly:
			dst = binary.AppendUvarint(dst, uint64(o.r))
		case outRate:
			dst = appendRate(dst, o.rate)
		}
	}
	return dst
}

func appendRate(dst []byte, rt rate) []byte {
	dst = binary.AppendVarint(dst, rt.start)
	dst = binary.AppendUvarint(dst, uint64(rt.left))
	return binary.AppendUvarint(dst, uint64(rt.matched))
}

var errEncoding = errors.New("join: state: malformed encoding")

// decodeState decodes encodeState's output; empty input is an empty state.
func decodeState(b []byte) (*keyState, error) {
	st := &keyState{}
	if len(b) == 0 {
		return st, nil
	}
	if b[0] != stateVersion {
		return nil, fmt.Errorf("%w: version %d", errEncoding, b[0])
	}
	r := binenc.NewReader(b[1:], errEncoding)
	st.next = uint32(r.Uvarint())
	n := r.Uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", errEncoding, n, len(b))
	}
	st.recs = make([]rec, n)
	var t int64
	for i := range st.recs {
		x := &st.recs[i]
		f := r.Byte()
		x.side = SideLeft
		if f&flagRight != 0 {
			x.side = SideRight
		}
		x.matched, x.closed = f&flagMatched != 0, f&flagClosed != 0
		t += r.Varint()
		x.t = t
		x.n = uint32(r.Uvarint())
		x.id = r.LenString()
		if l := r.Uvarint(); l > 0 {
			x.data = append([]byte(nil), r.Bytes(int(l-1))...)
		}
	}
	nr := r.Uvarint()
	if nr > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d rate windows in %d bytes", errEncoding, nr, len(b))
	}
	for i := uint64(0); i < nr && r.Err() == nil; i++ {
		st.rates = append(st.rates, readRate(&r))
	}
	no := r.Uvarint()
	if no > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d outputs in %d bytes", errEncoding, no, len(b))
	}
	for i := uint64(0); i < no && r.Err() == nil; i++ {
		o := outRef{kind: outKind(r.Byte())}
		switch o.kind {
		case outJoined:
			o.l, o.r = uint32(r.Uvarint()), uint32(r.Uvarint())
		case outLeftOnly:
			o.l = uint32(r.Uvarint())
		case outRightOnly:
			o.r = uint32(r.Uvarint())
		case outRate:
			o.rate = readRate(&r)
		default:
			return nil, fmt.Errorf("%w: output kind %d", errEncoding, o.kind)
		}
		st.out = append(st.out, o)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errEncoding, r.Len())
	}
	return st, nil
}

// readRate reads appendRate's output.
func readRate(r *binenc.Reader) rate {
	return rate{start: r.Varint(), left: uint32(r.Uvarint()), matched: uint32(r.Uvarint())}
}
