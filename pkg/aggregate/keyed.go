package aggregate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Session and sliding windows are defined by the records themselves, so they
// are computed from a buffer of each key's recent records kept in a keyed
// state item (package state): a batch folds its records in with one write per
// key and kind, fenced so a redelivered record is folded once; finalize
// recomputes the key's windows, writes those the watermark made final (and
// corrections, and retractions of sessions merged into larger ones) and emits
// them. This needs one shard per key: the config must say the partition key is
// the grouping key.

// point is one buffered record. Seq is the record's sequence number, for
// folding; it is not stored (the item's per-shard fence says what it holds).
type point struct {
	T   int64   `json:"t"` // event time, Unix ms
	V   float64 `json:"v"`
	D   []byte  `json:"d,omitempty"` // the distinct value's hash (distinctHash), or nil
	Seq string  `json:"s"`
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

// collectKeyed adds a record to its key's keyed kinds, unless it is late
// past what the late rule accepts; it reports whether it added it.
func (c *collector) collectKeyed(ws pipeline.WindowSpec, key, seq string, et time.Time, value float64, distinct []byte) bool {
	var end time.Time
	if ws.Kind == pipeline.Session {
		end = et.Add(ws.Gap)
	} else {
		end = et.Add(time.Millisecond) // the record's left window ends at it
	}
	wm := c.wm.Current()
	if !wm.IsZero() && !end.After(wm) {
		if c.p.cfg.Late.Policy != window.Correct || !end.After(wm.Add(-c.p.cfg.Late.AllowedLateness)) {
			return false
		}
	}
	if c.keyed == nil {
		c.keyed = map[keyedKey][]point{}
	}
	k := keyedKey{key, ws.ID()}
	c.keyed[k] = append(c.keyed[k], point{T: et.UnixMilli(), V: value, D: distinctHash(distinct), Seq: seq})
	return true
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
			err := p.foldKeyed(ctx, c.shard, state.KeyedRef{Pipeline: p.cfg.Name, Key: k.key, Kind: k.kind}, pts)
			if err != nil {
				p.log.Error("keyed window state write failed: its records will be retried", "shard", c.shard, "key", k.key, "window", k.kind, "error", err.Error())
				mu.Lock()
				failedSeqs = append(failedSeqs, pts[0].Seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failedSeqs
}

// foldKeyed adds points above the state's fence and lists the state for
// finalization from the earliest window the new points touch.
func (p *Processor) foldKeyed(ctx context.Context, shard string, ref state.KeyedRef, pts []point) error {
	ws, ok := p.specOf(ref.Kind)
	if !ok {
		return fmt.Errorf("aggregate: no window %s in the pipeline", ref.Kind)
	}
	for attempt := 0; attempt < 8; attempt++ {
		ks, buf, err := p.loadKeyed(ctx, ref, shard)
		if err != nil {
			return err
		}
		var fresh []point
		for _, pt := range pts {
			if ks.Fence == "" || stream.CompareSequence(pt.Seq, ks.Fence) > 0 {
				fresh = append(fresh, pt)
			}
		}
		if len(fresh) == 0 {
			p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(len(pts)))
			return nil
		}
		buf.Points = mergePoints(buf.Points, fresh)
		earliest := int64(0)
		for _, pt := range fresh {
			if earliest == 0 || pt.T < earliest {
				earliest = pt.T
			}
		}
		openUntil := keyedOpenUntil(ws, buf, time.UnixMilli(earliest).UTC())
		blob := encodeKeyed(nil, buf)
		ks2 := ks
		ks2.Blob = blob
		n, err := p.views.SaveKeyed(ctx, ref, shard, ks2, fresh[len(fresh)-1].Seq, p.openIn(shard), openUntil)
		p.metrics.Add("WriteRequests", metrics.Count, float64(n))
		if errors.Is(err, state.ErrKeyedConflict) {
			p.forgetKeyed(ref, shard)
			continue
		}
		if err != nil {
			return err
		}
		p.metrics.Add("DuplicatesSkipped", metrics.Count, float64(len(pts)-len(fresh)))
		ks2.Version++
		ks2.Fence = strings.Clone(fresh[len(fresh)-1].Seq)
		for i := range buf.Points {
			buf.Points[i].Seq = "" // not stored; and it shares the batch's reused buffer
		}
		p.rememberKeyed(ref, shard, ks2, buf)
		return nil
	}
	return state.ErrConflict
}

// keyedOpenUntil is when the state next needs finalizing: the earliest end
// among windows not emitted yet and windows that new points from on touch.
func keyedOpenUntil(ws pipeline.WindowSpec, buf *keyedBuf, from time.Time) window.Window {
	var first window.Window
	for _, w := range keyedWindows(ws, buf.Points) {
		if _, done := buf.Emitted[w.ID()]; done && !w.End.After(from) {
			continue
		}
		if first.End.IsZero() || w.End.Before(first.End) {
			first = w
		}
	}
	return first
}

// keyedWindows computes a key's windows of one kind from its points.
func keyedWindows(ws pipeline.WindowSpec, pts []point) []window.Window {
	if len(pts) == 0 {
		return nil
	}
	if ws.Kind == pipeline.Sliding {
		times := make([]time.Time, len(pts))
		for i, pt := range pts {
			times[i] = time.UnixMilli(pt.T).UTC()
		}
		return ws.Sliding().Windows(times)
	}
	var out []window.Window
	gap := ws.Gap.Milliseconds()
	start, last := pts[0].T, pts[0].T
	for _, pt := range pts[1:] {
		if pt.T-last >= gap {
			out = append(out, window.Of(start, last+gap))
			start = pt.T
		}
		last = pt.T
	}
	return append(out, window.Of(start, last+gap))
}

// finalizeKeyed writes and emits the windows of one keyed state that the
// watermark has made final, corrections of final windows whose value changed,
// and retractions of sessions merged into others.
func (p *Processor) finalizeKeyed(ctx context.Context, shard string, ref state.Ref, wm time.Time) (int, error) {
	kind, _ := state.IsKeyed(ref)
	ws, ok := p.specOf(kind)
	if !ok {
		return 0, fmt.Errorf("aggregate: no window %s in the pipeline", kind)
	}
	for attempt := 0; attempt < 8; attempt++ {
		ks, kref, err := p.views.LoadKeyedRef(ctx, ref, shard)
		if err != nil {
			return 0, err
		}
		buf, err := decodeKeyed(ks.Blob)
		if err != nil {
			return 0, err
		}
		var outs []Output
		current := map[string]bool{}
		var next window.Window
		for _, w := range keyedWindows(ws, buf.Points) {
			id := w.ID()
			current[id] = true
			if w.End.After(wm) {
				if next.End.IsZero() || w.End.Before(next.End) {
					next = w
				}
				continue
			}
			st := p.cfg.Aggregates.New()
			for _, pt := range buf.Points {
				if pt.T >= w.Start.UnixMilli() && pt.T < w.End.UnixMilli() {
					st.Add(pt.V, pt.D)
				}
			}
			blob, err := st.MarshalBinary()
			if err != nil {
				return 0, err
			}
			prev, seen := buf.Emitted[id]
			if seen && bytes.Equal(prev.Blob, blob) {
				continue
			}
			o := Output{Kind: "final", Pipeline: kref.Pipeline, Key: kref.Key, Window: kind, Start: w.Start, End: w.End, Revision: 1, Result: st.Result()}
			if seen {
				o.Kind, o.Revision = "correction", prev.Rev+1
				if ps, err := p.cfg.Aggregates.Decode(prev.Blob); err == nil {
					r := ps.Result()
					o.Previous = &r
				}
			}
			o.ID = fmt.Sprintf("%s/%s/%s/%s/r%d", kref.Pipeline, kref.Key, kind, id, o.Revision)
			if err := p.views.PutWindow(ctx, kref, w, blob, st.Count(), o.Revision, false); err != nil {
				return 0, err
			}
			outs = append(outs, o)
			buf.Emitted[id] = emitted{Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Rev: o.Revision, Blob: blob}
		}
		for id, e := range buf.Emitted {
			if current[id] {
				continue
			}
			// A final session that a late record merged into a larger one.
			w := window.Of(e.Start, e.End)
			if err := p.views.PutWindow(ctx, kref, w, e.Blob, 0, e.Rev+1, true); err != nil {
				return 0, err
			}
			o := Output{Kind: "retraction", Pipeline: kref.Pipeline, Key: kref.Key, Window: kind, Start: w.Start, End: w.End, Revision: e.Rev + 1,
				ID: fmt.Sprintf("%s/%s/%s/%s/r%d", kref.Pipeline, kref.Key, kind, id, e.Rev+1)}
			if ps, err := p.cfg.Aggregates.Decode(e.Blob); err == nil {
				r := ps.Result()
				o.Previous = &r
			}
			outs = append(outs, o)
			delete(buf.Emitted, id)
		}
		if err := p.emit(ctx, outs); err != nil {
			return 0, err
		}
		for _, o := range outs {
			switch o.Kind {
			case "correction":
				p.metrics.Add("Corrections", metrics.Count, 1)
			case "retraction":
				p.metrics.Add("Retractions", metrics.Count, 1)
			}
		}
		pruneKeyed(ws, p.cfg.Late, buf, wm)
		ks.Blob = encodeKeyed(nil, buf)
		_, err = p.views.SaveKeyed(ctx, kref, shard, ks, "", p.openIn(shard), next)
		if errors.Is(err, state.ErrKeyedConflict) {
			p.forgetKeyed(kref, shard)
			continue
		}
		if err != nil {
			return 0, err
		}
		p.forgetKeyed(kref, shard) // the next fold reloads the version just written
		return len(outs), nil
	}
	return 0, state.ErrConflict
}

// pruneKeyed forgets points and emitted windows no record the late rule
// accepts can touch any more.
func pruneKeyed(ws pipeline.WindowSpec, late window.LateRule, buf *keyedBuf, wm time.Time) {
	size := ws.Gap
	if ws.Kind == pipeline.Sliding {
		size = ws.Difference
	}
	horizon := wm.Add(-late.AllowedLateness - 2*size).UnixMilli()
	kept := buf.Points[:0]
	for _, pt := range buf.Points {
		if pt.T >= horizon {
			kept = append(kept, pt)
		}
	}
	buf.Points = kept
	for id, e := range buf.Emitted {
		if e.End < horizon {
			delete(buf.Emitted, id)
		}
	}
}

func mergePoints(have, fresh []point) []point {
	out := append(have, fresh...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// The warm container's copy of keyed states, so the normal path needs no read.
type cachedKeyed struct {
	ks  state.KeyedState
	buf *keyedBuf
}

func keyedCacheKey(ref state.KeyedRef, shard string) string {
	return ref.Pipeline + "\x00" + ref.Key + "\x00" + ref.Kind + "\x00" + shard
}

func (p *Processor) loadKeyed(ctx context.Context, ref state.KeyedRef, shard string) (state.KeyedState, *keyedBuf, error) {
	p.mu.Lock()
	c, ok := p.keyed[keyedCacheKey(ref, shard)]
	p.mu.Unlock()
	if ok {
		// A copy: a failed save must not leave the cache changed.
		buf, err := decodeKeyed(encodeKeyed(nil, c.buf))
		return c.ks, buf, err
	}
	ks, err := p.views.LoadKeyed(ctx, ref, shard)
	if err != nil {
		return state.KeyedState{}, nil, err
	}
	buf, err := decodeKeyed(ks.Blob)
	return ks, buf, err
}

func (p *Processor) rememberKeyed(ref state.KeyedRef, shard string, ks state.KeyedState, buf *keyedBuf) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keyed[keyedCacheKey(ref, shard)] = cachedKeyed{ks: ks, buf: buf}
}

func (p *Processor) forgetKeyed(ref state.KeyedRef, shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keyed, keyedCacheKey(ref, shard))
}
