package window

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// How a key's session and sliding windows follow from its held records, as
// Kafka Streams makes them record by record (KStreamSessionWindowAggregate,
// KStreamSlidingWindowAggregate), with the close time a record arrives at
// (the watermark, less the allowed lateness under the correct policy) as
// Kafka's stream time less grace. Both the declared pipelines (package
// aggregate) and a user's own aggregate (package handler) hold each key's
// recent records and compute these windows from them with what follows:
//
//   - Each record keeps the close time it arrived at, its threshold, when
//     that lies after the record's own time: windows ending at or before
//     the threshold were closed to it.
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
// Windows that end at or before the holder's frozen time are beyond the
// allowed lateness: no record can change them, so they are never
// recomputed, and the records only they need are pruned (PruneHeld).

// NoThreshold is the threshold of a record that was on time: it counts in
// every window it lies in.
const NoThreshold int64 = math.MinInt64

// Held is what the windows of a key's records need to know of one held
// record.
type Held interface {
	// HeldAt is the record's event time, Unix ms.
	HeldAt() int64
	// HeldUntil is HeldAt, or for a held session run (several on-time
	// records of one session kept as one, see OnTimeRuns) the time of its
	// last record: the run stands for records from HeldAt to HeldUntil.
	HeldUntil() int64
	// Threshold is the close time the record arrived at, when that lies
	// after HeldAt (windows ending at or before it were closed to it), else
	// NoThreshold.
	Threshold() int64
}

// Defined is a window kind that a key's records define: sessions of Gap,
// or sliding windows of Difference. Exactly one of the two is set.
type Defined struct {
	Gap        time.Duration
	Difference time.Duration
}

// Sliding reports whether d is sliding windows (else sessions).
func (d Defined) Sliding() bool { return d.Difference > 0 }

// Threshold is the threshold a record at t has when it arrives at close
// time closeAt to a holder frozen at frozen: the later of the two when it
// lies after t, else NoThreshold.
func Threshold(t, closeAt, frozen int64) int64 {
	if th := max(closeAt, frozen); th > t {
		return th
	}
	return NoThreshold
}

func late[P Held](p P) bool { return p.Threshold() > p.HeldAt() }

// counts reports whether p counts in a window ending (exclusive) at end.
func counts[P Held](p P, end int64) bool { return end > p.Threshold() }

// HeldWindow is one window of a key's held records and which of them are
// in it.
type HeldWindow struct {
	Window Window
	// members are the indices of a session's records; a sliding window
	// holds the records in [lo, hi) that count in it.
	members []int
	lo, hi  int
}

// Members calls f with the index in pts of each record in w (pts as given
// to HeldWindows).
func Members[P Held](w *HeldWindow, pts []P, f func(i int)) {
	if w.members != nil {
		for _, i := range w.members {
			f(i)
		}
		return
	}
	end := w.Window.End.UnixMilli()
	for i := w.lo; i < w.hi; i++ {
		if counts(pts[i], end) {
			f(i)
		}
	}
}

// HeldWindows returns the windows of pts (sorted by time, as they were
// held) that end after frozen, sorted by start.
func HeldWindows[P Held](k Defined, frozen int64, pts []P) []HeldWindow {
	return heldWindows(k, frozen, pts, true)
}

// HeldWindowBounds is HeldWindows without which records are in each
// window (Members cannot be called on its windows): for a caller that
// needs only the windows' bounds, such as when the next one ends, it skips
// listing every held record of every session.
func HeldWindowBounds[P Held](k Defined, frozen int64, pts []P) []HeldWindow {
	return heldWindows(k, frozen, pts, false)
}

func heldWindows[P Held](k Defined, frozen int64, pts []P, members bool) []HeldWindow {
	if len(pts) == 0 {
		return nil
	}
	if k.Sliding() {
		return slidingWindows(k.Difference.Milliseconds(), frozen, pts)
	}
	gap := k.Gap.Milliseconds()
	ss := ReplaySessions(gap, pts)
	var out []HeldWindow
	for r := range ss.runs {
		run := &ss.runs[r]
		if run.parent >= 0 || run.last+gap <= frozen {
			continue
		}
		out = append(out, HeldWindow{Window: Of(run.first, run.last+gap)})
		run.out = len(out) - 1
	}
	if members && len(out) > 0 {
		// One array holds every window's members: count each window's
		// records, cut the array, then fill it in record order.
		owner := make([]int, len(pts))
		sizes := make([]int, len(out))
		total := 0
		for i := range pts {
			owner[i] = ss.runs[ss.root(ss.of[i])].out
			if owner[i] >= 0 {
				sizes[owner[i]]++
				total++
			}
		}
		all := make([]int, total)
		for o := range out {
			out[o].members, all = all[:0:sizes[o]], all[sizes[o]:]
		}
		for i, o := range owner {
			if o >= 0 {
				out[o].members = append(out[o].members, i)
			}
		}
	}
	slices.SortFunc(out, func(a, b HeldWindow) int { return a.Window.Start.Compare(b.Window.Start) })
	return out
}

