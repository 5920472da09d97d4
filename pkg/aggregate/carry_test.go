package aggregate_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// carryConfig is a pipeline of tumbling and hopping windows; with
// partitionKeyIsGroupingKey its per-interval flushes keep a carry.
func carryConfig(name string, carried bool) string {
	return fmt.Sprintf(`{"name":%q,"key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"},{"kind":"hopping","size":"3m","advance":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m",
	  "partitionKeyIsGroupingKey":%t}`, name, carried)
}

// carriedOn is pipelineOn of carryConfig(name, true) on the stand-in, with
// its table's name, for a second processor on the same table.
func carriedOn(t *testing.T, name string) (*aggregate.Processor, *outputLog, string) {
	t.Helper()
	var table string
	p, out := pipelineOn(t, carryConfig(name, true), func(cfg *pipeline.Config, tbl string) *state.Views {
		table = tbl
		return state.NewViews(db, tbl, cfg.Aggregates)
	})
	return p, out, table
}

// carriedAt is pipelineOn of carryConfig(name, true) whose processing
// time (the processor's and its views') is *clock.
func carriedAt(t *testing.T, name string, clock *time.Time) (*aggregate.Processor, *outputLog) {
	t.Helper()
	now := func() time.Time { return *clock }
	return pipelineOn(t, carryConfig(name, true), viewsAt(now), aggregate.WithClock(now))
}

// writesTo is how many writes key's item of window kind starting at from
// had (ww counts them by "<pk> <sk>").
func writesTo(ww *windowWrites, pk, kind string, from time.Time) int {
	prefix := kind + "|" + from.UTC().Format("2006-01-02T15:04:05.000Z")
	ww.mu.Lock()
	defer ww.mu.Unlock()
	n := 0
	for k, c := range ww.n {
		if p, sk, _ := strings.Cut(k, " "); p == pk && strings.HasPrefix(sk, prefix) {
			n += c
		}
	}
	return n
}

// With the carry a window is written when it closes, once, with every
// record of every interval it spans, where each flush it was open for
// wrote it before; the results are the same, records of a window that is
// closed (late ones, corrected) included.
func TestACarriedWindowIsWrittenOnceWhenItCloses(t *testing.T) {
	intervals := [][]at{
		{{"a", 10, 1}, {"a", 70, 2}, {"b", 15, 1}, {"c", 20, 1}},
		{{"a", 130, 3}, {"a", 190, 4}, {"b", 140, 2}, {"c", 150, 2}},
		{{"a", 250, 5}, {"a", 30, 6}, {"b", 260, 3}}, // 30 s: late, corrects the closed [0s,1m), [-2m,1m), [-1m,2m) and [0s,3m)
		{{"z", 1000, 1}},
	}
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	results := map[string]string{}
	writes := map[string]int{} // to window items, all keys
	// Carried, and carried in a carry so small that most keys' windows
	// are written open at each flush instead (spilled), as before it.
	for _, mode := range []string{"not carried", "carried", "spilling"} {
		carried := mode != "not carried"
		t.Run(mode, func(t *testing.T) {
			ww := &windowWrites{Client: db}
			var opts []aggregate.Option
			if mode == "spilling" {
				opts = append(opts, aggregate.WithCarryBytes(64))
			}
			p, out := pipelineOn(t, carryConfig("cw", carried), func(cfg *pipeline.Config, table string) *state.Views {
				return state.NewViews(ww, table, cfg.Aggregates)
			}, opts...)
			r := &feed{t: t, p: p, base: base}
			hopping := 0
			for i, recs := range intervals {
				r.carry(recs...)
				r.flush()
				if i == 1 {
					hopping = writesTo(ww, "cw#a", "hopping:3m0s:1m0s", base) + pageWritesTo(ww, "cw", "a", "hopping:3m0s:1m0s", base)
				}
			}
			for _, n := range ww.n {
				writes[mode] += n
			}
			for _, n := range ww.pages {
				writes[mode] += n
			}
			for _, k := range []string{"a", "b", "c"} {
				results[mode] += strings.Join(out.of(k, base), "\n") + "\n"
			}
			// [0s,3m) gets records from the first two intervals and is
			// closed by the second flush (watermark 185 s); a late record
			// of the third corrects it.
			want := 3 // flush 1 (open), flush 2 (closes), the mark
			if mode == "carried" {
				want = 1 // flush 2 (creates it closed and published, with the carried records)
			}
			if mode != "spilling" && hopping != want {
				t.Errorf("writes to key a's hopping window [0s,3m): %d, want %d", hopping, want)
			}
			if mode == "carried" {
				// [1m,4m) closes at the third flush: written then, whole.
				if n := writesTo(ww, "cw#a", "hopping:3m0s:1m0s", base.Add(time.Minute)) + pageWritesTo(ww, "cw", "a", "hopping:3m0s:1m0s", base.Add(time.Minute)); n != 1 {
					t.Errorf("writes to key a's hopping window [1m,4m): %d, want 1", n)
				}
			}
		})
	}
	if !(writes["carried"] < writes["spilling"] && writes["spilling"] <= writes["not carried"]) {
		t.Errorf("writes to window items %v: want fewer carried than spilling, and no more spilling than not carried", writes)
	}
	for _, mode := range []string{"carried", "spilling"} {
		if results[mode] != results["not carried"] {
			t.Errorf("results %s:\n%s\nnot carried:\n%s", mode, results[mode], results["not carried"])
		}
	}
	for _, want := range []string{
		"final [0s,3m0s) r1 count 3 sum 6",
		"correction [0s,1m0s) r2 count 2 sum 7",
		"final [2m0s,5m0s) r1 count 3 sum 12",
	} {
		if !strings.Contains(results["carried"], want) {
			t.Errorf("results have no %q:\n%s", want, results["carried"])
		}
	}
}

