package aggregate

import (
	"fmt"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/window"
)

// A key's session and sliding windows follow from its buffered points as
// Kafka Streams makes them record by record, with the watermark (less the
// allowed lateness under the correct policy) as Kafka's close time: package
// window's held windows (window.HeldWindows, window.Judge,
// window.PruneHeld) say how, for these points and for a handler's own
// aggregate alike. Final windows that end at or before the state's Frozen
// time are beyond the allowed lateness: no record can change them, so they
// are never recomputed, and the points only they need are pruned
// (pruneKeyed).

// noThreshold is the threshold of a point that was on time: it counts in
// every window it lies in.
const noThreshold = window.NoThreshold

// HeldAt is the point's event time (window.Held).
func (pt point) HeldAt() int64 { return pt.T }

// Threshold is the close time the point arrived at, or noThreshold
// (window.Held).
func (pt point) Threshold() int64 { return pt.Th }

// HeldUntil is the time of a held run's last record, or the point's own
// time (window.Held).
func (pt point) HeldUntil() int64 {
	if pt.Agg != nil {
		return pt.Until
	}
	return pt.T
}

var _ window.Held = point{}

// late reports whether pt arrived after some of its windows were closed.
func (pt *point) late() bool { return pt.Th > pt.T }

// heldKind is the window kind of a session or sliding window spec.
func heldKind(ws pipeline.WindowSpec) window.Defined {
	if ws.Kind == pipeline.Sliding {
		return window.Defined{Difference: ws.Difference}
	}
	return window.Defined{Gap: ws.Gap}
}

// keyedWindow is one window of a keyed state and the points in it.
type keyedWindow struct {
	w  window.Window
	hw window.HeldWindow
}

// value is the window's aggregate: its records added, its held runs'
// aggregates merged.
func (kw *keyedWindow) value(aggs *agg.Spec, pts []point) (*agg.State, error) {
	st := aggs.New()
	var run *agg.State
	var err error
	window.Members(&kw.hw, pts, func(i int) {
		if err != nil {
			return
		}
		if pts[i].Agg == nil {
			st.Add(pts[i].V, pts[i].D)
			return
		}
		if run == nil {
			run = aggs.New()
		}
		if err = run.SetBinary(pts[i].Agg); err == nil {
			err = st.Merge(run)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("aggregate: a held session run of window %s: %w", kw.w.ID(), err)
	}
	return st, nil
}

// keyedWindows returns the windows of a keyed state that end after its
// Frozen time, sorted by start.
func keyedWindows(ws pipeline.WindowSpec, buf *keyedBuf) []keyedWindow {
	hws := window.HeldWindows(heldKind(ws), buf.Frozen, buf.Points)
	out := make([]keyedWindow, len(hws))
	for i, hw := range hws {
		out[i] = keyedWindow{w: hw.Window, hw: hw}
	}
	return out
}

// judgeKeyed decides, in arrival order, what becomes of fresh points (their
// thresholds raised to the state's Frozen time: the ticker may have pruned
// since the batch read its watermark) given the state's points: it returns
// the points to keep and the sequence numbers of records dropped from at
// least one of their windows (LateDropped counts them).
func judgeKeyed(ws pipeline.WindowSpec, buf *keyedBuf, fresh []point) (kept []point, late []string) {
	j := window.NewJudge(heldKind(ws), buf.Points)
	for _, pt := range fresh {
		pt.Th = window.Threshold(pt.T, pt.Th, buf.Frozen)
		keep, isLate := j.Next(pt.T, pt.Th)
		if isLate {
			late = append(late, pt.Seq)
		}
		if keep {
			j.Hold()
			kept = append(kept, pt)
		}
	}
	return kept, late
}
