package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

var (
	minute = window.Window{Start: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)}
	spec   = mustSpec([]string{"count", "sum", "min", "max"})
)

func mustSpec(names []string) *agg.Spec {
	s, err := agg.NewSpec(names, nil)
	if err != nil {
		panic(err)
	}
	return s
}

type fixture struct {
	views *state.Views
	db    *dynamodb.Client
	table string
}

var (
	shared *dynamodb.Client
	tables int
	mu     sync.Mutex
)

// TestMain starts one stand-in for the package; each test gets its own table.
func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { shared = dynamodb.NewFromConfig(cfg) }))
}

// newViews gives each test its own table on the package's stand-in.
func newViews(t *testing.T, opts ...state.Option) *fixture {
	t.Helper()
	mu.Lock()
	tables++
	name := "views-" + strconv.Itoa(tables)
	mu.Unlock()
	if err := state.CreateTable(context.Background(), shared, name); err != nil {
		t.Fatal(err)
	}
	return &fixture{views: state.NewViews(shared, name, spec, opts...), db: shared, table: name}
}

func entries(from, to int) []state.Entry {
	var es []state.Entry
	for i := from; i <= to; i++ {
		es = append(es, state.Entry{Seq: strconv.Itoa(i), Value: float64(i)})
	}
	return es
}

func update(es []state.Entry) *state.Update {
	return &state.Update{Pipeline: "p", Key: "k", Kind: "tumbling:1m0s", Window: minute, OpenIn: "p#shard-0", Entries: es}
}

// dueAt lists the test window for key k under p#shard-0, as a batch does
// once it has written it, and returns the window items a finalize at until
// finds in the listings.
func dueAt(t *testing.T, f *fixture, until time.Time) []state.Ref {
	t.Helper()
	ctx := context.Background()
	if _, err := f.views.ListWindow(ctx, "p#shard-0", "tumbling:1m0s", minute, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	ls, err := f.views.Listings(ctx, "p#shard-0", until)
	if err != nil {
		t.Fatal(err)
	}
	var refs []state.Ref
	for i := range ls {
		refs = append(refs, ls[i].Refs("p")...)
	}
	return refs
}

func read(t *testing.T, f *fixture) state.View {
	t.Helper()
	vs, err := f.views.Query(context.Background(), "p", "k", "tumbling:1m0s", minute.Start, minute.End)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		t.Fatalf("got %d windows, want 1", len(vs))
	}
	return vs[0]
}

func TestRetryPatternsApplyEachRecordOnce(t *testing.T) {
	tests := []struct {
		name     string
		batches  [][2]int // seq ranges delivered, in order
		outcomes []state.Outcome
		count    uint64
		sum      float64
	}{
		{"whole batch retried", [][2]int{{1, 10}, {1, 10}}, []state.Outcome{state.Applied, state.Duplicate}, 10, 55},
		{"checkpoint retry overlaps", [][2]int{{1, 6}, {4, 10}}, []state.Outcome{state.Applied, state.PartlyApplied}, 10, 55},
		{"bisected halves after whole", [][2]int{{1, 10}, {1, 5}, {6, 10}}, []state.Outcome{state.Applied, state.Duplicate, state.Duplicate}, 10, 55},
		{"smaller then larger batch", [][2]int{{1, 3}, {1, 8}, {9, 12}}, []state.Outcome{state.Applied, state.PartlyApplied, state.Applied}, 12, 78},
		// "9" > "10" as strings; the fence compares them as numbers.
		{"sequence numbers of different length", [][2]int{{8, 9}, {10, 11}, {9, 11}}, []state.Outcome{state.Applied, state.Applied, state.Duplicate}, 4, 38},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newViews(t)
			for i, b := range tc.batches {
				res, err := f.views.Apply(context.Background(), "shard-0", update(entries(b[0], b[1])))
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != tc.outcomes[i] {
					t.Errorf("batch %d (%d..%d): outcome %s, want %s", i, b[0], b[1], res.Outcome, tc.outcomes[i])
				}
			}
			got := read(t, f).Result
			if got.Count != tc.count || got.Sum != tc.sum {
				t.Fatalf("count %d sum %v, want count %d sum %v", got.Count, got.Sum, tc.count, tc.sum)
			}
		})
	}
}

