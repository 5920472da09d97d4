package conformance

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/window"
)

var seeds = flag.Int("conformance.seeds", 3, "seeded histories per window kind and late policy, and per CEP pattern form (make soak runs hundreds)")

// TestKafkaStreamsConformance runs seeded histories through the aggregate
// function and through Kafka Streams (the oracle in kstreams/) and compares
// every final window: bounds, value, revisions, and the records dropped as
// late. See the package doc; the alignments between the two engines are
// alignKafka and kafkaWindow. The function gets plain Kinesis batches here,
// the batches of the stack's default mapping (TumblingWindowInSeconds) in
// TestKafkaStreamsConformancePerInterval.
func TestKafkaStreamsConformance(t *testing.T) { kafkaConformance(t, perBatch) }

// TestKafkaStreamsConformancePerInterval is TestKafkaStreamsConformance on
// the per-interval write path, the stack's default: the same histories,
// their batches cut into intervals whose partials and session records ride
// in Lambda's window state to each interval's final invocation, which
// writes them and closes what its watermark passes (runProject).
func TestKafkaStreamsConformancePerInterval(t *testing.T) { kafkaConformance(t, perInterval) }

// TestKafkaStreamsConformanceHeldRuns is the session histories of both
// tests with every fold holding the sessions' runs of on-time records as
// their aggregates (aggregate.WithSessionFoldBytes(0)), also the runs
// whose aggregate is larger than their records: the tests above run the
// default, which holds only those it makes smaller
// (aggregate.DefaultSessionFoldBytes).
func TestKafkaStreamsConformanceHeldRuns(t *testing.T) {
	foldEvery = true
	defer func() { foldEvery = false }()
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) { kafkaConformance(t, path, "session") })
	}
}

// foldEvery makes the histories' deployments fold session runs at every
// fold (TestKafkaStreamsConformanceHeldRuns).
var foldEvery bool

// TestKafkaStreamsConformanceOverflow is the per-interval histories with a
// window state that holds a few claims and points only
// (aggregate.WithCarriedBudget): nearly every invocation writes what it
// carries as overflow items, which the next read back and each flush
// folds, the path a shard of thousands of keys takes.
func TestKafkaStreamsConformanceOverflow(t *testing.T) {
	carriedBudget = 300
	defer func() { carriedBudget = 0 }()
	kafkaConformance(t, perInterval)
}

// carriedBudget, when not zero, caps the window state the deployments'
// intervals carry claims and points in (TestKafkaStreamsConformanceOverflow).
var carriedBudget int

// kafkaConformance compares the histories of every window kind, or of
// only those named, on path.
func kafkaConformance(t *testing.T, path string, only ...string) {
	start := time.Now()
	buildOracle(t)
	o := startOracle(t)
	tallies := map[string]*tally{}
	histories := 0
	for _, k := range kinds {
		if len(only) > 0 && !slices.Contains(only, k.name) {
			continue
		}
		for _, p := range policies {
			tl := &tally{}
			tallies[k.name+"/"+p] = tl
			for s := 1; s <= *seeds; s++ {
				h := newHistory(k, p, uint64(s))
				t.Run(h.id(), func(t *testing.T) {
					histories++
					o.submit(h.kafka())
					got := runProject(t, h, path)
					c := compare(h, got, o.result(t, h.id()))
					tl.add(c)
					c.report(t, h)
				})
			}
		}
	}
	for _, k := range kinds {
		for _, p := range policies {
			if tl := tallies[k.name+"/"+p]; tl != nil && tl.histories > 0 {
				t.Logf("%-16s %3d histories (%s): %6d windows compared, %5d mismatched, %3d explained; dropped as late: Kafka %d, aggregate %d (%d histories differ)",
					k.name+"/"+p, tl.histories, path, tl.windows, tl.mismatched, tl.explained, tl.kafkaDropped, tl.projectDropped, tl.droppedDiffer)
			}
		}
	}
	t.Logf("%d histories in %s (the oracle's JVM included)", histories, time.Since(start).Round(time.Millisecond))
}

// id names a history: its subtest's name.
func (h *history) id() string {
	if h.name != "" {
		return h.name
	}
	return fmt.Sprintf("%s/%s/seed=%d", h.kind.name, h.policy, h.seed)
}

