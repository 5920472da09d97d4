package aggregate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestLateIsJudgedAgainstTheStoredWatermark: a record that arrives after
// the ticker advanced an idle shard's watermark is judged against that
// watermark by the execution environment that had processed the shard's
// batches before (warm, its copy of the watermark older) as by a new one
// (cold, which reads it): whether a record is late never depends on which
// environment Lambda runs the batch in.
func TestLateIsJudgedAgainstTheStoredWatermark(t *testing.T) {
	for _, w := range []string{`{"kind":"tumbling","size":"1m"}`, `{"kind":"session","gap":"30s"}`} {
		t.Run(w, func(t *testing.T) { lateAgainstStoredWatermark(t, w) })
	}
}

func lateAgainstStoredWatermark(t *testing.T, windowSpec string) {
	config := `{"name":"warm","key":"key","value":"data.ms","windows":[` + windowSpec + `],
	 "aggregates":["count","sum"],"outOfOrderness":"0s","idleTimeout":"30s","partitionKeyIsGroupingKey":true}`
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	run := func(t *testing.T, warm bool) (count uint64, final bool) {
		cfg, err := pipeline.Parse([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		table, quarantine := fmt.Sprintf("warm-%d", tableSeq.Add(1)), fmt.Sprintf("quarantine-%d", tableSeq.Add(1))
		if err := state.CreateTable(ctx, db, table); err != nil {
			t.Fatal(err)
		}
		if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
			t.Fatal(err)
		}
		first := hardenedOn(cfg, db, table, quarantine)
		batch := func(h *hardened, seq int, id string, et time.Time) {
			t.Helper()
			ev := events.KinesisEvent{Records: []events.KinesisEventRecord{rawRecord(seq, "k", view(id, "k", et, `{"ms":5}`), et)}}
			if resp, err := h.proc.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("HandleBatch = %v, %v", resp, err)
			}
		}
		batch(first, 1, "e1", at)
		// The ticker, another function, finds the shard idle and moves its
		// watermark past the window by processing time.
		ticker := hardenedOn(cfg, db, table, quarantine)
		for _, now := range []time.Time{at.Add(5 * time.Minute), at.Add(10 * time.Minute)} {
			if _, err := ticker.proc.Tick(ctx, now); err != nil {
				t.Fatal(err)
			}
		}
		if vs := first.window(t, "k", cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour)); len(vs) != 1 || !vs[0].Final {
			t.Fatalf("after the tick: windows %+v, want one final", vs)
		}
		next := first
		if !warm {
			next = hardenedOn(cfg, db, table, quarantine)
		}
		batch(next, 2, "e2", at.Add(20*time.Second)) // in the closed window
		if _, err := next.proc.Tick(ctx, at.Add(20*time.Minute)); err != nil {
			t.Fatal(err)
		}
		vs := first.window(t, "k", cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour))
		if len(vs) != 1 {
			t.Fatalf("windows %+v, want one", vs)
		}
		return vs[0].Result.Count, vs[0].Final
	}
	warmCount, warmFinal := run(t, true)
	coldCount, coldFinal := run(t, false)
	if warmCount != coldCount || warmFinal != coldFinal {
		t.Fatalf("the window holds %d records (final %v) when a warm environment ran the late batch, %d (final %v) when a cold one did", warmCount, warmFinal, coldCount, coldFinal)
	}
	if coldCount != 1 {
		t.Errorf("the window holds %d records; want e1 alone, e2 late", coldCount)
	}
}

