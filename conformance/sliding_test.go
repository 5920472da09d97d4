package conformance

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// Kafka Streams makes sliding windows incrementally
// (KStreamSlidingWindowAggregate): a record updates the stored windows that
// contain it and are not closed, and creates the windows it defines by
// copying a stored window's aggregate: its left window from the newest
// stored window that ends before it (leftWinAgg), its right window from the
// stored window that starts nearest before it (rightWinAgg), and it creates
// the right window of the record before it, taken to be the newest time in
// that stored left-side window. That is exact while every record is in
// every stored window it lies in. A record that arrives late for its own
// left window (closed: it is dropped from it, so Kafka never stores it)
// but in time for later windows breaks that: it is missing from the stored
// windows that were closed when it came, so a window created later by
// copying one of them misses it, or holds a record outside it (the copy
// stood in for the late record's own right window, which Kafka never made),
// and the late record's right window is never made at all (no stored window
// names it as the previous record), although those windows are open for it.
//
// This project derives each window from the records themselves: a record
// counts in every window ending after the close time it arrived at, and a
// window exists if the record that defines it counts in it. So where
// Kafka's window was made by such a copy, the test checks this project's
// window against that definition (slidingReference), and accepts Kafka's
// value only when the whole difference is such records: records late for
// their own left window (and not for all their windows) that arrived before
// Kafka first stored the window, and so reached it only through a copy.
// Such windows are counted as explained, not as mismatches.

// slidingReference is a history's sliding windows as this project defines
// them, computed from the records Kafka reads, each with the close time it
// arrived at, for the windows where Kafka's differ.
type slidingReference struct {
	d    int64 // the time difference, ms
	recs []slidingRecord
	// created is, per window, the index of the record whose update first
	// stored it in Kafka.
	created map[kwin]int
	// ends are the batches' ends, as compare replays them.
	ends []batchEnd
}

// slidingRecord is one record Kafka reads, in order, with th, the close time
// it arrived at (Kafka's stream time before it less the grace period, this
// project's watermark less the allowed lateness), or math.MinInt64 when
// that is not after its own time.
type slidingRecord struct {
	key     string
	t, v    int64
	th      int64
	dropped bool // Kafka's dropped-records metric moved for it
}

// batchEnd is the end of an invocation: the records Kafka has read by then
// and the watermark.
type batchEnd struct {
	read      int
	watermark int64
}

func newSlidingReference(h *history, want kafkaResult) *slidingReference {
	k := h.kafka()
	r := &slidingReference{d: h.kind.differenceMs, created: map[kwin]int{}}
	newest := int64(math.MinInt64)
	for _, rec := range k.Records {
		th := int64(math.MinInt64)
		if newest != math.MinInt64 && newest-k.GraceMs > rec.T {
			th = newest - k.GraceMs
		}
		r.recs = append(r.recs, slidingRecord{key: rec.Key, t: rec.T, v: rec.V, th: th})
		newest = max(newest, rec.T)
	}
	for _, i := range want.Dropped {
		r.recs[i].dropped = true
	}
	for _, u := range want.Updates {
		if w := h.kafkaWindow(u); !u.Deleted {
			if _, ok := r.created[w]; !ok {
				r.created[w] = u.I
			}
		}
	}
	return r
}

// partlyLate reports whether record i arrived after its own left window was
// closed but in time for some of its windows: Kafka dropped it from some
// windows and never stored its left window.
func (r *slidingReference) partlyLate(i int) bool {
	rec := &r.recs[i]
	return rec.dropped && rec.th > rec.t && rec.t+r.d >= rec.th
}

// counts reports whether record i counts in window w (half-open).
func (r *slidingReference) counts(i int, w kwin) bool {
	rec := &r.recs[i]
	return rec.key == w.key && rec.t >= w.start && rec.t < w.end && w.end > rec.th
}

