package aggregate

import (
	"math"
	"sort"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/window"
)

// How a key's session and sliding windows follow from its buffered points,
// as Kafka Streams makes them record by record
// (KStreamSessionWindowAggregate, KStreamSlidingWindowAggregate), with the
// watermark (less the allowed lateness under the correct policy) as Kafka's
// close time:
//
//   - Each point keeps the close time it arrived at, its threshold (Th), when
//     that lies after the point's own time: windows ending at or before the
//     threshold were closed to it.
//   - A session record joins every session within the gap that is not yet
//     closed (a closed session is not found, as in Kafka's store); it is
//     accepted if the session it makes ends after its threshold, else
//     dropped whole. So under drop a final session never changes; under
//     correct a session final within the allowed lateness can grow or merge
//     (a correction, or a retraction of the sessions merged).
//   - A sliding record counts in each of its windows that ends after its
//     threshold and in no other; a window exists only if the record that
//     makes it counts in it (a left window: its record; a right window: a
//     record after the one it follows); a record that counts nowhere
//     (t + difference before its threshold) is dropped whole.
//
// Final windows that end at or before the state's Frozen time are beyond
// the allowed lateness: no record can change them, so they are never
// recomputed, and the points only they need are pruned (pruneKeyed).

// noThreshold is the threshold of a point that was on time: it counts in
// every window it lies in.
const noThreshold = math.MinInt64

// late reports whether pt arrived after some of its windows were closed.
func (pt *point) late() bool { return pt.Th > pt.T }

// counts reports whether pt counts in a window ending (exclusive) at end.
func (pt *point) counts(end int64) bool { return end > pt.Th }

// keyedWindow is one window of a keyed state and the points in it.
type keyedWindow struct {
	w window.Window
	// members are the indices of a session's points; a sliding window
	// holds the points in [lo, hi) that count in it.
	members []int
	lo, hi  int
}

// value is the window's aggregate.
func (kw *keyedWindow) value(aggs *agg.Spec, pts []point) *agg.State {
	st := aggs.New()
	if kw.members != nil {
		for _, i := range kw.members {
			st.Add(pts[i].V, pts[i].D)
		}
		return st
	}
	end := kw.w.End.UnixMilli()
	for i := kw.lo; i < kw.hi; i++ {
		if pts[i].counts(end) {
			st.Add(pts[i].V, pts[i].D)
		}
	}
	return st
}

// keyedWindows returns the windows of a keyed state that end after its
// Frozen time, sorted by start.
func keyedWindows(ws pipeline.WindowSpec, buf *keyedBuf) []keyedWindow {
	if len(buf.Points) == 0 {
		return nil
	}
	if ws.Kind == pipeline.Sliding {
		return slidingWindows(ws.Difference.Milliseconds(), buf)
	}
	gap := ws.Gap.Milliseconds()
	ss := replaySessions(gap, buf.Points)
	var out []keyedWindow
	for r := range ss.runs {
		run := &ss.runs[r]
		if run.parent >= 0 || run.last+gap <= buf.Frozen {
			continue
		}
		out = append(out, keyedWindow{w: window.Of(run.first, run.last+gap)})
		run.out = len(out) - 1
	}
	for i := range buf.Points {
		if r := &ss.runs[ss.root(ss.of[i])]; r.out >= 0 {
			out[r.out].members = append(out[r.out].members, i)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].w.Start.Before(out[j].w.Start) })
	return out
}

// slidingWindows computes the sliding windows of buf's points (in time
// order) that end after buf.Frozen.
func slidingWindows(d int64, buf *keyedBuf) []keyedWindow {
	pts := buf.Points
	times := make([]time.Time, len(pts))
	for i := range pts {
		times[i] = time.UnixMilli(pts[i].T).UTC()
	}
	from := func(ms int64) int { return sort.Search(len(pts), func(i int) bool { return pts[i].T >= ms }) }
	var out []keyedWindow
	for _, w := range (window.Sliding{Difference: time.Duration(d) * time.Millisecond}).Windows(times) {
		start, end := w.Start.UnixMilli(), w.End.UnixMilli()
		if end <= buf.Frozen {
			continue
		}
		lo, hi := from(start), from(end)
		// A window that is the right window of the record just before it
		// exists if any record in it counts; a left window only, if its
		// own record (at end − 1ms) counts.
		first := lo
		if p := from(start - 1); p == len(pts) || pts[p].T != start-1 {
			first = from(end - 1)
		}
		exists := false
		for i := first; i < hi; i++ {
			if pts[i].counts(end) {
				exists = true
				break
			}
		}
		if exists {
			out = append(out, keyedWindow{w: w, lo: lo, hi: hi})
		}
	}
	return out
}

// sessionRuns is the replay of a key's session points: the sessions they
// make, as runs merged by union.
type sessionRuns struct {
	gap  int64
	runs []sessionRun
	of   []int // point index → a run (follow parent to its root)
	live []int // root runs not closed
	// closedTo is the close time the live list was last closed at.
	closedTo int64
}

