package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/internal/binenc"
)

// On the per-interval path a session or sliding window's records ride in
// Lambda's tumbling window state with the partial aggregates, and are
// folded into their keyed state once per key at the interval's flush: one
// write per key and kind per interval instead of one per invocation that
// meets the key. Each point keeps the close time it arrived at, so the fold
// at the flush judges it as a fold at its arrival would have: the shard's
// watermark moves only at the flush, and the ticker's idle advance is held
// at the earliest carried point (stateHold). Past carriedBudget the points
// are written as overflow items (overflow.go), so the state stays far
// inside Lambda's 1 MB.

// stateCarried prefixes a carried entry's key: c|<kind>|<key> → base64 of
// the points in arrival order (appendCarriedPoints). An entry under
// stateCarriedV1 (k|) is one an earlier version wrote, each point whole
// (appendCarriedPointV1): still read, so an interval that began before an
// update flushes after it.
//
// Every key's points are now one entry, stateCarriedAll (encode): written
// against the state's stateSeq and a base time, they take some 12 bytes a
// point, not 25, and the key and kind are not repeated in an entry name
// per key. The reader of c| entries before it takes its name for kind ""
// and key "" and refuses its value: unpadded base64, which that reader's
// padded decoding refuses unless its length is a multiple of four, and
// then a second byte (the count of kinds, at least 1) that it reads as a
// first point sharing digits with no previous one. Code from before it
// fails the invocation and Lambda retries it, rather than losing the
// points.
const (
	stateCarried      = "c|"
	stateCarriedV1    = "k|"
	stateCarriedAll   = "c||"
	carriedAllVersion = 1
)

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
		if k == stateOverflow {
			continue // the names of overflow items (overflow.go)
		}
		if k == stateCarriedAll {
			b, err := base64.RawStdEncoding.DecodeString(v)
			if err == nil {
				err = decodeCarriedAll(b, st[stateSeq], out)
			}
			if err != nil {
				return nil, 0, fmt.Errorf("aggregate: window state entry %q: %w", k, err)
			}
			size += len(k) + len(v)
			continue
		}
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

// encode adds the carried points to an interval's state, as its one
// stateCarriedAll entry, and returns the bytes they take there; ref is the
// state's stateSeq, every point's sequence number at most and sharing most
// of its digits.
func (c carried) encode(st map[string]string, ref string) int {
	if len(c) == 0 {
		return 0
	}
	v := base64.RawStdEncoding.EncodeToString(c.append(make([]byte, 0, 64*len(c)), ref))
	st[stateCarriedAll] = v
	return len(stateCarriedAll) + len(v)
}

// append appends the carried points' encoding (what a stateCarriedAll
// entry holds, decodeCarriedAll reads) to b, each key's points against ref.
func (c carried) append(b []byte, ref string) []byte {
	kinds := map[string]int{}
	var kindIDs []string
	base, first, keys := int64(0), true, 0
	for k, pts := range c {
		if len(pts) > 0 {
			keys++
		}
		if _, ok := kinds[k.kind]; !ok {
			kinds[k.kind] = len(kindIDs)
			kindIDs = append(kindIDs, k.kind)
		}
		if len(pts) > 0 && (first || pts[0].T < base) {
			base, first = pts[0].T, false
		}
	}
	b = appendStateHeader(b, carriedAllVersion, kindIDs, base, keys)
	for k, pts := range c {
		if len(pts) == 0 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(k.key)))
		b = append(b, k.key...)
		b = binary.AppendUvarint(b, uint64(kinds[k.kind]))
		b = binary.AppendUvarint(b, uint64(len(pts)))
		b = appendCarriedPoints(b, pts, ref, base)
	}
	return b
}