// slidingWindows computes the sliding windows of pts (in time order) that
// end after frozen.
func slidingWindows[P Held](d, frozen int64, pts []P) []HeldWindow {
	times := make([]time.Time, len(pts))
	for i := range pts {
		times[i] = time.UnixMilli(pts[i].HeldAt()).UTC()
	}
	from := func(ms int64) int { return sort.Search(len(pts), func(i int) bool { return pts[i].HeldAt() >= ms }) }
	var out []HeldWindow
	for _, w := range (Sliding{Difference: time.Duration(d) * time.Millisecond}).Windows(times) {
		start, end := w.Start.UnixMilli(), w.End.UnixMilli()
		if end <= frozen {
			continue
		}
		lo, hi := from(start), from(end)
		// A window that is the right window of the record just before it
		// exists if any record in it counts; a left window only, if its
		// own record (at end − 1ms) counts.
		first := lo
		if p := from(start - 1); p == len(pts) || pts[p].HeldAt() != start-1 {
			first = from(end - 1)
		}
		exists := false
		for i := first; i < hi; i++ {
			if counts(pts[i], end) {
				exists = true
				break
			}
		}
		if exists {
			out = append(out, HeldWindow{Window: w, lo: lo, hi: hi})
		}
	}
	return out
}

// SessionReplay is the replay of a key's held session records: the
// sessions they made on arrival, as runs merged by union.
type SessionReplay struct {
	gap  int64
	runs []sessionRun
	of   []int // record index → a run (follow parent to its root)
	live []int // root runs not closed
	// closedTo is the close time the live list was last closed at.
	closedTo int64
}

type sessionRun struct {
	first, last int64
	parent      int // −1 for a root
	out         int // its HeldWindow, −1 for none
}

func (s *SessionReplay) root(r int) int {
	for s.runs[r].parent >= 0 {
		r = s.runs[r].parent
	}
	return r
}

// EndOf is the end of the session record i is in.
func (s *SessionReplay) EndOf(i int) int64 { return s.runs[s.root(s.of[i])].last + s.gap }

// SessionOf is the session record i is in.
func (s *SessionReplay) SessionOf(i int) Window {
	r := &s.runs[s.root(s.of[i])]
	return Of(r.first, r.last+s.gap)
}