// kafka is h in the oracle's terms. The alignments between the two engines
// (docs/windows.md lists them under "Conformance with Kafka Streams"):
//
//   - Time. This project closes windows by a watermark per shard, the
//     newest event time seen minus outOfOrderness; a window [start, end) is
//     final once end <= watermark, and a record for a final window is late.
//     Kafka Streams closes windows by stream time, the newest event time
//     seen (per partition; one here), minus the grace period: a record is
//     dropped from a window whose end <= stream time - grace (tumbling,
//     hopping). So grace = outOfOrderness under latePolicy drop. Under
//     latePolicy correct this project still applies a record to a final
//     window, as a correction, while watermark < end + allowedLateness,
//     which is Kafka's window still open with grace = outOfOrderness +
//     allowedLateness. Kafka's stream time counts the record itself before
//     judging it, this project's watermark after it; a record is never late
//     for a window containing it by its own time, so that cannot differ.
//   - Sliding windows are Kafka's definition here too (both ends
//     inclusive); as half-open windows [start, end+1ms) (kafkaWindow).
//     Kafka keeps a sliding window while its inclusive end >= stream time -
//     grace, so while the half-open end > watermark: grace as above.
//   - Sessions. This project's sessions are half-open: records less than
//     gap apart share a session [first, last+gap). Kafka's are inclusive:
//     records at most gap apart share a session [first, last], so Kafka
//     merges records exactly gap apart and this project does not. At millisecond resolution Kafka's inactivity gap
//     gap-1ms merges exactly the records this project merges, and its
//     session [first, last] is this project's [first, last+gap). Kafka drops
//     a record whose merged session ends (inclusively) before stream time -
//     grace - (gap-1ms), which is this project's merged session ending at
//     or before the watermark: grace as above.
//   - Window stores keep a day (the oracle), so only the grace period
//     decides what Kafka drops; this project keeps what allowedLateness
//     needs. The session store keeps Kafka's default retention (gap +
//     grace), as a plain SessionWindows topology does: with a longer one,
//     Kafka finds closed sessions and merges into them a late record it
//     drops from every window it would be alone in, retracting a final
//     session, which this project never does to a final window its late
//     policy gives no record to.
//   - Sliding windows that Kafka makes by copying a stored window that
//     missed a record late for its own left window (sliding_test.go): this
//     project's window is checked against its own definition instead, and
//     the difference from Kafka's must be exactly such records; these
//     windows are counted as explained, apart from mismatches.
//   - Kafka emits an update per record, this project a result per batch
//     once the window is final: compare the final windows, the last value
//     of each, and each revision's value against the values Kafka's window
//     had at the end of a batch after the watermark passed its end (see
//     compare).
//   - Kafka reads each record once. Lambda's redeliveries (a batch again,
//     or a retry from a few records back) and producers' copies of an event
//     (same id and content, a new record) reach only this project, which
//     must ignore them: the oracle gets each event once, in the order of its
//     first arrival.
//   - The ticker's idle advance moves this project's watermark by the
//     clock; Kafka's stream time moves only with records. Kafka reads a
//     record of idleKey at each advance's watermark + outOfOrderness
//     (history.advances), after the records read before the advance.
func (h *history) kafka() kafkaHistory {
	grace := outOfOrderness.Milliseconds()
	if h.policy == "correct" {
		grace += allowedLateness.Milliseconds()
	}
	k := kafkaHistory{ID: h.id(), Kind: h.kind.name, GraceMs: grace,
		SizeMs: h.kind.sizeMs, AdvanceMs: h.kind.advanceMs, DifferenceMs: h.kind.differenceMs}
	if h.kind.gapMs > 0 {
		k.GapMs = h.kind.gapMs - 1 // Kafka's inclusive gap
	}
	h.kafkaReads(func(i int) {
		e := h.events[h.arrivals[i].event]
		k.Records = append(k.Records, kafkaRecord{Key: e.key, T: e.t, V: e.v})
	}, func(n int) {
		if t, ok := h.advances[n]; ok {
			k.Records = append(k.Records, kafkaRecord{Key: idleKey, T: t})
		}
	})
	return k
}