// decodeCarriedAll reads the stateCarriedAll entry encode wrote into out,
// refusing anything it could not have written.
func decodeCarriedAll(b []byte, ref string, out carried) error {
	r := binenc.NewReader(b, errStateTruncated)
	kindIDs, base, keys, err := readStateHeader(&r, carriedAllVersion)
	if err != nil {
		return err
	}
	for i := uint64(0); i < keys && r.Err() == nil; i++ {
		key := r.LenBytes()
		kind, count := r.Uvarint(), r.Uvarint()
		if r.Err() != nil {
			break
		}
		if kind >= uint64(len(kindIDs)) {
			return fmt.Errorf("key %q: window kind %d of %d", key, kind, len(kindIDs))
		}
		if count == 0 || count > uint64(r.Len()) {
			return fmt.Errorf("key %q: %d points in %d bytes", key, count, r.Len())
		}
		pts, rest, err := readCarriedPoints(r.Bytes(r.Len()), int(count), ref, base)
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		r = binenc.NewReader(rest, errStateTruncated)
		kk := keyedKey{key: string(key), kind: kindIDs[kind]}
		out[kk] = append(out[kk], pts...)
	}
	if r.Err() == nil && r.Len() > 0 {
		return fmt.Errorf("%d bytes after the last key", r.Len())
	}
	return r.Err()
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
// whole (appendCarriedPointV1): a shard's points stay inside the 256 KB budget then fixed,
// which at 100 events a second over 1,000 keys they did not, each key's
// session folded twice an interval.
//
// The first point is written against prevSeq and prevT: "" and 0 in an
// entry of its own (stateCarried), the state's stateSeq and the entry's
// base time in the one entry of every key (stateCarriedAll).
func appendCarriedPoints(b []byte, pts []carriedPoint, prevSeq string, prevT int64) []byte {
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
			b = appendDigits(b, suffix)
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

// decodeCarriedPoints reads what appendCarriedPoints wrote in an entry of
// its own, refusing anything it could not have written.
func decodeCarriedPoints(b []byte) ([]carriedPoint, error) {
	pts, _, err := readCarriedPoints(b, -1, "", 0)
	return pts, err
}

// readCarriedPoints reads count points appendCarriedPoints wrote against
// firstSeq and firstT (count < 0: every point to the end of b), and
// returns what follows them.
func readCarriedPoints(b []byte, count int, firstSeq string, firstT int64) ([]carriedPoint, []byte, error) {
	var out []carriedPoint
	// Room for a few points' sequence numbers and ends; more grow.
	room := 8
	if count > 0 {
		out = make([]carriedPoint, 0, min(count, len(b)))
		room = min(count, room)
	}
	prevT := firstT
	// The sequence numbers are read one after another into seqs (each
	// shares a prefix with the one before) and made one string at the
	// end, which each point's Seq is a part of: one allocation, not one a
	// point.
	seqs := append(make([]byte, 0, len(firstSeq)*(room+1)), firstSeq...)
	ends := append(make([]int, 0, room+1), len(seqs))
	prevSeq := func() []byte {
		start := 0
		if len(ends) > 1 {
			start = ends[len(ends)-2]
		}
		return seqs[start:ends[len(ends)-1]]
	}
	for (count < 0 && len(b) > 0) || len(out) < count {
		if len(b) == 0 {
			return nil, nil, errCarriedTruncated
		}
		var p carriedPoint
		flags := b[0]
		b = b[1:]
		if flags >= carriedSeqDigits<<1 {
			return nil, nil, fmt.Errorf("carried point %d: unknown flags %#x", len(out), flags)
		}
		shared, k := binary.Uvarint(b)
		if k <= 0 || shared > uint64(len(prevSeq())) {
			return nil, nil, fmt.Errorf("carried point %d: sequence number shares %d of the previous one's %d bytes", len(out), shared, len(prevSeq()))
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxCarriedSeq || shared+n > maxCarriedSeq {
			return nil, nil, fmt.Errorf("carried point %d: sequence number longer than %d bytes", len(out), maxCarriedSeq)
		}
		b = b[k:]
		// seqs may move as it grows: the previous number is copied from
		// where it is now.
		seqs = append(seqs, prevSeq()[:shared]...)
		if flags&carriedSeqDigits != 0 {
			var err error
			if seqs, b, err = readDigits(seqs, b, int(n)); err != nil {
				if errors.Is(err, errStateTruncated) {
					return nil, nil, errCarriedTruncated
				}
				return nil, nil, fmt.Errorf("carried point %d: %w", len(out), err)
			}
		} else {
			if uint64(len(b)) < n {
				return nil, nil, errCarriedTruncated
			}
			seqs, b = append(seqs, b[:n]...), b[n:]
		}
		ends = append(ends, len(seqs))
		dt, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, errCarriedTruncated
		}
		p.T, b = prevT+dt, b[k:]
		if flags&carriedIntValue != 0 {
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, nil, errCarriedTruncated
			}
			p.V, b = float64(v), b[k:]
		} else {
			if len(b) < 8 {
				return nil, nil, errCarriedTruncated
			}
			p.V, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		}
		p.Th = noThreshold
		if flags&carriedThreshold != 0 {
			d, k := binary.Varint(b)
			if k <= 0 {
				return nil, nil, errCarriedTruncated
			}
			p.Th, b = p.T+d, b[k:]
		}
		if flags&carriedDistinct != 0 {
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n || n > distinctHashBytes {
				return nil, nil, errCarriedTruncated
			}
			p.D, b = append([]byte{}, b[k:k+int(n)]...), b[k+int(n):]
		}
		p.Counted = flags&carriedCounted != 0
		prevT = p.T
		out = append(out, p)
	}
	all := string(seqs)
	for i := range out {
		out[i].Seq = all[ends[i]:ends[i+1]]
	}
	return out, b, nil
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
