package aggregate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Session and sliding windows are defined by the records themselves, so they
// are computed from a buffer of each key's recent records kept in a keyed
// state item (package state): a batch folds its records in with one write per
// key and kind, fenced so a redelivered record is folded once, judging each
// as Kafka Streams does (keyedwindows.go); finalize recomputes the key's
// windows that may still change, writes those the watermark made final (and
// corrections, and retractions of sessions merged into larger ones) and emits
// them. A final window changes only through a late record the correct policy
// accepts (or a session merge such a record makes), never because points
// were pruned: a window past the allowed lateness is frozen, never
// recomputed, before the points only it needs are pruned. This needs one
// shard per key: the config must say the partition key is the grouping key.

// point is one buffered record. Seq is the record's sequence number, for
// folding; it is not stored (the item's per-shard fence says what it holds).
type point struct {
	T int64   `json:"t"` // event time, Unix ms
	V float64 `json:"v"`
	D []byte  `json:"d,omitempty"` // the distinct value's hash (distinctHash), or nil
	// Th is the close time the record arrived at when that is after T
	// (windows ending at or before it were closed to the record), else
	// noThreshold. Earlier encodings have none.
	Th  int64  `json:"-"`
	Seq string `json:"s"`
	// Agg, when not nil, makes the point a held run (sessionfold.go): the
	// on-time records of one session from T to Until, kept as their
	// aggregate (agg.State's encoding) in place of themselves; V and D are
	// then unused.
	Agg   []byte `json:"-"`
	Until int64  `json:"-"`
}

// distinctHashBytes is the size of a stored distinct value.
const distinctHashBytes = 6

// distinctHash is what a keyed point keeps of a distinct value: 48 bits of
// its SHA-256, which is all a HyperLogLog sketch of at most 2^16 registers
// needs (among 30,000 values of one key, two collide with probability
// about 10⁻⁶, which would lower the estimate by one).
func distinctHash(d []byte) []byte {
	if d == nil {
		return nil
	}
	sum := sha256.Sum256(d)
	return sum[:distinctHashBytes]
}

// emitted is what was last written for a final window.
type emitted struct {
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Rev   int    `json:"rev"`
	Blob  []byte `json:"blob"`
}

// keyedBuf is a keyed state item's content.
type keyedBuf struct {
	Points  []point            `json:"points"`
	Emitted map[string]emitted `json:"emitted"`
	// Frozen is the close time of the last finalize (Unix ms; noThreshold
	// before the first): windows ending at or before it are final past the
	// allowed lateness, never recomputed, their points maybe pruned; a
	// record folded later is judged against a close time at least this.
	Frozen int64 `json:"-"`
	// Pending are the results recorded by a finalize that may not be
	// written and published yet, in the order it recorded them.
	Pending []pendingResult `json:"-"`
}

type keyedKey struct{ key, kind string }

func isKeyedKind(k pipeline.WindowKind) bool { return k == pipeline.Session || k == pipeline.Sliding }

// specOf returns the window spec whose ID is kind.
func (p *Processor) specOf(kind string) (pipeline.WindowSpec, bool) {
	for _, ws := range p.cfg.Windows {
		if ws.ID() == kind {
			return ws, true
		}
	}
	return pipeline.WindowSpec{}, false
}

// collectKeyed adds a record to its key's keyed kind (the window spec's
// ID) with the close time it arrives at: the watermark, less the allowed
// lateness under the correct policy. The fold judges it (judgeKeyed):
// whether it is dropped depends on the windows it would join, which the
// key's state holds.
func (c *collector) collectKeyed(kind, key, seq string, et time.Time, value float64, distinct []byte) {
	pt := point{T: et.UnixMilli(), V: value, D: distinctHash(distinct), Th: c.p.thresholdAt(c.wm, et), Seq: seq}
	if c.keyed == nil {
		c.keyed = map[keyedKey][]point{}
	}
	k := keyedKey{key, kind}
	c.keyed[k] = append(c.keyed[k], pt)
}

// thresholdAt is the close time a keyed record at et arrives at under wm
// (the watermark, less the allowed lateness under the correct policy) when
// that is after et, else noThreshold.
func (p *Processor) thresholdAt(wm *window.Watermark, et time.Time) int64 {
	cur := wm.Current()
	if cur.IsZero() {
		return noThreshold
	}
	if p.cfg.Late.Policy == window.Correct {
		cur = cur.Add(-p.cfg.Late.AllowedLateness)
	}
	if th := cur.UnixMilli(); th > et.UnixMilli() {
		return th
	}
	return noThreshold
}

