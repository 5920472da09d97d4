package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// On the per-interval path a session or sliding window's records ride in
// Lambda's tumbling window state with the partial aggregates, and are
// folded into their keyed state once per key at the interval's flush: one
// write per key and kind per interval instead of one per invocation that
// meets the key. Each point keeps the close time it arrived at, so the fold
// at the flush judges it as a fold at its arrival would have: the shard's
// watermark moves only at the flush, and the ticker's idle advance is held
// at the earliest carried point (stateHold). Past carryBudget the points
// are folded at once, as before, so the state stays far inside Lambda's
// 1 MB.

// stateCarried prefixes a carried entry's key: c|<kind>|<key> → base64 of
// the points in arrival order (appendCarriedPoints). An entry under
// stateCarriedV1 (k|) is one an earlier version wrote, each point whole
// (appendCarriedPointV1): still read, so an interval that began before an
// update flushes after it.
const (
	stateCarried   = "c|"
	stateCarriedV1 = "k|"
)

// carryBudget bounds the carried points' share of the window state (the
// encoded entries, keys included); the partials and the dedupe claims
// (pendingStateBudget) share the rest of Lambda's 1 MB.
const carryBudget = 256 << 10

// carriedPoint is a point waiting for the flush. Counted marks a record
// already counted in LateDropped, or known as redelivered, in the
// invocation that read it: the fold does not count it again.
type carriedPoint struct {
	point
	Counted bool
}

// carried is an interval's carried points by key and kind.
type carried map[keyedKey][]carriedPoint

// decodeCarried reads the carried points of an interval's state.
func decodeCarried(st map[string]string) (carried, int, error) {
	out := carried{}
	size := 0
	for k, v := range st {
		var rest string
		var decode func([]byte) ([]carriedPoint, error)
		switch {
		case strings.HasPrefix(k, stateCarried):
			rest, decode = k[len(stateCarried):], decodeCarriedPoints
		case strings.HasPrefix(k, stateCarriedV1):
			rest, decode = k[len(stateCarriedV1):], decodeCarriedPointsV1
		default:
			continue
		}
		kind, key, ok := strings.Cut(rest, "|")
		if !ok {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q is malformed", k)
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		pts, err := decode(b)
		if err != nil {
			return nil, 0, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
		}
		kk := keyedKey{key: key, kind: kind}
		if have, ok := out[kk]; ok {
			pts = append(have, pts...) // the same key and kind in both encodings
		}
		out[kk] = pts
		size += len(k) + len(v)
	}
	return out, size, nil
}

// encode adds the carried points to an interval's state and returns the
// bytes they take there.
func (c carried) encode(st map[string]string) int {
	// Every entry, name then value, in one buffer made one string and cut
	// in parts.
	var b, kv []byte
	cuts := make([][2]int, 0, len(c)) // where each entry's name and value end
	for k, pts := range c {
		b = appendCarriedPoints(b[:0], pts)
		kv = append(kv, stateCarried...)
		kv = append(append(append(kv, k.kind...), '|'), k.key...)
		n := len(kv)
		kv = base64.StdEncoding.AppendEncode(kv, b)
		cuts = append(cuts, [2]int{n, len(kv)})
	}
	all, start := string(kv), 0
	for _, cut := range cuts {
		st[all[start:cut[0]]] = all[cut[0]:cut[1]]
		start = cut[1]
	}
	return len(kv)
}

// earliest is the earliest event time carried (zero if none).
func (c carried) earliest() time.Time {
	var first int64
	found := false
	for _, pts := range c {
		for i := range pts {
			if !found || pts[i].T < first {
				first, found = pts[i].T, true
			}
		}
	}
	if !found {
		return time.Time{}
	}
	return time.UnixMilli(first).UTC()
}

// perKey is the most points any keyed kind carries for each grouping key.
func (c carried) perKey() map[string]int {
	out := map[string]int{}
	for k, pts := range c {
		out[k.key] = max(out[k.key], len(pts))
	}
	return out
}

// Flags of an encoded carried point.
const (
	carriedCounted   = 1 << iota // LateDropped counted it already
	carriedIntValue              // the value is an integer, as a varint
	carriedThreshold             // a close time follows, as a varint after T
	carriedDistinct              // a distinct hash follows
	carriedSeqDigits             // the sequence number's new digits are packed two a byte
)

// maxCarriedSeq bounds a decoded sequence number (Kinesis's are 56 digits).
const maxCarriedSeq = 128

// appendCarriedPoints encodes points, each against the one before it:
// its flags; its sequence number as the length it shares with the previous
// one and the digits that follow (consecutive records of a shard share
// most of theirs), packed two a byte; its event time as the difference
// from the previous one; its value as a varint when it is an integer, else
// its 8 bytes; its close time, when it has one, after its event time; and
// its distinct hash. A point takes some 25–45 bytes, not the 80 it took
// whole (appendCarriedPointV1): a shard's points stay inside carryBudget,
// which at 100 events a second over 1,000 keys they did not, each key's
// session folded twice an interval.
func appendCarriedPoints(b []byte, pts []carriedPoint) []byte {
	prevSeq, prevT := "", int64(0)
	for i := range pts {
		p := &pts[i]
		shared := 0
		for shared < len(p.Seq) && shared < len(prevSeq) && p.Seq[shared] == prevSeq[shared] {
			shared++
		}
		suffix := p.Seq[shared:]
		flags := byte(0)
		if p.Counted {
			flags |= carriedCounted
		}
		if isIntValue(p.V) {
			flags |= carriedIntValue
		}
		if p.Th != noThreshold {
			flags |= carriedThreshold
		}
		if p.D != nil {
			flags |= carriedDistinct
		}
		if allDigits(suffix) {
			flags |= carriedSeqDigits
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(suffix)))
		if flags&carriedSeqDigits != 0 {
			for j := 0; j < len(suffix); j += 2 {
				hi, lo := suffix[j]-'0', byte(0)
				if j+1 < len(suffix) {
					lo = suffix[j+1] - '0'
				}
				b = append(b, hi<<4|lo)
			}
		} else {
			b = append(b, suffix...)
		}
		b = binary.AppendVarint(b, p.T-prevT)
		if flags&carriedIntValue != 0 {
			b = binary.AppendVarint(b, int64(p.V))
		} else {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.V))
		}
		if flags&carriedThreshold != 0 {
			b = binary.AppendVarint(b, p.Th-p.T)
		}
		if flags&carriedDistinct != 0 {
			b = binary.AppendUvarint(b, uint64(len(p.D)))
			b = append(b, p.D...)
		}
		prevSeq, prevT = p.Seq, p.T
	}
	return b
}