// kafkaReads walks the records Kafka reads, in order: read(i) for each
// event's first arrival i (no producer copy), in the order Lambda first
// delivers it, and after each invocation n ticked(n).
func (h *history) kafkaReads(read func(i int), ticked func(n int)) {
	seen := make([]bool, len(h.arrivals))
	for n, inv := range h.invocations {
		for i := inv.first; i <= inv.last; i++ {
			if !seen[i] && !h.arrivals[i].copy {
				read(i)
			}
			seen[i] = true
		}
		ticked(n)
	}
}

// kafkaWindow is the window of a Kafka update in this project's terms:
// tumbling and hopping windows are half-open in both; a sliding window's
// inclusive end is end+1ms half-open; a session [first, last] is
// [first, last+gap) (see kafka).
func (h *history) kafkaWindow(u kafkaUpdate) kwin {
	w := kwin{key: u.Key, start: u.Start, end: u.End}
	switch h.kind.name {
	case "sliding":
		w.end++
	case "session":
		w.end += h.kind.gapMs
	}
	return w
}

// kwin is one key's window in this project's terms, [start, end) in Unix ms.
type kwin struct {
	key        string
	start, end int64
}

func (w kwin) String() string {
	return fmt.Sprintf("key %s window %s", w.key, window.Of(w.start, w.end).ID())
}

// value is a window's aggregates.
type value struct {
	count         uint64
	sum, min, max float64
}

func (v value) String() string {
	return fmt.Sprintf("count %d sum %g min %g max %g", v.count, v.sum, v.min, v.max)
}

func valueOf(r agg.Result) value { return value{r.Count, r.Sum, r.Min, r.Max} }

// comparison is one history's outcome.
type comparison struct {
	windows    int
	mismatches map[kwin]string // what differs, per window
	// explained are the windows that differ from Kafka's only as
	// slidingReference.explain accepts, and why.
	explained map[kwin]string
	// Records dropped as late from at least one window: by Kafka (the
	// dropped-records metric moved) and by this project (LateDropped over
	// every invocation, redeliveries included: a record processed before
	// is not judged late again).
	kafkaDropped, projectDropped int
	conflicts                    []string
}