// applyKeyed folds a batch's points into their keyed states and returns the
// keys whose write failed (their first sequence number must be retried).
func (p *Processor) applyKeyed(ctx context.Context, c *collector) (failedSeqs []string) {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, p.concurrency)
	)
	for k, pts := range c.keyed {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			late, err := p.foldKeyed(ctx, c.shard, state.KeyedRef{Pipeline: p.cfg.Name, Key: k.key, Kind: k.kind}, pts, c.closeBy)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				p.log.Error("keyed window state write failed: its records will be retried", "shard", c.shard, "key", k.key, "window", k.kind, "error", err.Error())
				failedSeqs = append(failedSeqs, pts[0].Seq)
				return
			}
			for _, seq := range late {
				c.dropLate(seq)
			}
		}()
	}
	wg.Wait()
	return failedSeqs
}

// foldKeyed adds the points above the state's fence that judgeKeyed keeps
// and lists the state for finalization from the earliest window the new
// points touch. It returns the sequence numbers of records dropped from at
// least one of their windows as late.
//
// With closeBy (not zero: the watermark the flush commits once its writes
// succeed) the same write also records the results of the windows that
// end by it, as the finalize right after the commit would record them in
// a write of its own (finalizeKeyed): that finalize finds them pending and
// only writes their window items, publishes them and clears them.
func (p *Processor) foldKeyed(ctx context.Context, shard string, ref state.KeyedRef, pts []point, closeBy time.Time) (late []string, err error) {
	ws, ok := p.specOf(ref.Kind)
	if !ok {
		return nil, fmt.Errorf("aggregate: no window %s in the pipeline", ref.Kind)
	}
	for attempt := 0; attempt < 8; attempt++ {
		ks, buf, err := p.loadKeyed(ctx, ref, shard)
		if err != nil {
			return nil, err
		}
		var fresh []point
		for _, pt := range pts {
			if ks.Fence == "" || stream.CompareSequence(pt.Seq, ks.Fence) > 0 {
				fresh = append(fresh, pt)
			}
		}
		if len(fresh) == 0 {
			p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(len(pts)))
			return nil, nil
		}
		kept, late := judgeKeyed(ws, buf, fresh)
		blob, openIn, openUntil := ks.Blob, ks.ListedIn, window.Window{Start: ks.ListedUntil, End: ks.ListedUntil}
		if len(kept) > 0 {
			buf.Points = mergePoints(buf.Points, kept)
			if ws.Kind == pipeline.Session && pointsBytes(buf.Points) > p.sessionFoldBytes {
				// Before the results are recorded: a session emitted is
				// not folded, so its value is never recomputed from
				// other bytes.
				if _, err := foldSessionRuns(p.cfg.Aggregates, ws.Gap.Milliseconds(), buf, p.sessionFoldBytes == 0); err != nil {
					return nil, err
				}
			}
			if !closeBy.IsZero() {
				if _, _, _, err := p.recordFinalKeyed(ws, ref.Kind, buf, closeBy); err != nil {
					return nil, err
				}
			}
			earliest := kept[0].T
			for _, pt := range kept {
				earliest = min(earliest, pt.T)
			}
			openIn = p.openIn(shard)
			openUntil = keepListing(ks, openIn, keyedOpenUntil(ws, buf, time.UnixMilli(earliest).UTC()))
			// Sized for the points read and those kept, so it grows once at most.
			blob = encodeKeyed(make([]byte, 0, len(ks.Blob)+len(kept)*pointBytesMax), buf)
		}
		// Every fresh record dropped, the state is written all the same,
		// as it is with its listing, for its fence: a redelivery (a batch
		// again, a final invocation whose response was lost) finds them
		// below it and does not count them in LateDropped again.
		ks2 := ks
		ks2.Blob = blob
		n, err := p.views.SaveKeyed(ctx, ref, shard, ks2, fresh[len(fresh)-1].Seq, openIn, openUntil)
		p.metrics.Add("WriteRequests", metrics.Count, float64(n))
		if errors.Is(err, state.ErrKeyedConflict) {
			p.forgetKeyed(ref, shard)
			continue
		}
		if err != nil {
			return nil, err
		}
		p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(len(pts)-len(fresh)))
		p.rememberKeyed(ref, shard, savedKeyed(ks2, strings.Clone(fresh[len(fresh)-1].Seq), openIn, openUntil))
		return late, nil
	}
	return nil, state.ErrConflict
}

