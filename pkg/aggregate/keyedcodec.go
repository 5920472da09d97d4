package aggregate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/tributary-dev/tributary/internal/binenc"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// The keyed state's encoding. A hot key keeps many points, and the whole
// item is rewritten (and billed by its size, a write unit per KB) on every
// fold, so points are delta-encoded: the time as the difference from the
// previous point (they are kept in time order), the value as a zigzag
// varint when it is a whole number (time on page, counts, amounts in cents)
// and as 8 bytes otherwise, and the distinct value as 6 bytes of its hash
// (all HyperLogLog needs). A typical point takes 3 to 5 bytes, 10 to 12
// with a distinct value, so an item holds tens of thousands of them
// (MaxKeyedStateBytes). A record that arrived after some of its windows
// were closed keeps that close time (its threshold) as a varint after its
// time, flagged in the value's tag; the state's Frozen time follows the
// emitted windows. A state with results a finalize recorded and has not
// published yet (Pending) carries them after the Frozen time.
//
// Version 5, written now, starts with a flags byte: whether the points
// carry distinct values (a pipeline without a distinct aggregate spends no
// byte a point on an empty one) and whether pending results follow. Its
// emitted windows are written without their ids, which are their bounds'
// window ids (window.Of(start, end).ID(), 49 bytes each). At the README's
// load a session state holds about 70 points and 3 emitted windows; the
// two savings take about 220 bytes off an item of about 1 KB, the size at
// which a write costs two units instead of one. decodeKeyed reads every
// earlier version: the first was JSON, the second had no thresholds nor
// Frozen time, the third (the fourth with pending results) wrote an empty
// distinct value for every point and each emitted window's id; their ids
// are read as their bounds' window ids, as they were written.
//
// A state whose session runs are held as their aggregates (sessionfold.go)
// sets a third flag, keyedHasRuns: after the points, the held runs' count,
// then each run's index after the previous one, its span and its
// aggregate; a run's own value is 0 and its distinct value empty. Code
// from before held runs refuses the flag (an unknown flag is an error),
// so it never reads a run as one record.
//
// A process running code from before version 5 cannot read it: on such a
// state its batch fails and is retried, so a deployment that goes back to
// that code must first drain the states (their windows closed past the
// allowed lateness) or go forward again.

// keyedVersion is the first byte of the binary encoding (JSON starts with
// '{'), followed by the keyedFlags byte.
const keyedVersion = 5

// keyedFlags of version 5.
const (
	keyedHasDistinct = 1 << 0 // every point carries its distinct value's length and bytes
	keyedHasPending  = 1 << 1 // pending results follow the Frozen time
	keyedHasRuns     = 1 << 2 // held session runs follow the points (sessionfold.go)
	keyedFlagsKnown  = keyedHasDistinct | keyedHasPending | keyedHasRuns
)

// keyedVersion3 wrote every point's distinct value (maybe empty) and each
// emitted window's id, and keyedVersion3Pending is keyedVersion3 followed
// by the pending results.
const (
	keyedVersion3        = 3
	keyedVersion3Pending = 4
)

// pendingKinds are the kinds of pending results, by their encoded number.
var pendingKinds = [...]string{"final", "correction", "retraction"}

// pendingAsEmitted flags a pending result's kind when its value is its
// window's emitted value (the usual case): the value is not written twice.
const pendingAsEmitted = 0x80

// keyedVersion2 is the binary encoding before thresholds: every point on
// time, no Frozen time.
const keyedVersion2 = 2

// Value tags in the low bits of a point's value varint: bit 0 says how the
// value is written; from version 3, bit 1 says a threshold follows.
const (
	valueWhole = 0 // zigzag(v)<<1 (from version 3: <<2): a whole number below 2^53
	valueFloat = 1 // followed by 8 bytes of IEEE 754 bits
	valueLate  = 2 // from version 3: followed by the threshold less the time, a uvarint
)