// TestAnIntervalJudgesAgainstTheStoredWatermarkTheTickerAdvancedDuringIt:
// the watermark carried in Lambda's window state is the interval's records'
// and the one stored when the interval began; the ticker advances the idle
// shard's stored watermark during the interval (as far as the interval's
// hold), and a record that watermark makes late is late, also for a cold
// process, which took the carried one alone.
//
// The interval's first invocation carries a record of 10:00:06 to the
// flush, the ticker advances the idle shard (its stored watermark at
// 09:59:55 since the last flush) as far as the hold, the earliest window
// the carried record is in (tumbling: 10:00:00) or its time (sliding,
// session: 10:00:06), and the next invocation brings a record of a new key
// that the carried watermark (09:59:56) takes as on time and the stored one
// makes late. (A hopping record's hold is before the stored watermark: the
// ticker does not move it.)
func TestAnIntervalJudgesAgainstTheStoredWatermarkTheTickerAdvancedDuringIt(t *testing.T) {
	for _, tt := range []struct {
		name, window string
		late         float64 // the record's time, in seconds after 10:00
	}{
		{"tumbling", `{"kind":"tumbling","size":"1m"}`, -30},
		{"sliding", `{"kind":"sliding","difference":"30s"}`, 0},
		{"session", `{"kind":"session","gap":"20s"}`, -20},
	} {
		for _, cold := range []bool{true} {
			t.Run(fmt.Sprintf("%s/cold=%t", tt.name, cold), func(t *testing.T) {
				lateChangesNothing(t, perInterval, tt.window, `"latePolicy":"drop"`, "b", func(r *warmRun, late bool) {
					r.feed.batch(at{"a", 5, 1})
					r.feed.carry(at{"a", 6, 1})
					r.tick(time.Minute)
					r.tick(4 * time.Minute)
					if late {
						if cold {
							r.feed.p = r.process()
						}
						r.feed.carry(at{"b", tt.late, 2})
					}
					r.feed.flush()
				})
			})
		}
	}
}

// lateChangesNothing runs history with and without its late record on a
// pipeline of window and policy, then closes every window, and compares
// key's results.
func lateChangesNothing(t *testing.T, path, window, policy, key string, history func(r *warmRun, late bool)) {
	t.Helper()
	config := `{"name":"warm","key":"key","value":"data.v","windows":[` + window + `],"aggregates":["count","sum"],
	  "outOfOrderness":"10s","idleTimeout":"30s",` + policy + `,"partitionKeyIsGroupingKey":true}`
	results := func(late bool) []string {
		r := newWarmRun(t, config, path)
		history(r, late)
		r.tick(time.Hour)
		r.tick(time.Hour + time.Minute)
		return r.out.of(key, r.feed.base)
	}
	without, with := results(false), results(true)
	if !slices.Equal(with, without) {
		t.Errorf("results of key %s with the late record:\n%s\nwithout it (the stored watermark makes it late):\n%s",
			key, strings.Join(with, "\n"), strings.Join(without, "\n"))
	}
}

// warmRun is one shard's history played into a warm process, with the
// ticker and other execution environments of the aggregate function over
// the same table and output stream, at a processing time that follows the
// records and the ticks.
type warmRun struct {
	t       *testing.T
	cfg     *pipeline.Config
	store   *memdb.DB
	out     *outputLog
	now     time.Time
	warm    *aggregate.Processor
	ticker  *aggregate.Processor
	feed    *feed
	process func() *aggregate.Processor // a new execution environment
}

func newWarmRun(t *testing.T, config, path string) *warmRun {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	r := &warmRun{t: t, cfg: cfg, store: memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), out: &outputLog{}}
	clock := func() time.Time { return r.now }
	r.process = func() *aggregate.Processor {
		views := state.NewViews(r.store, "views", cfg.Aggregates, state.WithClock(clock))
		return aggregate.New(cfg, views, r.out, "results", aggregate.WithLogger(quiet), aggregate.WithClock(clock))
	}
	r.warm, r.ticker = r.process(), r.process()
	r.feed = &feed{t: t, p: r.warm, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), path: path}
	return r
}

// tick runs the ticker at processing time base + after.
func (r *warmRun) tick(after time.Duration) {
	r.t.Helper()
	r.now = r.feed.base.Add(after)
	if _, err := r.ticker.Tick(context.Background(), r.now); err != nil {
		r.t.Fatal(err)
	}
}
