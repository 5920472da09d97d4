package window

import (
	"slices"
	"sort"
	"time"
)

// Sliding windows follow Kafka Streams' SlidingWindows
// (SlidingWindows.ofTimeDifferenceWithNoGrace(d); the grace period is this
// package's watermark and LateRule instead): a window holds the records whose
// times lie within Difference of each other, both ends inclusive, and a new
// window exists each time a record enters or leaves the sliding span.
//
// Exactly, at millisecond resolution (event times are truncated to
// milliseconds), for the set R of a key's record times and d = Difference:
//
//   - every record time r has a left window [r−d, r] (inclusive), the window
//     that ends at the record;
//   - every record time r that has another record in (r, r+d] also has a
//     right window [r+1ms, r+1ms+d], the window that starts just after the
//     record (the one created when r drops out); a right window with no
//     record in it is not a window;
//   - a window's value is the aggregate of every record in it;
//   - two records' windows with the same bounds are the same window.
//
// As half-open Windows, the left window of r is [r−d, r+1ms) and the right
// window [r+1ms, r+d+2ms). With d = 5s and records at 8.000s, 9.200s and
// 12.400s there are five windows, as in Kafka's documentation:
// [3.000, 8.000] {8.0}, [4.200, 9.200] {8.0, 9.2}, [7.400, 12.400] {all three},
// [8.001, 13.001] {9.2, 12.4} and [9.201, 14.201] {12.4}.
//
// The set of windows does not depend on the order records arrive in. Add says
// what one more record changes; Windows computes the whole set. Unlike
// tumbling and hopping windows, a created sliding window's value is not a
// merge of earlier state: the caller computes it from the key's buffered
// records (kept for Difference plus the allowed lateness), so sliding
// windows cost a buffer of records per key.
type Sliding struct {
	Difference time.Duration
}

// Validate checks Difference (positive, whole milliseconds).
func (s Sliding) Validate() error { return checkDuration("difference", s.Difference) }

// Left is the window that ends at a record at t: [t−d, t] inclusive.
func (s Sliding) Left(t time.Time) Window {
	r := t.UnixMilli()
	return Of(r-s.Difference.Milliseconds(), r+1)
}

// Right is the window that starts just after a record at t:
// [t+1ms, t+1ms+d] inclusive. It is a window only while a record lies in it.
func (s Sliding) Right(t time.Time) Window {
	r := t.UnixMilli()
	return Of(r+1, r+2+s.Difference.Milliseconds())
}

// SlidingUpdate is what adding one record at t does to a key's windows.
type SlidingUpdate struct {
	// Created are windows that did not exist before the record: its left
	// window (unless a record at the same millisecond made it already), its
	// right window if a later record lies within d, and the right window of
	// the closest earlier record if the new record is the first after it
	// within d. The caller computes each one's value from all buffered
	// records in it, including the new one (a created right window of the
	// record itself does not contain it). Sorted by start.
	Created []Window
	// Updated are windows that existed and contain t: the caller adds the
	// record to each. Sorted by start.
	Updated []Window
}

// Add returns what a record at t changes, given held: the event times of the
// key's records already applied, sorted ascending (times within one
// millisecond count as equal). It only looks at the records of held within
// 2d+1ms of t (by binary search). See AddTo to reuse the result's slices.
func (s Sliding) Add(held []time.Time, t time.Time) SlidingUpdate {
	var u SlidingUpdate
	s.AddTo(&u, held, t)
	return u
}