// window is w as this project defines it from the first n records: the
// records that count in it, and whether it exists (the record it is the
// left window of counts in it, or it is the right window of a record not
// dropped from every window and some record counts in it).
func (r *slidingReference) window(w kwin, n int) (members []int, exists bool) {
	right := false
	for i := range n {
		rec := &r.recs[i]
		if rec.key != w.key {
			continue
		}
		if rec.t == w.start-1 && rec.t+r.d >= rec.th {
			right = true
		}
		if r.counts(i, w) {
			members = append(members, i)
			exists = exists || rec.t == w.end-1
		}
	}
	return members, exists || (right && len(members) > 0)
}

// valueOfRecords is the aggregate of records is.
func (r *slidingReference) valueOfRecords(is []int) value {
	v := value{min: math.Inf(1), max: math.Inf(-1)}
	for _, i := range is {
		x := float64(r.recs[i].v)
		v.count++
		v.sum += x
		v.min, v.max = min(v.min, x), max(v.max, x)
	}
	return v
}

// explain reports why window w, which differs from Kafka's, is explained
// by Kafka's copies (see above), or false when it is not: this project's
// window (its revisions, the view) must be the reference's, and Kafka's
// must differ from it only by records late for their own left window that
// arrived before Kafka stored w, either missing from it, or (inside the
// time difference before it) extra in it; or, when Kafka has no window w,
// w must be the right window of such a record.
func (r *slidingReference) explain(w kwin, kafka value, inKafka bool, chain []aggregate.Output, view *valueRev) (string, bool) {
	var admissible []value
	for _, e := range r.ends {
		if w.end > e.watermark {
			continue
		}
		if m, ok := r.window(w, e.read); ok {
			if v := r.valueOfRecords(m); len(admissible) == 0 || admissible[len(admissible)-1] != v {
				admissible = append(admissible, v)
			}
		}
	}
	members, exists := r.window(w, len(r.recs))
	if !exists {
		return "", false
	}
	if bad := checkWindow(r.valueOfRecords(members), true, chain, view, admissible); len(bad) > 0 {
		return "", false
	}

	if !inKafka {
		for i := range r.recs {
			if rec := &r.recs[i]; rec.key == w.key && rec.t == w.start-1 && r.partlyLate(i) {
				return fmt.Sprintf("Kafka never made the right window of record %d (%s), late for its own left window", i, at(rec.t)), true
			}
		}
		return "", false
	}

	created, ok := r.created[w]
	if !ok {
		return "", false
	}
	var missing, extra []int
	for _, i := range members {
		if i < created && r.partlyLate(i) {
			missing = append(missing, i)
		}
	}
	for i := range created {
		if rec := &r.recs[i]; rec.key == w.key && rec.t >= w.start-r.d-1 && rec.t < w.start && r.partlyLate(i) {
			extra = append(extra, i)
		}
	}
	n := len(missing) + len(extra)
	if n == 0 || n > 12 {
		return "", false
	}
	for mask := uint(1); mask < 1<<n; mask++ {
		drop := map[int]bool{}
		var add, named []int
		for b := range n {
			if mask&(1<<b) == 0 {
				continue
			}
			if b < len(missing) {
				drop[missing[b]] = true
			} else {
				add = append(add, extra[b-len(missing)])
			}
		}
		var is []int
		for _, i := range members {
			if !drop[i] {
				is = append(is, i)
			}
		}
		if r.valueOfRecords(append(is, add...)) != kafka {
			continue
		}
		var parts []string
		for _, i := range missing {
			if drop[i] {
				named = append(named, i)
			}
		}
		if len(drop) > 0 {
			parts = append(parts, "misses "+r.describe(named))
		}
		if len(add) > 0 {
			parts = append(parts, "holds "+r.describe(add)+" from before it")
		}
		return fmt.Sprintf("Kafka's copy %s (%d record(s) late for their own left window, arrived before Kafka stored it)", strings.Join(parts, " and "), bits.OnesCount(mask)), true
	}
	return "", false
}

func (r *slidingReference) describe(is []int) string {
	s := make([]string, len(is))
	for j, i := range is {
		s[j] = fmt.Sprintf("record %d (%s)", i, at(r.recs[i].t))
	}
	return strings.Join(s, ", ")
}

func at(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05.000") }
