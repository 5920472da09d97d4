package aggregate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestLateIsJudgedAgainstTheStoredWatermark: a record that the shard's
// stored watermark makes late is late for the execution environment that
// processed the shard's batches before (warm, its copy of the watermark
// older) as for a new one (cold, which reads it), on both write paths and
// for every window kind: it changes no window, under the correct policy
// either, past its allowed lateness — neither for a key with windows, which
// the store judged by their items before, nor for a key with none yet, nor
// as a correction. Another function stored the later watermark: the
// ticker, advancing the idle shard, or a batch that Lambda ran in another
// environment.
//
// The record is at 10:00:30 (key a sent one at 10:00:05); the stored
// watermark is at 10:03:20, past every window of the record and the
// allowed lateness (60s) after it (outOfOrderness 10s, idleTimeout 30s).
// The results must be those of the same history without the record.
func TestLateIsJudgedAgainstTheStoredWatermark(t *testing.T) {
	windows := []struct{ name, spec string }{
		{"tumbling", `{"kind":"tumbling","size":"1m"}`},
		{"hopping", `{"kind":"hopping","size":"2m","advance":"1m"}`},
		{"sliding", `{"kind":"sliding","difference":"30s"}`},
		{"session", `{"kind":"session","gap":"20s"}`},
	}
	advances := []struct {
		name string
		// advance moves the stored watermark to 10:03:20, by a process
		// other than warm's.
		advance func(r *warmRun)
	}{
		{"the ticker advanced the idle shard", func(r *warmRun) { r.tick(time.Minute); r.tick(4 * time.Minute) }},
		{"a batch ran in another environment", func(r *warmRun) {
			r.feed.p = r.process()
			r.feed.batch(at{"z", 210, 1})
			r.feed.p = r.warm
		}},
	}
	policies := []struct{ name, json string }{
		{"drop", `"latePolicy":"drop"`},
		{"correct", `"latePolicy":"correct","allowedLateness":"60s"`},
	}
	for _, path := range []string{perBatch, perInterval} {
		for _, w := range windows {
			for _, policy := range policies {
				for _, adv := range advances {
					for _, key := range []string{"a", "b"} {
						t.Run(path+"/"+w.name+"/"+policy.name+"/"+adv.name+"/key "+key, func(t *testing.T) {
							lateChangesNothing(t, path, w.spec, policy.json, key, func(r *warmRun, late bool) {
								r.feed.batch(at{"a", 5, 1})
								adv.advance(r)
								if late {
									r.feed.batch(at{key, 30, 2})
								}
							})
						})
					}
				}
			}
		}
	}
}

// TestAnIntervalJudgesAgainstTheStoredWatermarkTheTickerAdvancedDuringIt:
// the watermark carried in Lambda's window state is the interval's records'
// and the one stored when the interval began; the ticker advances the idle
// shard's stored watermark during the interval (as far as the interval's
// hold), and a record that watermark makes late is late, for a cold
// process (which took the carried one alone) as for a warm one.
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
		for _, cold := range []bool{true, false} {
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