// AddTo is Add writing into u, reusing its slices.
func (s Sliding) AddTo(u *SlidingUpdate, held []time.Time, t time.Time) {
	u.Created, u.Updated = u.Created[:0], u.Updated[:0]
	d := s.Difference.Milliseconds()
	tm := t.UnixMilli()
	h := heldMillis(held)
	const none = 1<<63 - 1

	// Updated: the left windows of records in [t, t+d] and the existing right
	// windows of records in [t−d−1, t−1]. All windows are d+1ms long, so a
	// start names a window; both runs are sorted by start, merge them.
	lefts := h.from(tm)
	rights := h.from(tm - d - 1)
	for {
		ls, rs := int64(none), int64(none)
		if lefts < len(h) && h.at(lefts) <= tm+d {
			ls = h.at(lefts) - d
		}
		for rights < len(h) && h.at(rights) < tm {
			if h.hasNext(rights, d) {
				rs = h.at(rights) + 1
				break
			}
			rights = h.next(rights)
		}
		if ls == none && rs == none {
			break
		}
		start := min(ls, rs)
		u.Updated = append(u.Updated, Of(start, start+d+1))
		if ls == start {
			lefts = h.next(lefts)
		}
		if rs == start {
			rights = h.next(rights)
		}
	}

	// Created, in start order: t's left window, the right window of the
	// closest earlier record within d, t's right window.
	ti := h.from(tm)
	tHeld := ti < len(h) && h.at(ti) == tm
	if !tHeld && !h.isRight(tm-d-1, d) {
		u.Created = append(u.Created, Of(tm-d, tm+1))
	}
	if ti > 0 {
		pi := h.from(h.at(ti - 1)) // the first record at the closest earlier millisecond
		if p := h.at(pi); p >= tm-d && !h.hasNext(pi, d) && !h.contains(p+d+1) {
			u.Created = append(u.Created, Of(p+1, p+d+2))
		}
	}
	if !tHeld && h.hasNextAfter(tm, d) && !h.contains(tm+d+1) {
		u.Created = append(u.Created, Of(tm+1, tm+d+2))
	}
}

// heldMillis answers questions about sorted record times, in milliseconds.
type heldMillis []time.Time

func (h heldMillis) at(i int) int64 { return h[i].UnixMilli() }

// from is the index of the first record at or after ms.
func (h heldMillis) from(ms int64) int {
	return sort.Search(len(h), func(i int) bool { return h[i].UnixMilli() >= ms })
}

// next is the index of the first record after h[i]'s millisecond.
func (h heldMillis) next(i int) int { return h.from(h.at(i) + 1) }

func (h heldMillis) contains(ms int64) bool {
	i := h.from(ms)
	return i < len(h) && h.at(i) == ms
}

// hasNext reports whether a record lies in (h[i], h[i]+d].
func (h heldMillis) hasNext(i int, d int64) bool { return h.hasNextAfter(h.at(i), d) }

// hasNextAfter reports whether a record lies in (ms, ms+d].
func (h heldMillis) hasNextAfter(ms, d int64) bool {
	j := h.from(ms + 1)
	return j < len(h) && h.at(j) <= ms+d
}

// isRight reports whether a record at ms has a right window.
func (h heldMillis) isRight(ms, d int64) bool { return h.contains(ms) && h.hasNextAfter(ms, d) }

// Windows returns every window of records at times (any order), sorted by
// start then end, each once.
func (s Sliding) Windows(times []time.Time) []Window {
	d := s.Difference.Milliseconds()
	rs := make([]int64, len(times))
	for i, t := range times {
		rs[i] = t.UnixMilli()
	}
	slices.Sort(rs)
	var ws []Window
	for i, r := range rs {
		ws = append(ws, Of(r-d, r+1))
		if j := nextAfter(rs, i); j < len(rs) && rs[j] <= r+d {
			ws = append(ws, Of(r+1, r+2+d))
		}
	}
	return sortDistinct(ws)
}

// nextAfter is the index of the first element of sorted rs greater than rs[i].
func nextAfter(rs []int64, i int) int {
	j := i + 1
	for j < len(rs) && rs[j] == rs[i] {
		j++
	}
	return j
}

func compareWindows(a, b Window) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return a.End.Compare(b.End)
}

func sortDistinct(ws []Window) []Window {
	slices.SortFunc(ws, compareWindows)
	return slices.CompactFunc(ws, func(a, b Window) bool { return a == b })
}
