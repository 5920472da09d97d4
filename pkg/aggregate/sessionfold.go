package aggregate

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Held session runs. A key that never pauses for its session gap (a busy
// page, a bot, a sensor) keeps one session open for as long as it sends,
// and its keyed state held every record of it: at 100 records a second the
// state reached its budget (one DynamoDB item) within minutes, and from
// then on every record of the key was set aside, in every window kind,
// until the session closed, which it never did. Kafka Streams and Flink
// keep a session as its bounds and its aggregate.
//
// So does a session state (past foldBytes, WithSessionFoldBytes): each run
// of its on-time records (window.OnTimeRuns: the records a replay clusters
// before it replays the late ones, which lie within one session) becomes
// one point that holds the run's bounds and aggregate. Replaying the
// points then makes the same sessions, now and with every record still to
// come, so a record is judged as before and a session's value is the same
// aggregate (up to the order its sum adds its values in). What is not
// folded: late records (a replay places them by their thresholds), and
// the runs of a session already emitted or frozen,
// whose value would be recomputed from other bytes (a sum added in
// another order) and corrected for nothing. The state's write is billed by
// its size too: a busy key's state stays a few KB, not hundreds.

// DefaultSessionFoldBytes is the size of a session state's points past
// which its runs are folded: 1, so every fold holds each run whose
// aggregate takes fewer bytes than its records, from the first. It was
// 8 KB, for busy keys alone, and a state below it held every record of
// its open session: each fold and finalize replayed them all, up to 8 KB
// of points, and the state was written at that size. Measured the day
// it changed (bench/throughput, the deployed pipeline, batch 100, one
// core): per batch 15,567 → 25,327 records/s and the interval's final
// invocation 14,331 → 26,096 on its default 3,000 records; 4,745 → 14,789
// and 3,801 → 11,204 on 30,000, whose 50 busy keys each keep a longer
// session; bench/load's reference load wrote 0.180 → 0.147 write units
// an event to session states. The sessions are the same — their bounds,
// revisions, corrections and retractions, the records judged late — and
// so are their values, but for the last bits of a sum or mean of values
// that are not whole numbers: a held run adds its records before those
// around it, as a tumbling window adds each batch's partial, and
// floating-point addition depends on its order
// (TestSessionRunsHeldFromTheFirstFoldMakeTheSameSessions; the Kafka
// Streams conformance runs the default).
const DefaultSessionFoldBytes = 1

// WithSessionFoldBytes sets the size of a session state's points past
// which a fold holds its runs as their aggregates. At 0 every fold holds
// every run of two or more records, smaller than its records or not (the
// conformance test's way to play each history through held runs).
func WithSessionFoldBytes(n int) Option {
	return func(p *Processor) { p.sessionFoldBytes = max(0, n) }
}

// runPointOverhead is what a held run adds to a point's encoding: its
// index among the runs, the span to its last record, the aggregate's
// length (three varints of 10 bytes at most).
const runPointOverhead = 30

// foldSessionRuns holds each foldable run of buf's points as one point
// with the run's aggregate, where that takes fewer bytes than its points
// (every run, with always). It returns how many runs it folded.
func foldSessionRuns(aggs *agg.Spec, gap int64, buf *keyedBuf, always bool) (int, error) {
	runOf, runs := window.OnTimeRuns(gap, buf.Points)
	if runs == 0 {
		return 0, nil
	}
	type run struct {
		first, last    int64
		members, bytes int
		keep           bool // its session is emitted or frozen: not folded
		blob           []byte
	}
	rs := make([]run, runs)
	ss := window.ReplaySessions(gap, buf.Points)
	var id [window.IDLength]byte
	for i := range buf.Points {
		r := runOf[i]
		if r < 0 {
			continue
		}
		pt := &buf.Points[i]
		x := &rs[r]
		if x.members == 0 {
			x.first, x.last = pt.T, pt.HeldUntil()
			w := ss.SessionOf(i) // every member's: a run lies within one session
			_, emitted := buf.Emitted[string(w.AppendID(id[:0]))]
			x.keep = emitted || w.End.UnixMilli() <= buf.Frozen
		}
		x.last = max(x.last, pt.HeldUntil())
		x.members++
		x.bytes += pointBytes(pt)
	}
	// Each run's members, in one pass: a state of many short sessions
	// (kept for the allowed lateness) is not scanned once a run.
	start := make([]int, runs+1)
	for r := range rs {
		start[r+1] = start[r] + rs[r].members
	}
	members := make([]int, start[runs])
	fill := slices.Clone(start[:runs])
	for i, r := range runOf {
		if r >= 0 {
			members[fill[r]] = i
			fill[r]++
		}
	}
	folded := 0
	st, part := aggs.New(), aggs.New()
	for r := range rs {
		x := &rs[r]
		if x.keep || x.members < 2 {
			continue
		}
		st.Clear()
		for _, i := range members[start[r]:start[r+1]] {
			pt := &buf.Points[i]
			if pt.Agg == nil {
				st.Add(pt.V, pt.D)
				continue
			}
			if err := part.SetBinary(pt.Agg); err != nil {
				return 0, fmt.Errorf("aggregate: a held session run at %d: %w", pt.T, err)
			}
			if err := st.Merge(part); err != nil {
				return 0, fmt.Errorf("aggregate: a held session run at %d: %w", pt.T, err)
			}
		}
		blob, err := st.MarshalBinary()
		if err != nil {
			return 0, err
		}
		if !always && len(blob)+runPointOverhead >= x.bytes {
			continue // its records take fewer bytes than its aggregate
		}
		x.blob = blob
		folded++
	}
	if folded == 0 {
		return 0, nil
	}
	// A run's first member is its earliest record, so its point takes
	// that member's place and the points stay in time order.
	out := buf.Points[:0]
	for i := range buf.Points {
		r := runOf[i]
		if r < 0 || rs[r].blob == nil {
			out = append(out, buf.Points[i])
			continue
		}
		if x := &rs[r]; x.members > 0 {
			out = append(out, point{T: x.first, Until: x.last, Agg: x.blob, Th: noThreshold})
			x.members = 0 // placed
		}
	}
	clear(buf.Points[len(out):])
	buf.Points = out
	return folded, nil
}

// pointBytes is about what pt takes in the keyed state's encoding (its
// time's delta counted as 3 bytes).
func pointBytes(pt *point) int {
	n := 3
	if pt.Agg != nil {
		return n + 1 + runPointOverhead + len(pt.Agg)
	}
	var b [20]byte
	n += len(appendValue(b[:0], pt.V, pt.late()))
	if pt.late() {
		n += len(binary.AppendUvarint(b[:0], uint64(pt.Th-pt.T)))
	}
	if len(pt.D) > 0 {
		n += 1 + len(pt.D)
	}
	return n
}

// pointsBytes is about what pts take in the keyed state's encoding.
func pointsBytes(pts []point) int {
	n := 0
	for i := range pts {
		n += pointBytes(&pts[i])
	}
	return n
}

// sessionBound bounds the bytes that fresh points add to a session state
// whose runs are folded (foldSessionRuns): a late point at most
// pointBytesMax, and
// each cluster of on-time points closer than gap to each other — within
// one run once held — at most its points' pointBytesMax or its aggregate
// held as one point, whichever is less. A held run a cluster joins takes
// at most its own bytes and the cluster's (a merge of two aggregates
// encodes in no more than both), so the bound holds for the state.
func sessionBound(aggs *agg.Spec, gap int64, fresh []point) (int, error) {
	pts := slices.Clone(fresh)
	slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.T, b.T) })
	bound := 0
	st := aggs.New()
	n := 0
	var last int64
	cluster := func() error {
		if n == 0 {
			return nil
		}
		blob, err := st.MarshalBinary()
		if err != nil {
			return err
		}
		bound += min(n*pointBytesMax, pointBytesMax+runPointOverhead+len(blob))
		st.Clear()
		n = 0
		return nil
	}
	for i := range pts {
		pt := &pts[i]
		if pt.late() {
			bound += pointBytesMax
			continue
		}
		if n > 0 && pt.T-last >= gap {
			if err := cluster(); err != nil {
				return 0, err
			}
		}
		st.Add(pt.V, pt.D)
		last = pt.T
		n++
	}
	if err := cluster(); err != nil {
		return 0, err
	}
	return bound, nil
}