// encodeKeyed appends buf's binary encoding (version 5) to dst. Points must
// be in time order (mergePoints keeps them so), and each emitted window
// must be under its window id (window.Of(Start, End).ID()).
func encodeKeyed(dst []byte, buf *keyedBuf) []byte {
	var flags byte
	for i := range buf.Points {
		if len(buf.Points[i].D) > 0 {
			flags |= keyedHasDistinct
			break
		}
	}
	if len(buf.Pending) > 0 {
		flags |= keyedHasPending
	}
	runs := 0
	for i := range buf.Points {
		if buf.Points[i].Agg != nil {
			runs++
		}
	}
	if runs > 0 {
		flags |= keyedHasRuns
	}
	dst = append(dst, keyedVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(len(buf.Points)))
	var prev int64
	for i := range buf.Points {
		pt := &buf.Points[i]
		dst = binary.AppendVarint(dst, pt.T-prev)
		prev = pt.T
		dst = appendValue(dst, pt.V, pt.late())
		if pt.late() {
			dst = binary.AppendUvarint(dst, uint64(pt.Th-pt.T))
		}
		if flags&keyedHasDistinct != 0 {
			dst = binenc.AppendBytes(dst, pt.D)
		}
	}
	if runs > 0 {
		// Each held run: its index after the previous one's, the span to
		// its last record, its aggregate (its value above is 0, its
		// distinct value empty).
		dst = binary.AppendUvarint(dst, uint64(runs))
		prevIdx := -1
		for i := range buf.Points {
			pt := &buf.Points[i]
			if pt.Agg == nil {
				continue
			}
			dst = binary.AppendUvarint(dst, uint64(i-prevIdx-1))
			dst = binary.AppendUvarint(dst, uint64(pt.Until-pt.T))
			dst = binenc.AppendBytes(dst, pt.Agg)
			prevIdx = i
		}
	}
	ids := make([]string, 0, len(buf.Emitted))
	for id := range buf.Emitted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		e := buf.Emitted[id]
		dst = binary.AppendVarint(dst, e.Start)
		dst = binary.AppendVarint(dst, e.End-e.Start)
		dst = binary.AppendUvarint(dst, uint64(e.Rev))
		dst = binenc.AppendBytes(dst, e.Blob)
	}
	dst = binary.AppendVarint(dst, buf.Frozen)
	if len(buf.Pending) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(buf.Pending)))
	for _, r := range buf.Pending {
		kind := 0
		for i, k := range pendingKinds {
			if k == r.Kind {
				kind = i
			}
		}
		blob := r.Blob
		if e, ok := buf.Emitted[window.Of(r.Start, r.End).ID()]; ok && e.Rev == r.Rev && blob != nil && bytes.Equal(e.Blob, blob) {
			kind |= pendingAsEmitted
			blob = nil
		}
		dst = append(dst, byte(kind))
		dst = binary.AppendVarint(dst, r.Start)
		dst = binary.AppendVarint(dst, r.End-r.Start)
		dst = binary.AppendUvarint(dst, uint64(r.Rev))
		dst = binenc.AppendBytes(dst, blob)
		dst = binenc.AppendBytes(dst, r.Prev)
	}
	return dst
}

func appendValue(dst []byte, v float64, late bool) []byte {
	var tag uint64
	if late {
		tag = valueLate
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v)) {
		i := int64(v)
		z := uint64(i<<1) ^ uint64(i>>63) // zigzag
		return binary.AppendUvarint(dst, z<<2|tag|valueWhole)
	}
	dst = binary.AppendUvarint(dst, tag|valueFloat)
	return binenc.AppendFloat64(dst, v)
}

// pointBytesMax bounds one point's encoding: the time delta, value and
// threshold varints (10 bytes each at most), a float's 8 bytes, the
// distinct length and hash. The budget check (overBudget) counts new points
// at this size.
const pointBytesMax = 10 + 10 + 10 + 8 + 1 + distinctHashBytes

var errKeyedEncoding = errors.New("aggregate: keyed window state: malformed encoding")