type sessionRun struct {
	first, last int64
	parent      int // −1 for a root
	out         int // its keyedWindow, −1 for none
}

func (s *sessionRuns) root(r int) int {
	for s.runs[r].parent >= 0 {
		r = s.runs[r].parent
	}
	return r
}

// closeTo removes from the live runs those a record with threshold th no
// longer finds: sessions that end at or before it.
func (s *sessionRuns) closeTo(th int64) {
	if th <= s.closedTo {
		return
	}
	s.closedTo = th
	kept := s.live[:0]
	for _, r := range s.live {
		if s.runs[r].last+s.gap > th {
			kept = append(kept, r)
		}
	}
	s.live = kept
}

// reach returns the live runs a record at t joins, and the end of the
// session it would make.
func (s *sessionRuns) reach(t int64, found []int) ([]int, int64) {
	end := t + s.gap
	for _, r := range s.live {
		run := &s.runs[r]
		if t > run.first-s.gap && t < run.last+s.gap {
			found = append(found, r)
			end = max(end, run.last+s.gap)
		}
	}
	return found, end
}

// add puts point i at t into one run with the live runs it joins.
func (s *sessionRuns) add(i int, t int64, joins []int) {
	if len(joins) == 0 {
		s.runs = append(s.runs, sessionRun{first: t, last: t, parent: -1, out: -1})
		s.live = append(s.live, len(s.runs)-1)
		s.of[i] = len(s.runs) - 1
		return
	}
	into := joins[0]
	run := &s.runs[into]
	run.first, run.last = min(run.first, t), max(run.last, t)
	for _, r := range joins[1:] {
		o := &s.runs[r]
		run.first, run.last = min(run.first, o.first), max(run.last, o.last)
		o.parent = into
	}
	if len(joins) > 1 {
		kept := s.live[:0]
		for _, r := range s.live {
			if s.runs[r].parent < 0 {
				kept = append(kept, r)
			}
		}
		s.live = kept
	}
	s.of[i] = into
}

// replaySessions computes the sessions of pts (in time order) as their
// records made them on arrival. Arrival order is not stored, and need not
// be: a record that was on time cannot reach a closed session, so the
// on-time points are clustered first, in time order; then the late ones by
// threshold (their arrival order: thresholds only grow), each group after
// closing the sessions that end at or before its threshold.
func replaySessions(gap int64, pts []point) *sessionRuns {
	s := &sessionRuns{gap: gap, of: make([]int, len(pts)), closedTo: noThreshold}
	var lateIdx []int
	var joins []int
	prev := -1 // the run of the previous on-time point
	for i := range pts {
		pt := &pts[i]
		if pt.late() {
			lateIdx = append(lateIdx, i)
			continue
		}
		if prev >= 0 && pt.T-s.runs[prev].last < gap {
			s.add(i, pt.T, append(joins[:0], prev))
		} else {
			s.add(i, pt.T, nil)
			prev = len(s.runs) - 1
		}
	}
	sort.SliceStable(lateIdx, func(a, b int) bool { return pts[lateIdx[a]].Th < pts[lateIdx[b]].Th })
	for _, i := range lateIdx {
		s.closeTo(pts[i].Th)
		joins, _ = s.reach(pts[i].T, joins[:0])
		s.add(i, pts[i].T, joins)
	}
	return s
}

// judgeKeyed decides, in arrival order, what becomes of fresh points (their
// thresholds raised to the state's Frozen time: the ticker may have pruned
// since the batch read its watermark) given the state's points: it returns
// the points to keep and the sequence numbers of records dropped from at
// least one of their windows (LateDropped counts them).
func judgeKeyed(ws pipeline.WindowSpec, buf *keyedBuf, fresh []point) (kept []point, late []string) {
	var ss *sessionRuns
	var joins []int
	if ws.Kind == pipeline.Session {
		ss = replaySessions(ws.Gap.Milliseconds(), buf.Points)
	}
	for _, pt := range fresh {
		pt.Th = max(pt.Th, buf.Frozen)
		if !pt.late() {
			pt.Th = noThreshold
		}
		if ws.Kind == pipeline.Sliding {
			if pt.late() {
				late = append(late, pt.Seq)
				if pt.T+ws.Difference.Milliseconds() < pt.Th {
					continue // in no window that is not closed
				}
			}
			kept = append(kept, pt)
			continue
		}
		if pt.late() {
			ss.closeTo(pt.Th)
		}
		var end int64
		joins, end = ss.reach(pt.T, joins[:0])
		if pt.late() && end <= pt.Th {
			late = append(late, pt.Seq)
			continue
		}
		ss.of = append(ss.of, 0)
		ss.add(len(ss.of)-1, pt.T, joins)
		kept = append(kept, pt)
	}
	return kept, late
}