// compare checks every window either engine has:
//
//   - Kafka's final windows (its table after the last record) are the
//     views' final windows and the output stream's windows not retracted,
//     with the same value; the view's revision is the last one emitted.
//   - Each window's results on the output stream are revisions 1, 2, ...:
//     a final result, then corrections, each carrying the previous
//     revision's value as the one it retracts and changing it, and perhaps
//     a retraction (a session merged into another) carrying the last value.
//   - Each revision's value is a value Kafka's window had at the end of a
//     batch at which the watermark had passed the window's end (or after
//     the last record), in order: under latePolicy drop a window has one
//     such value, so one revision; under correct, corrections follow late
//     records.
//   - The records Kafka dropped (from at least one window) are as many as
//     this project's LateDropped.
func compare(h *history, got projectResult, want kafkaResult) *comparison {
	c := &comparison{mismatches: map[kwin]string{}, explained: map[kwin]string{},
		kafkaDropped: len(want.Dropped), projectDropped: got.lateDropped, conflicts: got.conflicts}
	var sliding *slidingReference
	if h.kind.name == "sliding" {
		sliding = newSlidingReference(h, want)
	}

	// Kafka's table at the end of each batch: the values a final window may
	// have, per window, in order.
	admissible := map[kwin][]value{}
	live := map[kwin]value{}
	ooo := outOfOrderness.Milliseconds()
	snapshot := func(watermark int64) {
		for w, v := range live {
			if w.end <= watermark {
				if vs := admissible[w]; len(vs) == 0 || vs[len(vs)-1] != v {
					admissible[w] = append(admissible[w], v)
				}
			}
		}
	}
	next, read, newest := 0, 0, int64(math.MinInt64)
	h.kafkaReads(func(i int) {
		newest = max(newest, h.events[h.arrivals[i].event].t)
		read++
	}, func(n int) {
		for ; next < len(want.Updates) && want.Updates[next].I < read; next++ {
			u := want.Updates[next]
			if u.Key == idleKey {
				continue
			}
			if u.Deleted {
				delete(live, h.kafkaWindow(u))
			} else {
				live[h.kafkaWindow(u)] = value{uint64(u.Count), float64(u.Sum), float64(u.Min), float64(u.Max)}
			}
		}
		if t, ok := h.advances[n]; ok {
			// Kafka's record standing for the advance, read after the
			// invocation: its stream time (the watermark's) moves to it.
			read++
			newest = max(newest, t)
		}
		snapshot(newest - ooo)
		if sliding != nil {
			sliding.ends = append(sliding.ends, batchEnd{read, newest - ooo})
		}
	})
	snapshot(math.MaxInt64)
	if sliding != nil {
		sliding.ends = append(sliding.ends, batchEnd{read, math.MaxInt64})
	}

	chains := map[kwin][]aggregate.Output{}
	for _, o := range got.outputs {
		w := kwin{key: o.Key, start: o.Start.UnixMilli(), end: o.End.UnixMilli()}
		chains[w] = append(chains[w], o)
	}
	views := map[kwin]valueRev{}
	for _, v := range got.views {
		w := kwin{key: v.Key, start: v.Window.Start.UnixMilli(), end: v.Window.End.UnixMilli()}
		views[w] = valueRev{valueOf(v.Result), v.Revision, v.Final}
	}
	all := map[kwin]bool{}
	for w := range live {
		all[w] = true
	}
	for w := range chains {
		all[w] = true
	}
	for w := range views {
		all[w] = true
	}
	c.windows = len(all)
	for w := range all {
		kv, inKafka := live[w]
		var view *valueRev
		if !got.noViews {
			v := views[w]
			view = &v
		}
		if bad := checkWindow(kv, inKafka, chains[w], view, admissible[w]); len(bad) > 0 {
			if sliding != nil {
				if why, ok := sliding.explain(w, kv, inKafka, chains[w], view); ok {
					c.explained[w] = why
					continue
				}
			}
			kafka := "no such window"
			if inKafka {
				kafka = "{" + kv.String() + "}"
			}
			viewText := "none"
			if view != nil && view.revision > 0 {
				viewText = fmt.Sprintf("r%d {%s}", view.revision, view.value)
			}
			c.mismatches[w] = fmt.Sprintf("Kafka %s; output stream %s; view %s: %s", kafka, describe(chains[w]), viewText, strings.Join(bad, "; "))
		}
	}
	return c
}

type valueRev struct {
	value
	revision int
	final    bool
}

// checkWindow compares one window's revisions and view (nil for an engine
// that keeps no views, as a handler of package handler) with Kafka's final
// window (inKafka: Kafka has it), and lists what differs.
func checkWindow(kafka value, inKafka bool, chain []aggregate.Output, view *valueRev, admissible []value) []string {
	var bad []string
	// The chain itself: revisions 1..n, final, corrections, a retraction last.
	var last *value
	retracted := false
	for i, o := range chain {
		v := valueOf(o.Result)
		switch {
		case o.Revision != i+1:
			bad = append(bad, fmt.Sprintf("result %d on the stream is r%d", i+1, o.Revision))
		case retracted:
			bad = append(bad, fmt.Sprintf("%s r%d after the retraction", o.Kind, o.Revision))
		case i == 0 && o.Kind != "final":
			bad = append(bad, fmt.Sprintf("r1 is a %s, not a final result", o.Kind))
		case i > 0 && o.Kind == "final":
			bad = append(bad, fmt.Sprintf("r%d is a final result again", o.Revision))
		case i > 0 && (o.Previous == nil || valueOf(*o.Previous) != *last):
			bad = append(bad, fmt.Sprintf("%s r%d retracts %s, not r%d", o.Kind, o.Revision, previousOf(o), i))
		case o.Kind == "correction" && v == *last:
			bad = append(bad, fmt.Sprintf("correction r%d changes nothing", o.Revision))
		}
		if o.Kind == "retraction" {
			retracted = true
			continue
		}
		last = &v
	}
	// Every value emitted is one Kafka's window had once final, in order.
	var emitted []value
	for _, o := range chain {
		if o.Kind != "retraction" {
			emitted = append(emitted, valueOf(o.Result))
		}
	}
	if !isSubsequence(emitted, admissible) {
		bad = append(bad, "revision values are not the ones Kafka's window had once final ("+values(admissible)+")")
	}
	switch {
	case inKafka && (len(chain) == 0 || retracted):
		bad = append(bad, "Kafka's final window is not on the output stream")
	case inKafka && *last != kafka:
		bad = append(bad, "the last revision is not Kafka's final value")
	case !inKafka && len(chain) > 0 && !retracted:
		bad = append(bad, "a final window Kafka does not have")
	}
	switch {
	case view == nil:
	case inKafka && view.revision == 0:
		bad = append(bad, "the views do not have Kafka's final window")
	case inKafka && (view.value != kafka || !view.final):
		bad = append(bad, "the view is not Kafka's final value")
	case inKafka && view.revision != len(chain):
		bad = append(bad, fmt.Sprintf("the view is at r%d, the stream at r%d", view.revision, len(chain)))
	case !inKafka && view.revision != 0:
		bad = append(bad, "the views have a window Kafka does not have")
	}
	return bad
}