// isIntValue reports whether v round-trips through an int64 varint.
func isIntValue(v float64) bool {
	return v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var errCarriedTruncated = errors.New("carried points truncated")

// decodeCarriedPoints reads what appendCarriedPoints wrote, refusing
// anything it could not have written.
func decodeCarriedPoints(b []byte) ([]carriedPoint, error) {
	var out []carriedPoint
	prevT := int64(0)
	// The sequence numbers are read one after another into seqs (each
	// shares a prefix with the one before) and made one string at the
	// end, which each point's Seq is a part of: one allocation, not one a
	// point.
	var seqs []byte
	var ends []int
	prevSeq := func() []byte {
		if len(ends) == 0 {
			return nil
		}
		start := 0
		if len(ends) > 1 {
			start = ends[len(ends)-2]
		}
		return seqs[start:ends[len(ends)-1]]
	}
	for len(b) > 0 {
		var p carriedPoint
		flags := b[0]
		b = b[1:]
		if flags >= carriedSeqDigits<<1 {
			return nil, fmt.Errorf("carried point %d: unknown flags %#x", len(out), flags)
		}
		shared, k := binary.Uvarint(b)
		if k <= 0 || shared > uint64(len(prevSeq())) {
			return nil, fmt.Errorf("carried point %d: sequence number shares %d of the previous one's %d bytes", len(out), shared, len(prevSeq()))
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxCarriedSeq || shared+n > maxCarriedSeq {
			return nil, fmt.Errorf("carried point %d: sequence number longer than %d bytes", len(out), maxCarriedSeq)
		}
		b = b[k:]
		// seqs may move as it grows: the previous number is copied from
		// where it is now.
		seqs = append(seqs, prevSeq()[:shared]...)
		if flags&carriedSeqDigits != 0 {
			packed := int(n+1) / 2
			if len(b) < packed {
				return nil, errCarriedTruncated
			}
			for j := 0; j < int(n); j++ {
				d := b[j/2] >> 4
				if j%2 == 1 {
					d = b[j/2] & 0x0f
				}
				if d > 9 {
					return nil, fmt.Errorf("carried point %d: a sequence number digit is %d", len(out), d)
				}
				seqs = append(seqs, '0'+d)
			}
			b = b[packed:]
		} else {
			if uint64(len(b)) < n {
				return nil, errCarriedTruncated
			}
			seqs, b = append(seqs, b[:n]...), b[n:]
		}
		ends = append(ends, len(seqs))
		dt, k := binary.Varint(b)
		if k <= 0 {
			return nil, errCarriedTruncated
		}
		p.T, b = prevT+dt, b[k:]
		if flags&carriedIntValue != 0 {
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, errCarriedTruncated
			}
			p.V, b = float64(v), b[k:]
		} else {
			if len(b) < 8 {
				return nil, errCarriedTruncated
			}
			p.V, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		}
		p.Th = noThreshold
		if flags&carriedThreshold != 0 {
			d, k := binary.Varint(b)
			if k <= 0 {
				return nil, errCarriedTruncated
			}
			p.Th, b = p.T+d, b[k:]
		}
		if flags&carriedDistinct != 0 {
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n || n > distinctHashBytes {
				return nil, errCarriedTruncated
			}
			p.D, b = append([]byte{}, b[k:k+int(n)]...), b[k+int(n):]
		}
		p.Counted = flags&carriedCounted != 0
		prevT = p.T
		out = append(out, p)
	}
	all, start := string(seqs), 0
	for i, end := range ends {
		out[i].Seq, start = all[start:end], end
	}
	return out, nil
}

// decodeCarriedPointsV1 reads the points an earlier version carried, each
// whole: its sequence number, event time, value, close time, distinct hash
// and whether it was counted.
func decodeCarriedPointsV1(b []byte) ([]carriedPoint, error) {
	var out []carriedPoint
	for len(b) > 0 {
		var p carriedPoint
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errCarriedTruncated
		}
		p.Seq, b = string(b[k:k+int(n)]), b[k+int(n):]
		t, k := binary.Varint(b)
		if k <= 0 || len(b)-k < 8 {
			return nil, errCarriedTruncated
		}
		p.T, b = t, b[k:]
		p.V, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		th, k := binary.Varint(b)
		if k <= 0 {
			return nil, errCarriedTruncated
		}
		p.Th, b = th, b[k:]
		n, k = binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n+1 {
			return nil, errCarriedTruncated
		}
		if n > 0 {
			p.D = append([]byte(nil), b[k:k+int(n)]...)
		}
		b = b[k+int(n):]
		p.Counted, b = b[0] == 1, b[1:]
		out = append(out, p)
	}
	return out, nil
}