// savedKeyed is ks as state.Views.SaveKeyed(…, ks, fence, openIn,
// openUntil) stored it: the next version, fenced at fence (the fence it
// had when ""), listed at openUntil or not at all.
func savedKeyed(ks state.KeyedState, fence, openIn string, openUntil window.Window) state.KeyedState {
	ks.Version++
	if fence != "" {
		ks.Fence = fence
	}
	ks.ListedIn, ks.ListedUntil = "", time.Time{}
	if openIn != "" && !openUntil.End.IsZero() {
		ks.ListedIn, ks.ListedUntil = openIn, openUntil.End
	}
	return ks
}

// keepListing is where a fold lists the state in the open-windows index:
// at openUntil, or where it is listed already when that is no later. A
// listing earlier than needed only has each finalize read the state (it
// finds nothing final yet and leaves the listing as it is, finalizeKeyed),
// while moving the entry costs two index write units (DynamoDB deletes and
// puts an index entry whose key changes), which a growing session would pay
// at every flush that extends it: a read is a fifth of a write's price.
func keepListing(ks state.KeyedState, openIn string, openUntil window.Window) window.Window {
	if !listedBy(ks, openIn, openUntil) {
		return openUntil
	}
	return window.Window{Start: ks.ListedUntil, End: ks.ListedUntil}
}

// listedBy reports whether ks is listed under openIn no later than
// openUntil's end, which is not zero: a finalize will visit it in time.
func listedBy(ks state.KeyedState, openIn string, openUntil window.Window) bool {
	return !openUntil.End.IsZero() && ks.ListedIn == openIn && !ks.ListedUntil.IsZero() && !ks.ListedUntil.After(openUntil.End)
}

// keyedOpenUntil is when the state next needs finalizing: the earliest end
// among windows with results pending (pendingUntil), windows not emitted yet
// and windows that new points from on touch (a session such a point merged
// away ends after it too).
func keyedOpenUntil(ws pipeline.WindowSpec, buf *keyedBuf, from time.Time) window.Window {
	first := pendingUntil(buf, window.Window{})
	var id [window.IDLength]byte
	for _, hw := range window.HeldWindowBounds(heldKind(ws), buf.Frozen, buf.Points) {
		w := hw.Window
		if _, done := buf.Emitted[string(w.AppendID(id[:0]))]; done && !w.End.After(from) {
			continue
		}
		if first.End.IsZero() || w.End.Before(first.End) {
			first = w
		}
	}
	return first
}

// finalizeKeyed writes and emits the windows of one keyed state that the
// watermark has made final, corrections of final windows whose value changed,
// and retractions of sessions merged into others.
//
// It records them in the state (Emitted, and Pending until written and
// published) with a fenced save before it writes any window item, so a
// window item is never final without a state that knows it: a process that
// dies, is throttled or loses a race after the record is saved leaves the
// results pending, and the state listed, for the next finalize (a retry,
// the next batch, the ticker) to write and publish again under the same ids
// before anything else; a later record merging such a session retracts it.
// A state's pending results are written and published in the order they
// were recorded, so a retraction lands after the final it retracts.
//
// warm (a handler's finalize, not the ticker's) takes the state from the
// process's copy when it has one: the one the fold just before wrote, or
// the last finalize saved. A copy another writer has moved past only costs
// a refused save, after which the state is read.
func (p *Processor) finalizeKeyed(ctx context.Context, shard string, ref state.Ref, wm time.Time, warm bool) (int, error) {
	kind, _ := state.IsKeyed(ref)
	ws, ok := p.specOf(kind)
	if !ok {
		return 0, fmt.Errorf("aggregate: no window %s in the pipeline", kind)
	}
	published := map[string]bool{}   // ids this call has written and emitted
	unlogged := map[string]*Output{} // sent by this call, logged once its save clears them
	for {
		more, err := p.finalizeKeyedRound(ctx, shard, ref, kind, ws, wm, warm, published, unlogged)
		if err != nil || !more {
			return len(published), err
		}
	}
}