// A shard that goes idle has no flush to close what it carries: the
// ticker's idle advance does, with every carried record.
func TestTheTickerClosesWhatAnIdleShardCarries(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	p, out := carriedAt(t, "ct", &clock)
	r := &feed{t: t, p: p, base: base, clock: &clock}
	r.carry(at{"a", 10, 1}, at{"a", 20, 2})
	r.flush() // watermark 15 s: nothing closes, all carried
	if got := out.of("a", base); len(got) != 0 {
		t.Fatalf("results before any window closed: %v", got)
	}
	// What cmd/results shows meanwhile: the carried window, open.
	views, err := p.Windows(context.Background(), "a", "tumbling:1m0s", base.Add(-time.Hour), base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || views[0].Final || views[0].Result.Count != 2 || !views[0].Window.Start.Equal(base) {
		t.Errorf("key a's tumbling windows while carried: %+v, want [0s,1m) open with 2 records", views)
	}
	r.tick(60 * time.Second)  // the idle clock starts
	r.tick(100 * time.Second) // idle for 40 s: the watermark moves to 65 s
	got := strings.Join(out.of("a", base), "\n")
	if want := "final [0s,1m0s) r1 count 2 sum 3"; !strings.Contains(got, want) {
		t.Errorf("results after the idle advance:\n%s\nwant %q", got, want)
	}
	r.tick(400 * time.Second)
	got = strings.Join(out.of("a", base), "\n")
	for _, want := range []string{"final [-2m0s,1m0s) r1 count 2 sum 3", "final [0s,3m0s) r1 count 2 sum 3"} {
		if !strings.Contains(got, want) {
			t.Errorf("results after the hopping windows' end:\n%s\nwant %q", got, want)
		}
	}
	if n := strings.Count(got, "final [0s,1m0s)"); n != 1 {
		t.Errorf("the tumbling window's result %d times:\n%s", n, got)
	}
}

// Lambda sends a final invocation again when its answer is lost: the
// carry already holds its interval, so nothing is written or published
// twice.
func TestAFinalInvocationSentAgainFindsItsIntervalCarried(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var logs lockedBuffer
	p, out := pipelineOn(t, carryConfig("cr", true), nil, aggregate.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	r := &feed{t: t, p: p, base: base}
	r.carry(at{"a", 10, 1}, at{"a", 50, 2})
	r.carry(at{"a", 70, 4})
	st := r.state
	r.flush()
	r.state = st
	r.flush()
	r.carry(at{"z", 1000, 1})
	r.flush()
	got := strings.Join(out.of("a", base), "\n")
	if n := strings.Count(got, "[0s,1m0s)"); n != 1 {
		t.Errorf("[0s,1m0s) has %d results, want its final one once:\n%s", n, got)
	}
	if !strings.Contains(got, "final [0s,1m0s) r1 count 2 sum 3") || !strings.Contains(got, "final [1m0s,2m0s) r1 count 1 sum 4") {
		t.Errorf("results of key a:\n%s", got)
	}
	lines := 0
	for _, l := range logs.resultLines(t) {
		if l["key"] == "a" && l["window"] == "tumbling:1m0s" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d result log lines of key a's tumbling windows, want 2", lines)
	}
}

// After a reshard the keys' open windows are in the parent's carry: the
// child's first flush writes them out (it asks Kinesis for its parents)
// before its own, so a window spanning the reshard has every record in its
// first result.
func TestAChildShardTakesOverItsParentsCarry(t *testing.T) {
	name, parent, child := splitStream(t)
	if child == "" {
		t.Fatalf("no child of %s", parent)
	}

	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, lister := range []bool{true, false} {
		t.Run(fmt.Sprintf("lister=%t", lister), func(t *testing.T) {
			var opts []aggregate.Option
			if lister {
				opts = append(opts, aggregate.WithShardLister(kin, name))
			}
			p, out := pipelineOn(t, carryConfig("cs", true), nil, opts...)
			before := &feed{t: t, p: p, base: base, shard: parent}
			before.carry(at{"a", 10, 1}, at{"a", 20, 2})
			before.flush()
			after := &feed{t: t, p: p, base: base, shard: child}
			after.carry(at{"a", 40, 4}, at{"a", 50, 8})
			after.flush()
			after.carry(at{"a", 130, 16})
			after.flush()
			got := strings.Join(out.of("a", base), "\n")
			want := "final [0s,1m0s) r1 count 4 sum 15"
			if !lister {
				// What a pipeline that keeps carries and is resharded
				// without a lister gets: the parent's records missing.
				want = "final [0s,1m0s) r1 count 2 sum 12"
			}
			if !strings.Contains(got, want) {
				t.Errorf("key a's results have no %q:\n%s", want, got)
			}
		})
	}
}

// A replay that catches a version up again (use-version, rollback) has
// its carries written out first (SpillCarries): the records it applies
// again from a little before where the version got to then meet their
// windows' fences, where, left in the carry, they were applied to the
// windows and still carried, to be added again when the window closed.
func TestACatchUpAfterTheCarriesAreWrittenOutCountsEachRecordOnce(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	p, liveOut, table := carriedOn(t, "hu")
	live := &feed{t: t, p: p, base: base}
	live.carry(at{"a", 10, 1}, at{"a", 20, 2})
	live.flush() // carried: the version's window items do not have them
	if err := p.SpillCarries(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The replay's processor, per batch, from the first record again.
	cfg, err := pipeline.Parse([]byte(carryConfig("hu", true)))
	if err != nil {
		t.Fatal(err)
	}
	out := &outputLog{}
	replayed := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), out, "results", aggregate.WithLogger(quiet))
	catchUp := &feed{t: t, p: replayed, base: base, path: perBatch}
	catchUp.batch(at{"a", 10, 1}, at{"a", 20, 2}, at{"a", 40, 4})
	// The version's watermark at 4m55s: [0s,1m) is final, and its end +
	// allowedLateness (11m) still ahead of it.
	catchUp.batch(at{"z", 300, 1})
	got := strings.Join(out.of("a", base), "\n")
	if !strings.Contains(got, "final [0s,1m0s) r1 count 3 sum 7") {
		t.Errorf("key a's results after the catch-up:\n%s\nwant [0s,1m) with each of its three records once", got)
	}
	// The live function comes back to the version: its carry holds
	// nothing the catch-up applied, so a late record of the window is a
	// correction of it (left in the carry, the records carried would meet
	// the window's fence, and every flush fail).
	live.seq = catchUp.seq
	live.carry(at{"a", 50, 8})
	live.flush()
	live.carry(at{"z", 2000, 1})
	live.flush()
	if got := strings.Join(liveOut.of("a", base), "\n"); !strings.Contains(got, "correction [0s,1m0s) r2 count 4 sum 15") {
		t.Errorf("key a's results from the live function:\n%s\nwant the late record's correction, count 4 sum 15", got)
	}
}