func TestConcurrentDuplicateInvocationsApplyOnce(t *testing.T) {
	f := newViews(t)
	var wg sync.WaitGroup
	results := make(chan state.Outcome, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.views.Apply(context.Background(), "shard-0", update(entries(1, 20)))
			if err != nil {
				t.Error(err)
				return
			}
			results <- res.Outcome
		}()
	}
	wg.Wait()
	close(results)
	applied := 0
	for o := range results {
		if o == state.Applied {
			applied++
		} else if o != state.Duplicate {
			t.Errorf("outcome %s, want applied or duplicate", o)
		}
	}
	if applied != 1 {
		t.Fatalf("%d invocations applied the batch, want exactly 1", applied)
	}
	if got := read(t, f).Result.Count; got != 20 {
		t.Fatalf("count %d, want 20", got)
	}
}

func TestShardsAreFencedIndependently(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	for _, shard := range []string{"shard-0", "shard-1", "shard-0", "shard-1"} {
		if _, err := f.views.Apply(ctx, shard, update(entries(1, 5))); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, f).Result.Count; got != 10 {
		t.Fatalf("count %d, want 10 (5 records from each of 2 shards)", got)
	}
}

func TestFinalizeThenLateRecords(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	if _, err := f.views.Apply(ctx, "shard-0", update(entries(1, 4))); err != nil {
		t.Fatal(err)
	}
	refs := dueAt(t, f, minute.End)
	if len(refs) != 1 {
		t.Fatalf("listed windows: %v, want 1", refs)
	}
	if refs2 := dueAt(t, f, minute.End.Add(-time.Millisecond)); len(refs2) != 0 {
		t.Fatalf("a watermark before the end must not find the window: %v", refs2)
	}
	view, already, err := f.views.Finalize(ctx, refs[0])
	if err != nil || already || !view.Final || view.Revision != 1 || view.Result.Count != 4 {
		t.Fatalf("Finalize: %+v already=%v err=%v", view, already, err)
	}
	if _, already, _ := f.views.Finalize(ctx, refs[0]); !already {
		t.Fatal("second Finalize must report already final")
	}
	// Listed until its result is emitted and it is unlisted.
	if listed(t, f) != 1 {
		t.Fatal("final window not listed before Unlist")
	}
	if err := f.views.Unlist(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
	if listed(t, f) != 0 {
		t.Fatal("final window still listed after Unlist")
	}
	// A second finalizer (the ticker racing the handler, or a retry) finds
	// it unlisted: not first, so it does not log the result again.
	if first, err := f.views.UnlistOnce(ctx, refs[0]); err != nil || first {
		t.Fatalf("UnlistOnce of an unlisted window: first=%v %v, want false and no error", first, err)
	}

	// Drop policy: a late record leaves the final window alone.
	res, err := f.views.Apply(ctx, "shard-0", update(entries(5, 5)))
	if err != nil || res.Outcome != state.LateDropped {
		t.Fatalf("late under drop: %+v %v", res, err)
	}
	// Correct policy: applies, bumps the revision, says what it was.
	u := update(entries(6, 7))
	u.CorrectIfFinal = true
	res, err = f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Corrected || res.Revision != 2 {
		t.Fatalf("late under correct: %+v %v", res, err)
	}
	if res.Previous.Count != 4 || res.Current.Count != 6 || res.Current.Max != 7 {
		t.Fatalf("correction previous %+v current %+v, want count 4 then 6 (max 7)", res.Previous, res.Current)
	}
	// The same correction redelivered changes nothing.
	if res, err = f.views.Apply(ctx, "shard-0", u); err != nil || res.Outcome != state.Duplicate {
		t.Fatalf("redelivered correction: %+v %v", res, err)
	}
	v := read(t, f)
	if !v.Final || v.Revision != 2 || v.Result.Count != 6 {
		t.Fatalf("after correction: %+v", v)
	}
}

func TestPerIntervalPartial(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	partial := func(from, to int) *state.Update {
		st := spec.New()
		for i := from; i <= to; i++ {
			st.Add(float64(i), nil)
		}
		return &state.Update{Pipeline: "p", Key: "k", Kind: "tumbling:1m0s", Window: minute, Partial: st,
			MinSeq: strconv.Itoa(from), MaxSeq: strconv.Itoa(to)}
	}
	for i, step := range []struct {
		from, to int
		want     state.Outcome
	}{{1, 50, state.Applied}, {1, 50, state.Duplicate}, {51, 120, state.Applied}} {
		res, err := f.views.Apply(ctx, "shard-0", partial(step.from, step.to))
		if err != nil || res.Outcome != step.want {
			t.Fatalf("step %d: %+v %v, want %s", i, res, err, step.want)
		}
	}
	if _, err := f.views.Apply(ctx, "shard-0", partial(100, 130)); !errors.Is(err, state.ErrPartialOverlap) {
		t.Fatalf("overlapping partial: err %v, want ErrPartialOverlap", err)
	}
	if got := read(t, f).Result.Count; got != 120 {
		t.Fatalf("count %d, want 120", got)
	}
}

func TestCompactionKeepsTheValue(t *testing.T) {
	f := newViews(t, state.WithCompactAt(3))
	ctx := context.Background()
	writes := 0
	for b := 0; b < 10; b++ {
		res, err := f.views.Apply(ctx, "shard-0", update(entries(b*10+1, b*10+10)))
		if err != nil {
			t.Fatal(err)
		}
		writes += res.Writes
	}
	got := read(t, f).Result
	if got.Count != 100 || got.Sum != 5050 || got.Min != 1 || got.Max != 100 {
		t.Fatalf("after compaction: %+v", got)
	}
	if writes <= 10 {
		t.Fatalf("%d writes for 10 batches: compaction never ran", writes)
	}
}

// TestAdvanceWatermarkTakesALaterOne: a shard whose stored watermark is
// later than the one a batch advances to (the ticker's idle advance went
// past it) keeps the stored one, and the batch's watermark takes it, with
// its own max event time where that is later.
func TestAdvanceWatermarkTakesALaterOne(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	ticked := window.NewWatermark(10 * time.Second)
	ticked.Observe(minute.End.Add(5 * time.Minute))
	if err := f.views.AdvanceWatermark(ctx, "p", "shard-0", ticked); err != nil {
		t.Fatal(err)
	}
	batch := window.NewWatermark(10 * time.Second)
	batch.Observe(minute.End)
	if err := f.views.AdvanceWatermark(ctx, "p", "shard-0", batch); err != nil {
		t.Fatal(err)
	}
	if !batch.Current().Equal(ticked.Current()) {
		t.Errorf("the batch's watermark is %v after the refused write; want the stored %v", batch.Current(), ticked.Current())
	}
	got, err := f.views.Watermarks(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if !got["shard-0"].Current().Equal(ticked.Current()) {
		t.Errorf("stored %v, want %v", got["shard-0"].Current(), ticked.Current())
	}
	later := window.NewWatermark(10 * time.Second)
	later.Observe(minute.End.Add(10 * time.Minute))
	if err := f.views.AdvanceWatermark(ctx, "p", "shard-0", later); err != nil {
		t.Fatal(err)
	}
	if got, err = f.views.Watermarks(ctx, "p"); err != nil || !got["shard-0"].Current().Equal(later.Current()) {
		t.Errorf("stored %v (%v), want the later %v", got["shard-0"], err, later.Current())
	}
}

func TestWatermarkNeverGoesBack(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	wm := window.NewWatermark(10 * time.Second)
	wm.Observe(minute.End.Add(time.Minute))
	if ok, err := f.views.SaveWatermark(ctx, "p", "shard-0", wm); err != nil || !ok {
		t.Fatalf("save: %v %v", ok, err)
	}
	older := window.NewWatermark(10 * time.Second)
	older.Observe(minute.End)
	if ok, err := f.views.SaveWatermark(ctx, "p", "shard-0", older); err != nil || ok {
		t.Fatalf("an older watermark was stored: %v %v", ok, err)
	}
	got, err := f.views.Watermarks(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if !got["shard-0"].Current().Equal(wm.Current()) {
		t.Fatalf("stored %v, want %v", got["shard-0"].Current(), wm.Current())
	}
}

// TestBigSketchesCompactBySize: every batch of a window with a large
// distinct sketch and wide-range quantiles adds a part of about 60 KB; the
// item is compacted by size, so no write ever exceeds the item limit (16
// parts of that size would be almost 1 MB).
func TestBigSketchesCompactBySize(t *testing.T) {
	big, err := agg.NewSpec([]string{"count", "distinct", "quantiles"}, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	big.DistinctPrecision = 16 // the largest the pipeline config allows with quantiles
	mu.Lock()
	tables++
	name := "views-" + strconv.Itoa(tables)
	mu.Unlock()
	if err := state.CreateTable(context.Background(), shared, name); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(shared, name, big)
	seq, total := 0, uint64(0)
	for b := 0; b < 8; b++ {
		var es []state.Entry
		v := 1e-200
		for i := 0; i < 40000; i++ {
			seq++
			if v *= 1.02; v > 1<<53 {
				v = 1e-200
			}
			es = append(es, state.Entry{Seq: strconv.Itoa(seq), Value: v, Distinct: []byte(fmt.Sprint("u", b, "-", i))})
		}
		res, err := views.Apply(context.Background(), "shard-0", &state.Update{Pipeline: "p", Key: "k", Kind: "tumbling:1m0s", Window: minute, OpenIn: "p#shard-0", Entries: es})
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		total += uint64(len(es))
		if res.Outcome != state.Applied {
			t.Fatalf("batch %d: %v", b, res.Outcome)
		}
	}
	vs, err := views.Query(context.Background(), "p", "k", "tumbling:1m0s", minute.Start, minute.End)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Result.Count != total {
		t.Fatalf("windows %+v, want one holding %d", vs, total)
	}
}

// TestCommitWatermarkKeepsTheLaterPosition: the position a function
// commits with its watermark (the last record it processed) never moves
// back, and neither does the watermark, whichever of the two a write finds
// later stored: a duplicate invocation of an earlier batch that commits
// last must not make the ticker think the shard's later records unread,
// nor hide them.
func TestCommitWatermarkKeepsTheLaterPosition(t *testing.T) {
	at := func(d time.Duration) *window.Watermark {
		wm := window.NewWatermark(10 * time.Second)
		wm.Observe(minute.End.Add(d))
		return wm
	}
	type commit struct {
		wm  *window.Watermark
		seq string
	}
	for _, tt := range []struct {
		name    string
		commits []commit
		wantSeq string
		wantWM  time.Duration
	}{
		{"in order", []commit{{at(0), "9"}, {at(time.Minute), "10"}}, "10", time.Minute},
		{"an earlier batch commits last", []commit{{at(time.Minute), "10"}, {at(0), "9"}}, "10", time.Minute},
		{"a later position under an earlier watermark", []commit{{at(time.Minute), "10"}, {at(0), "11"}}, "11", time.Minute},
		{"a later watermark under an earlier position", []commit{{at(0), "11"}, {at(time.Minute), "10"}}, "11", time.Minute},
		{"a watermark without a position keeps the position", []commit{{at(0), "9"}, {at(time.Minute), ""}}, "9", time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newViews(t)
			ctx := context.Background()
			for _, c := range tt.commits {
				if err := f.views.CommitWatermark(ctx, "p", "shard-0", c.wm, c.seq); err != nil {
					t.Fatal(err)
				}
			}
			shards, err := f.views.Shards(ctx, "p", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if pos := shards.Positions["shard-0"]; pos != tt.wantSeq {
				t.Errorf("position %q, want %q", pos, tt.wantSeq)
			}
			marks, err := f.views.Watermarks(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if want := at(tt.wantWM).Current(); !marks["shard-0"].Current().Equal(want) {
				t.Errorf("watermark %v, want %v", marks["shard-0"].Current(), want)
			}
		})
	}
}