// finalizeKeyedRound is one round of finalizeKeyed: it records the final
// windows the state has room for, writes and publishes them, and prunes.
// It reports whether windows were left for want of room that another
// round can now record (the prune made room): a busy sliding window makes
// a final window a record, more than one write of the state holds.
//
// Each result is logged (ResultLogMessage) once, by the finalize whose save
// takes it out of the state's pending results, after it is on the stream:
// two finalizers racing on one state (the ticker and a batch) may both send
// it, under one id, but only the save of one of them removes it, and the
// other, conflicting, reloads a state without it. A process that dies
// between that save and the log line loses the line (the stream has the
// result), as a tumbling window's unlist does.
func (p *Processor) finalizeKeyedRound(ctx context.Context, shard string, ref state.Ref, kind string, ws pipeline.WindowSpec, wm time.Time, warm bool, published map[string]bool, unlogged map[string]*Output) (bool, error) {
	for attempt := 0; attempt < 8; attempt++ {
		ks, kref, buf, err := p.loadKeyedRef(ctx, ref, kind, shard, warm)
		if err != nil {
			return false, err
		}
		// clears: the ids this round's save would take out of the
		// pending results of the version loaded.
		var clears []string
		left := buf.Pending[:0]
		for _, r := range buf.Pending {
			if id := r.id(kref, kind); published[id] {
				clears = append(clears, id)
			} else {
				left = append(left, r)
			}
		}
		// Results this call sent that a concurrent save (a replay's, which
		// held them) put back as pending: the state must be saved without
		// them, or the next finalize sends them again.
		sentBefore := len(left) < len(buf.Pending)
		buf.Pending = left
		recorded, next, unrecorded, err := p.recordFinalKeyed(ws, kind, buf, wm)
		if err != nil {
			return false, err
		}
		if recorded > 0 {
			// Record before writing: listed until the pending results
			// are published.
			ks.Blob = encodeKeyed(make([]byte, 0, len(ks.Blob)), buf)
			_, err = p.views.SaveKeyed(ctx, kref, shard, ks, "", p.openIn(shard), keepListing(ks, p.openIn(shard), pendingUntil(buf, next)))
			if errors.Is(err, state.ErrKeyedConflict) {
				p.forgetKeyed(kref, shard)
				continue
			}
			if err != nil {
				return false, err
			}
			ks.Version++
		}
		outs := make([]Output, 0, len(buf.Pending))
		for _, r := range buf.Pending {
			o, count, err := r.output(p.cfg.Aggregates, kref, kind)
			if err != nil {
				return false, err
			}
			w := window.Of(r.Start, r.End)
			if r.Kind == "retraction" {
				err = p.views.PutWindow(ctx, kref, w, r.Prev, 0, r.Rev, true)
			} else {
				err = p.views.PutWindow(ctx, kref, w, r.Blob, count, r.Rev, false)
			}
			if err != nil {
				return false, err
			}
			outs = append(outs, o)
		}
		// On a version a replay filled, what the version before it sent is
		// not sent again, and a replay holds what it cannot tell was sent
		// (handover.go): those stay pending, and listed.
		send, done, err := p.judgeKeyed(ctx, kref, kind, buf.Pending, outs)
		if err != nil {
			return false, err
		}
		if err := p.put(ctx, send); err != nil {
			return false, err
		}
		for i := range send {
			unlogged[send[i].ID] = &send[i]
		}
		for _, o := range outs[:done] {
			published[o.ID] = true
			clears = append(clears, o.ID)
		}
		for _, o := range send {
			switch o.Kind {
			case "correction":
				p.metrics.Add("Corrections", metrics.Count, 1)
			case "retraction":
				p.metrics.Add("Retractions", metrics.Count, 1)
			}
		}
		hadPending := len(buf.Pending) > 0 || sentBefore
		buf.Pending = buf.Pending[done:]
		points, emitted := len(buf.Points), len(buf.Emitted)
		pruneKeyed(ws, p.cfg.Late, buf, wm, unrecorded)
		if recorded == 0 && !hadPending && len(buf.Points) == points && len(buf.Emitted) == emitted && listedBy(ks, p.openIn(shard), next) {
			// Nothing final, nothing forgotten, and listed no later than
			// its next window: a growing session, found early. Saving
			// would only move its listing (two index write units) and
			// its freeze mark, which guards nothing while no point goes.
			return false, nil
		}
		ks.Blob = encodeKeyed(make([]byte, 0, len(ks.Blob)), buf)
		until := keepListing(ks, p.openIn(shard), pendingUntil(buf, next))
		_, err = p.views.SaveKeyed(ctx, kref, shard, ks, "", p.openIn(shard), until)
		if errors.Is(err, state.ErrKeyedConflict) {
			p.forgetKeyed(kref, shard)
			continue
		}
		if err != nil {
			return false, err
		}
		for _, id := range clears {
			if o, ok := unlogged[id]; ok {
				p.logResult(ctx, o)
				delete(unlogged, id)
			}
		}
		if warm {
			// The version just written, for the next fold and finalize:
			// a session's state is read once per key and flush no more.
			p.rememberKeyed(kref, shard, savedKeyed(ks, "", p.openIn(shard), until))
		} else {
			p.forgetKeyed(kref, shard) // the handler's next fold reads the version just written
		}
		return recorded > 0 && unrecorded != math.MaxInt64, nil
	}
	return false, state.ErrConflict
}

