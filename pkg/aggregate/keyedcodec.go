package aggregate

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/tributary-dev/tributary/internal/binenc"
	"github.com/tributary-dev/tributary/pkg/state"
)

// The keyed state's encoding. A hot key keeps many points, and the whole
// item is rewritten (and billed by its size) on every fold, so points are
// delta-encoded: the time as the difference from the previous point (they
// are kept in time order), the value as a zigzag varint when it is a whole
// number (time on page, counts, amounts in cents) and as 8 bytes otherwise,
// and the distinct value as 6 bytes of its hash (all HyperLogLog needs). A
// typical point takes 3 to 6 bytes, 10 to 12 with a distinct value, so an
// item holds tens of thousands of them (MaxKeyedStateBytes). The first
// encoding was JSON; decodeKeyed still reads it.

// keyedVersion is the first byte of the binary encoding (JSON starts with '{').
const keyedVersion = 2

// Value tags in the low bit of a point's value varint.
const (
	valueWhole = 0 // zigzag(v)<<1: a whole number below 2^53
	valueFloat = 1 // followed by 8 bytes of IEEE 754 bits
)

// encodeKeyed appends buf's binary encoding to dst. Points must be in time
// order (mergePoints keeps them so).
func encodeKeyed(dst []byte, buf *keyedBuf) []byte {
	dst = append(dst, keyedVersion)
	dst = binary.AppendUvarint(dst, uint64(len(buf.Points)))
	var prev int64
	for i := range buf.Points {
		pt := &buf.Points[i]
		dst = binary.AppendVarint(dst, pt.T-prev)
		prev = pt.T
		dst = appendValue(dst, pt.V)
		dst = binenc.AppendBytes(dst, pt.D)
	}
	ids := make([]string, 0, len(buf.Emitted))
	for id := range buf.Emitted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		e := buf.Emitted[id]
		dst = binenc.AppendString(dst, id)
		dst = binary.AppendVarint(dst, e.Start)
		dst = binary.AppendVarint(dst, e.End-e.Start)
		dst = binary.AppendUvarint(dst, uint64(e.Rev))
		dst = binenc.AppendBytes(dst, e.Blob)
	}
	return dst
}

func appendValue(dst []byte, v float64) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v)) {
		i := int64(v)
		z := uint64(i<<1) ^ uint64(i>>63) // zigzag
		return binary.AppendUvarint(dst, z<<1|valueWhole)
	}
	dst = binary.AppendUvarint(dst, valueFloat)
	return binenc.AppendFloat64(dst, v)
}

// pointBytesMax bounds one point's encoding: the time delta and value
// varints (10 bytes each at most), a float's 8 bytes, the distinct length
// and hash. The budget check (keyedFits) counts new points at this size.
const pointBytesMax = 10 + 10 + 8 + 1 + distinctHashBytes

var errKeyedEncoding = errors.New("aggregate: keyed window state: malformed encoding")

// decodeKeyed decodes a keyed state blob: the binary encoding, or the JSON
// one earlier versions wrote.
func decodeKeyed(b []byte) (*keyedBuf, error) {
	buf := &keyedBuf{Emitted: map[string]emitted{}}
	if len(b) == 0 {
		return buf, nil
	}
	if b[0] == '{' {
		if err := json.Unmarshal(b, buf); err != nil {
			return nil, fmt.Errorf("aggregate: keyed window state: %w", err)
		}
		if buf.Emitted == nil {
			buf.Emitted = map[string]emitted{}
		}
		return buf, nil
	}
	if b[0] != keyedVersion {
		return nil, fmt.Errorf("%w: version %d", errKeyedEncoding, b[0])
	}
	r := binenc.NewReader(b[1:], errKeyedEncoding)
	n := r.Uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d points in %d bytes", errKeyedEncoding, n, len(b))
	}
	buf.Points = make([]point, n)
	var t int64
	for i := range buf.Points {
		t += r.Varint()
		pt := &buf.Points[i]
		pt.T = t
		tag := r.Uvarint()
		if tag&1 == valueFloat {
			pt.V = r.Float64()
		} else {
			z := tag >> 1
			pt.V = float64(int64(z>>1) ^ -int64(z&1))
		}
		if d := r.LenBytes(); len(d) > 0 {
			pt.D = append([]byte(nil), d...)
		}
	}
	ne := r.Uvarint()
	for i := uint64(0); i < ne && r.Err() == nil; i++ {
		id := r.LenString()
		start := r.Varint()
		e := emitted{Start: start, End: start + r.Varint(), Rev: int(r.Uvarint())}
		e.Blob = append([]byte(nil), r.LenBytes()...)
		buf.Emitted[id] = e
	}
	if r.Err() != nil || r.Len() != 0 {
		return nil, fmt.Errorf("%w (%d bytes left)", errKeyedEncoding, r.Len())
	}
	return buf, nil
}

// MaxKeyedStateBytes is the budget of one keyed state's encoding: a window
// item's budget (state.WindowItemBudget, DynamoDB's 400 KB less a margin)
// less room for the item's other attributes (keys, version, the per-shard
// fences, the open-windows listing).
const MaxKeyedStateBytes = state.WindowItemBudget - 8<<10