// closeTo removes from the live runs those a record with threshold th no
// longer finds: sessions that end at or before it.
func (s *SessionReplay) closeTo(th int64) {
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
func (s *SessionReplay) reach(t int64, found []int) ([]int, int64) {
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

// add puts record i, from t to until (a held run's span; until is t for
// one record), into one run with the live runs it joins.
func (s *SessionReplay) add(i int, t, until int64, joins []int) {
	if len(joins) == 0 {
		s.runs = append(s.runs, sessionRun{first: t, last: until, parent: -1, out: -1})
		s.live = append(s.live, len(s.runs)-1)
		s.of[i] = len(s.runs) - 1
		return
	}
	into := joins[0]
	run := &s.runs[into]
	run.first, run.last = min(run.first, t), max(run.last, until)
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

// ReplaySessions computes the sessions of pts (in time order) as their
// records made them on arrival. Arrival order is not held, and need not
// be: a record that was on time cannot reach a closed session, so the
// on-time records are clustered first, in time order; then the late ones by
// threshold (their arrival order: thresholds only grow), each group after
// closing the sessions that end at or before its threshold.
func ReplaySessions[P Held](gap int64, pts []P) *SessionReplay {
	s := &SessionReplay{gap: gap, of: make([]int, len(pts)), closedTo: NoThreshold}
	var lateIdx []int
	var joins []int
	prev := -1 // the run of the previous on-time record
	for i := range pts {
		pt := pts[i]
		if late(pt) {
			lateIdx = append(lateIdx, i)
			continue
		}
		if prev >= 0 && pt.HeldAt()-s.runs[prev].last < gap {
			joins = append(joins[:0], prev)
			s.add(i, pt.HeldAt(), pt.HeldUntil(), joins)
		} else {
			s.add(i, pt.HeldAt(), pt.HeldUntil(), nil)
			prev = len(s.runs) - 1
		}
	}
	if len(lateIdx) > 1 {
		slices.SortStableFunc(lateIdx, func(a, b int) int { return cmp.Compare(pts[a].Threshold(), pts[b].Threshold()) })
	}
	for _, i := range lateIdx {
		s.closeTo(pts[i].Threshold())
		joins, _ = s.reach(pts[i].HeldAt(), joins[:0])
		s.add(i, pts[i].HeldAt(), pts[i].HeldUntil(), joins)
	}
	return s
}

// OnTimeRuns returns, for each of pts (in time order), the run its record
// makes among the on-time records alone, as ReplaySessions clusters them
// before it replays the late ones (−1 for a late record), and the number
// of runs. Every run lies within one session of the replay, and the
// records of a run may be held as one (HeldAt its first record's time,
// HeldUntil its last one's, on time) without changing any session a
// replay makes, now or with records still to come: the on-time records
// cluster the same, so every late record finds the same sessions. A
// holder that keeps a run's aggregate in place of its records (package
// aggregate, for a key that never pauses) holds a session of any length in
// bounded space.
func OnTimeRuns[P Held](gap int64, pts []P) (runOf []int, runs int) {
	runOf = make([]int, len(pts))
	var last int64
	prev := -1
	for i := range pts {
		pt := pts[i]
		if late(pt) {
			runOf[i] = -1
			continue
		}
		if prev < 0 || pt.HeldAt()-last >= gap {
			prev = runs
			runs++
			last = pt.HeldUntil()
		} else {
			last = max(last, pt.HeldUntil())
		}
		runOf[i] = prev
	}
	return runOf, runs
}

// Judge decides, in arrival order, what becomes of records that arrive at
// a key holding records: NewJudge replays what is held, Next judges one
// more and Hold holds it.
type Judge struct {
	k     Defined
	ss    *SessionReplay
	joins []int
	t     int64 // the record Next judged last
}

// NewJudge returns a Judge of records arriving after those of held (in
// time order).
func NewJudge[P Held](k Defined, held []P) *Judge {
	j := &Judge{k: k}
	if !k.Sliding() {
		j.ss = ReplaySessions(k.Gap.Milliseconds(), held)
	}
	return j
}

// Next judges a record at t with threshold th (see Threshold): keep, if it
// counts in a window not closed; late, if it is dropped from at least one
// of its windows (LateDropped counts it). A record kept is held by calling
// Hold before judging the next one.
func (j *Judge) Next(t, th int64) (keep, isLate bool) {
	isLate = th > t
	if j.k.Sliding() {
		return !isLate || t+j.k.Difference.Milliseconds() >= th, isLate
	}
	if isLate {
		j.ss.closeTo(th)
	}
	var end int64
	j.joins, end = j.ss.reach(t, j.joins[:0])
	j.t = t
	if isLate && end <= th {
		return false, true
	}
	return true, false
}

// Hold adds the record Next judged last (and kept) to what later records
// are judged against.
func (j *Judge) Hold() {
	if j.k.Sliding() {
		return
	}
	j.ss.of = append(j.ss.of, 0)
	j.ss.add(len(j.ss.of)-1, j.t, j.t, j.joins)
}

// PruneHeld returns pts (in time order) without the records that no window
// ending after closed needs, filtered in place: a session's records go with
// it (a closed session is found by no later record); a sliding window
// ending after closed starts at closed − difference or later and may be
// the right window of a record 1ms before its start.
func PruneHeld[P Held](k Defined, closed int64, pts []P) []P {
	if k.Sliding() {
		from := closed - k.Difference.Milliseconds() - 1
		return slices.DeleteFunc(pts, func(p P) bool { return p.HeldAt() < from })
	}
	ss := ReplaySessions(k.Gap.Milliseconds(), pts)
	kept := pts[:0]
	for i, p := range pts {
		if ss.EndOf(i) > closed {
			kept = append(kept, p)
		}
	}
	return kept
}