// recordFinalKeyed recomputes buf's windows that wm made final and records
// what they need in buf: a final result or a correction for each whose
// value is not the one emitted, a retraction for each emitted session no
// longer among them (a late record merged it into a larger one). It
// records only what the state has room for (MaxKeyedStateBytes: each
// result is kept, emitted, until its window is frozen): it returns how many
// it recorded, the first window still open or left unrecorded, and the
// earliest end of those left (math.MaxInt64: none), which the prune after
// must not freeze.
func (p *Processor) recordFinalKeyed(ws pipeline.WindowSpec, kind string, buf *keyedBuf, wm time.Time) (int, window.Window, int64, error) {
	n := len(buf.Pending)
	current := map[string]bool{}
	var next window.Window
	room := MaxKeyedStateBytes - keyedBytes(buf)
	unrecorded := int64(math.MaxInt64)
	// Windows ending at or before buf.Frozen are not among them: they are
	// final past the allowed lateness and stay as emitted.
	for _, kw := range keyedWindows(ws, buf) {
		w := kw.w
		id := w.ID()
		current[id] = true
		if w.End.After(wm) {
			if next.End.IsZero() || w.End.Before(next.End) {
				next = w
			}
			continue
		}
		st, err := kw.value(p.cfg.Aggregates, buf.Points)
		if err != nil {
			return 0, window.Window{}, 0, err
		}
		blob, err := st.MarshalBinary()
		if err != nil {
			return 0, window.Window{}, 0, err
		}
		prev, seen := buf.Emitted[id]
		if seen && bytes.Equal(prev.Blob, blob) {
			continue
		}
		r := pendingResult{Kind: "final", Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Rev: 1, Blob: blob}
		if seen {
			r.Kind, r.Rev, r.Prev = "correction", prev.Rev+1, prev.Blob
		}
		cost := resultBytes + len(blob) + len(r.Prev)
		if seen {
			cost -= len(prev.Blob) // it replaces the value emitted
		}
		if cost > room {
			// Left for a later finalize, once the prune frees room: the
			// state stays listed for it.
			unrecorded = min(unrecorded, r.End)
			if next.End.IsZero() || w.End.Before(next.End) {
				next = w
			}
			continue
		}
		room -= cost
		buf.Pending = append(buf.Pending, r)
		buf.Emitted[id] = emitted{Start: r.Start, End: r.End, Rev: r.Rev, Blob: blob}
	}
	ids := make([]string, 0, len(buf.Emitted))
	for id, e := range buf.Emitted {
		if !current[id] && e.End > buf.Frozen {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // the same order on every retry
	for _, id := range ids {
		e := buf.Emitted[id]
		buf.Pending = append(buf.Pending, pendingResult{Kind: "retraction", Start: e.Start, End: e.End, Rev: e.Rev + 1, Prev: e.Blob})
		delete(buf.Emitted, id)
	}
	return len(buf.Pending) - n, next, unrecorded, nil
}

// resultBytes bounds what a recorded result adds to the keyed state's
// encoding besides its values: its emitted window's bounds and revision,
// its pending entry's kind, bounds, revision and lengths (varints).
const resultBytes = 64

// keyedBytes bounds buf's encoding.
func keyedBytes(buf *keyedBuf) int {
	n := 32 + pointsBytes(buf.Points) + len(buf.Points)*8 // the time deltas' varints, at their largest
	for _, e := range buf.Emitted {
		n += resultBytes + len(e.Blob)
	}
	for _, r := range buf.Pending {
		n += resultBytes + len(r.Blob) + len(r.Prev)
	}
	return n
}

// pendingResult is a result finalize recorded in the keyed state before
// writing its window item and publishing it (keyedBuf.Pending): all it
// takes to write and emit it again, under the same id with the same bytes.
type pendingResult struct {
	Kind       string // "final", "correction" or "retraction"
	Start, End int64  // Unix ms
	Rev        int
	Blob       []byte // the window's value (nil for a retraction)
	Prev       []byte // the value a correction or retraction replaces
}

func (r pendingResult) id(ref state.KeyedRef, kind string) string {
	return ResultID(ref.Pipeline, ref.Key, kind, window.Of(r.Start, r.End).ID(), r.Rev)
}

// output is the result r puts on the output stream, and the count of
// records in its value.
func (r pendingResult) output(aggs *agg.Spec, ref state.KeyedRef, kind string) (Output, uint64, error) {
	w := window.Of(r.Start, r.End)
	o := Output{ID: r.id(ref, kind), Kind: r.Kind, Pipeline: ref.Pipeline, Key: ref.Key, Window: kind, Start: w.Start, End: w.End, Revision: r.Rev}
	var count uint64
	if r.Blob != nil {
		st, err := aggs.Decode(r.Blob)
		if err != nil {
			return Output{}, 0, fmt.Errorf("aggregate: result %s: %w", o.ID, err)
		}
		o.Result, count = st.Result(), st.Count()
	}
	if r.Prev != nil {
		if ps, err := aggs.Decode(r.Prev); err == nil {
			res := ps.Result()
			o.Previous = &res
		}
	}
	return o, count, nil
}

// pendingUntil is the listing of a state with pending results: due now
// (their windows have ended), so a finalize that does not publish them
// leaves them to the next one.
func pendingUntil(buf *keyedBuf, next window.Window) window.Window {
	for _, r := range buf.Pending {
		if w := window.Of(r.Start, r.End); next.End.IsZero() || w.End.Before(next.End) {
			next = w
		}
	}
	return next
}

// pruneKeyed freezes the windows that end at or before wm less the allowed
// lateness (the close time of every record still to come: no record can
// change them) and forgets what only they need: their emitted values, and
// the points of no window that may still change. It runs after finalize
// has emitted every final window, so a frozen window is never recomputed
// from fewer points.
func pruneKeyed(ws pipeline.WindowSpec, late window.LateRule, buf *keyedBuf, wm time.Time, unrecorded int64) {
	closed := wm.UnixMilli()
	if late.Policy == window.Correct {
		closed = wm.Add(-late.AllowedLateness).UnixMilli()
	}
	// Not past a final window the finalize left unrecorded for want of
	// room: it is recorded, with every point it needs, by a later one.
	closed = min(closed, unrecorded-1)
	if closed <= buf.Frozen {
		return
	}
	buf.Frozen = closed
	buf.Points = window.PruneHeld(heldKind(ws), closed, buf.Points)
	for id, e := range buf.Emitted {
		if e.End <= closed {
			delete(buf.Emitted, id)
		}
	}
}

func mergePoints(have, fresh []point) []point {
	out := append(have, fresh...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// keyedCacheRef names a keyed state in the warm container's copies
// (Processor.keyed), which keep each state as written (its Blob the
// encoding of its buffer), so the normal path needs no read: a fold
// decodes its own copy of the buffer from the blob.
type keyedCacheRef struct {
	ref   state.KeyedRef
	shard string
}

func keyedCacheKey(ref state.KeyedRef, shard string) keyedCacheRef {
	return keyedCacheRef{ref: ref, shard: shard}
}

func (p *Processor) loadKeyed(ctx context.Context, ref state.KeyedRef, shard string) (state.KeyedState, *keyedBuf, error) {
	if ks, ok := p.keptKeyed(ctx, ref, shard); ok {
		// A copy: a failed save must not leave the cache changed.
		buf, err := decodeKeyed(ks.Blob)
		return ks, buf, err
	}
	ks, err := p.views.LoadKeyed(ctx, ref, shard)
	if err != nil {
		return state.KeyedState{}, nil, err
	}
	buf, err := decodeKeyed(ks.Blob)
	return ks, buf, err
}

// loadKeyedRef is the keyed state an open-windows ref points at, its ref
// and its buffer decoded: the process's copy when warm and it has one,
// else read.
func (p *Processor) loadKeyedRef(ctx context.Context, ref state.Ref, kind, shard string, warm bool) (state.KeyedState, state.KeyedRef, *keyedBuf, error) {
	if prefix := state.PartitionKey(p.cfg.Name, ""); warm && strings.HasPrefix(ref.PK, prefix) {
		kref := state.KeyedRef{Pipeline: p.cfg.Name, Key: ref.PK[len(prefix):], Kind: kind}
		if ks, ok := p.keptKeyed(ctx, kref, shard); ok {
			buf, err := decodeKeyed(ks.Blob) // a copy: the round changes it
			return ks, kref, buf, err
		}
	}
	ks, kref, err := p.views.LoadKeyedRef(ctx, ref, shard)
	if err != nil {
		return ks, kref, nil, err
	}
	buf, err := decodeKeyed(ks.Blob)
	return ks, kref, buf, err
}

// keptKeyed is the process's copy of ref's state on shard, if it has one.
// The copies are of the current views table's items: when a replay's
// version takes over (WithHandover's table changes), they are let go, so
// no save is conditioned on a version read from the table before, which
// the new table's item may happen to have too.
func (p *Processor) keptKeyed(ctx context.Context, ref state.KeyedRef, shard string) (state.KeyedState, bool) {
	var table string
	if p.handover != nil {
		table = p.handover.current(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if table != p.keyedTable {
		clear(p.keyed)
		p.keyedBytes, p.keyedTable = 0, table
	}
	ks, ok := p.keyed[keyedCacheKey(ref, shard)]
	return ks, ok
}

// rememberKeyed keeps ks, as just read or written, for the next fold: its
// Blob must be the encoding of the buffer the fold would hold.
//
// The copies are bounded (keyedCacheMax): past it, arbitrary ones (Go's
// map order) are let go until a quarter of the room is free again, each
// read from the table at its next use. A process that meets ever more
// keys holds a bounded memory, not one state per key it ever saw.
func (p *Processor) rememberKeyed(ref state.KeyedRef, shard string, ks state.KeyedState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cap(ks.Blob) > 2*len(ks.Blob)+keyedEntryOverhead {
		// An encoding into a buffer sized for the state before a prune,
		// or for points a fold did not keep: a copy of what it holds, so
		// the bound counts what stays in memory.
		ks.Blob = bytes.Clone(ks.Blob)
	}
	k := keyedCacheKey(ref, shard)
	if old, ok := p.keyed[k]; ok {
		p.keyedBytes -= keyedEntryBytes(k, old)
	}
	p.keyed[k] = ks
	p.keyedBytes += keyedEntryBytes(k, ks)
	if p.keyedBytes <= p.keyedCacheMax {
		return
	}
	for k2, v := range p.keyed {
		if p.keyedBytes <= p.keyedCacheMax*3/4 {
			break
		}
		delete(p.keyed, k2)
		p.keyedBytes -= keyedEntryBytes(k2, v)
	}
}

func (p *Processor) forgetKeyed(ref state.KeyedRef, shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := keyedCacheKey(ref, shard)
	if old, ok := p.keyed[k]; ok {
		p.keyedBytes -= keyedEntryBytes(k, old)
		delete(p.keyed, k)
	}
}

// keyedEntryBytes is about what one copy takes in memory: its strings,
// its blob's array and a map entry's overhead.
func keyedEntryBytes(k keyedCacheRef, ks state.KeyedState) int {
	return len(k.ref.Pipeline) + len(k.ref.Key) + len(k.ref.Kind) + len(k.shard) +
		cap(ks.Blob) + len(ks.Fence) + len(ks.ListedIn) + keyedEntryOverhead
}

// keyedEntryOverhead is a copy's fixed cost: its key and state structs
// and the map's slot.
const keyedEntryOverhead = 192

// defaultKeyedCacheBytes is an eighth of the running Lambda function's
// memory (the dedupe ledger's copy takes a quarter), or 64 MB outside
// Lambda.
func defaultKeyedCacheBytes() int {
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && mb > 0 {
		return mb << 20 / 8
	}
	return 64 << 20
}