func previousOf(o aggregate.Output) string {
	if o.Previous == nil {
		return "nothing"
	}
	return valueOf(*o.Previous).String()
}

// isSubsequence reports whether sub appears in seq in order.
func isSubsequence(sub, seq []value) bool {
	j := 0
	for _, v := range seq {
		if j < len(sub) && sub[j] == v {
			j++
		}
	}
	return j == len(sub)
}

func values(vs []value) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = "{" + v.String() + "}"
	}
	return strings.Join(s, ", ")
}

// describe lists a window's results on the output stream.
func describe(chain []aggregate.Output) string {
	if len(chain) == 0 {
		return "nothing"
	}
	s := make([]string, len(chain))
	for i, o := range chain {
		if o.Kind == "retraction" {
			s[i] = fmt.Sprintf("retraction r%d", o.Revision)
			continue
		}
		s[i] = fmt.Sprintf("%s r%d {%s}", o.Kind, o.Revision, valueOf(o.Result))
	}
	return strings.Join(s, ", ")
}

// report fails t with c's mismatches, at most a dozen windows of them, and
// the command that runs this history alone.
func (c *comparison) report(t *testing.T, h *history) {
	t.Helper()
	var lines []string
	ws := sortedWindows(c.mismatches)
	for i, w := range ws {
		if i == 12 {
			lines = append(lines, fmt.Sprintf("... and %d more windows", len(ws)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("seed %d %s/%s %s: %s", h.seed, h.kind.name, h.policy, w, c.mismatches[w]))
	}
	if c.kafkaDropped != c.projectDropped {
		lines = append(lines, fmt.Sprintf("seed %d %s/%s: Kafka dropped %d records as late, LateDropped counts %d", h.seed, h.kind.name, h.policy, c.kafkaDropped, c.projectDropped))
	}
	for _, s := range c.conflicts {
		lines = append(lines, "one result id with two contents: "+s)
	}
	if testing.Verbose() {
		for _, w := range sortedWindows(c.explained) {
			t.Logf("explained: seed %d %s/%s %s: %s", h.seed, h.kind.name, h.policy, w, c.explained[w])
		}
	}
	if len(lines) == 0 {
		return
	}
	t.Errorf("%d of %d windows differ from Kafka Streams 4.4.0:\n%s\nrepro: go test ./conformance -run '%s$' -v -args -conformance.seeds=%d",
		len(c.mismatches), c.windows, strings.Join(lines, "\n"), t.Name(), h.seed)
}

// sortedWindows lists m's windows by key and time.
func sortedWindows(m map[kwin]string) []kwin {
	ws := make([]kwin, 0, len(m))
	for w := range m {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b kwin) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	})
	return ws
}

// tally adds up one kind and policy's comparisons.
type tally struct {
	histories, windows, mismatched, explained   int
	kafkaDropped, projectDropped, droppedDiffer int
}

func (tl *tally) add(c *comparison) {
	tl.histories++
	tl.windows += c.windows
	tl.mismatched += len(c.mismatches)
	tl.explained += len(c.explained)
	tl.kafkaDropped += c.kafkaDropped
	tl.projectDropped += c.projectDropped
	if c.kafkaDropped != c.projectDropped {
		tl.droppedDiffer++
	}
}