// decodeKeyed decodes a keyed state blob: the binary encoding, or those
// earlier versions wrote.
func decodeKeyed(b []byte) (*keyedBuf, error) {
	buf := &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold}
	if len(b) == 0 {
		return buf, nil
	}
	if b[0] == '{' {
		var old keyedBuf
		if err := json.Unmarshal(b, &old); err != nil {
			return nil, fmt.Errorf("aggregate: keyed window state: %w", err)
		}
		buf.Points = old.Points
		for _, e := range old.Emitted {
			buf.Emitted[window.Of(e.Start, e.End).ID()] = e
		}
		for i := range buf.Points {
			buf.Points[i].Th = noThreshold
		}
		freezeEmitted(buf)
		return buf, nil
	}
	version, body := b[0], b[1:]
	var flags byte
	switch version {
	case keyedVersion:
		if len(body) == 0 || body[0]&^keyedFlagsKnown != 0 {
			return nil, fmt.Errorf("%w: version %d without its flags", errKeyedEncoding, version)
		}
		flags, body = body[0], body[1:]
	case keyedVersion3Pending:
		flags = keyedHasDistinct | keyedHasPending
	case keyedVersion3, keyedVersion2:
		flags = keyedHasDistinct
	default:
		return nil, fmt.Errorf("%w: version %d", errKeyedEncoding, version)
	}
	thresholds := version != keyedVersion2 // and whole values shifted by 2
	ids := version != keyedVersion         // emitted windows written with their ids
	shift := uint(1)                       // a whole value's zigzag is the tag shifted by this
	if thresholds {
		shift = 2
	}
	r := binenc.NewReader(body, errKeyedEncoding)
	n := r.Uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d points in %d bytes", errKeyedEncoding, n, len(b))
	}
	buf.Points = make([]point, n)
	var t int64
	for i := range buf.Points {
		t += r.Varint()
		pt := &buf.Points[i]
		pt.T, pt.Th = t, noThreshold
		tag := r.Uvarint()
		if tag&valueFloat != 0 {
			pt.V = r.Float64()
		} else {
			z := tag >> shift
			pt.V = float64(int64(z>>1) ^ -int64(z&1))
		}
		if thresholds && tag&valueLate != 0 {
			late := r.Uvarint()
			if late == 0 || late > math.MaxInt64-uint64(max(t, 0)) {
				return nil, fmt.Errorf("%w: point %d: threshold out of range", errKeyedEncoding, i)
			}
			pt.Th = t + int64(late)
		}
		if flags&keyedHasDistinct != 0 {
			if d := r.LenBytes(); len(d) > 0 {
				pt.D = append([]byte(nil), d...)
			}
		}
	}
	if flags&keyedHasRuns != 0 {
		if err := decodeRuns(&r, buf.Points); err != nil {
			return nil, err
		}
	}
	ne := r.Uvarint()
	for i := uint64(0); i < ne && r.Err() == nil; i++ {
		if ids {
			r.LenString() // the bounds' window id, as written
		}
		start := r.Varint()
		e := emitted{Start: start, End: start + r.Varint(), Rev: int(r.Uvarint())}
		e.Blob = append([]byte(nil), r.LenBytes()...)
		buf.Emitted[window.Of(e.Start, e.End).ID()] = e
	}
	if thresholds {
		buf.Frozen = r.Varint()
	} else {
		freezeEmitted(buf)
	}
	if flags&keyedHasPending != 0 {
		np := r.Uvarint()
		if np > uint64(len(b)) {
			return nil, fmt.Errorf("%w: %d pending results in %d bytes", errKeyedEncoding, np, len(b))
		}
		for i := uint64(0); i < np && r.Err() == nil; i++ {
			kind := r.Byte()
			asEmitted := kind&pendingAsEmitted != 0
			kind &^= pendingAsEmitted
			if int(kind) >= len(pendingKinds) {
				return nil, fmt.Errorf("%w: pending result %d: kind %d", errKeyedEncoding, i, kind)
			}
			start := r.Varint()
			res := pendingResult{Kind: pendingKinds[kind], Start: start, End: start + r.Varint(), Rev: int(r.Uvarint())}
			if v := r.LenBytes(); len(v) > 0 {
				res.Blob = append([]byte(nil), v...)
			}
			if asEmitted {
				e, ok := buf.Emitted[window.Of(res.Start, res.End).ID()]
				if !ok || e.Rev != res.Rev {
					return nil, fmt.Errorf("%w: pending result %d: no emitted value", errKeyedEncoding, i)
				}
				res.Blob = e.Blob
			}
			if v := r.LenBytes(); len(v) > 0 {
				res.Prev = append([]byte(nil), v...)
			}
			buf.Pending = append(buf.Pending, res)
		}
	}
	if r.Err() != nil || r.Len() != 0 {
		return nil, fmt.Errorf("%w (%d bytes left)", errKeyedEncoding, r.Len())
	}
	return buf, nil
}

// decodeRuns reads the held session runs that follow the points into
// them: each an on-time point with no value of its own, its span not
// negative, its aggregate not empty.
func decodeRuns(r *binenc.Reader, pts []point) error {
	n := r.Uvarint()
	if n == 0 || n > uint64(len(pts)) {
		return fmt.Errorf("%w: %d held runs among %d points", errKeyedEncoding, n, len(pts))
	}
	idx := -1
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		skip := r.Uvarint()
		if skip >= uint64(len(pts)-idx-1) {
			return fmt.Errorf("%w: held run %d is past the points", errKeyedEncoding, i)
		}
		idx += int(skip) + 1
		pt := &pts[idx]
		span := r.Uvarint()
		if span > math.MaxInt64-uint64(max(pt.T, 0)) {
			return fmt.Errorf("%w: held run %d: span out of range", errKeyedEncoding, i)
		}
		blob := r.LenBytes()
		if r.Err() != nil {
			break
		}
		if len(blob) == 0 || pt.late() || pt.V != 0 || pt.D != nil {
			return fmt.Errorf("%w: held run %d: not an on-time point with an aggregate", errKeyedEncoding, i)
		}
		pt.Until, pt.Agg = pt.T+int64(span), append([]byte(nil), blob...)
	}
	return nil
}

// freezeEmitted gives a state written before Frozen times one: the latest
// end of its emitted windows. Those windows were emitted with every point
// folded before them, and earlier versions may have pruned points they
// need, so none of them is recomputed (which would retract or shrink it).
func freezeEmitted(buf *keyedBuf) {
	for _, e := range buf.Emitted {
		buf.Frozen = max(buf.Frozen, e.End)
	}
}

// MaxKeyedStateBytes is the budget of one keyed state's encoding: a window
// item's budget (state.WindowItemBudget, DynamoDB's 400 KB less a margin)
// less room for the item's other attributes (keys, version, the per-shard
// fences, the open-windows listing).
const MaxKeyedStateBytes = state.WindowItemBudget - 8<<10
