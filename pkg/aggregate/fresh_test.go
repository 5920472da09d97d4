package aggregate_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// freshFeed is carryConfig's pipeline whose processing time is the feed's
// clock, counting its window writes and keeping its log; with switchTo, a
// second processor on its table, output and log, the pipeline as carried
// is (a deploy that turns the carry on).
func freshFeed(t *testing.T, name string, carried bool) (f *feed, ww *windowWrites, out *outputLog, logs *lockedBuffer, switchTo *aggregate.Processor) {
	t.Helper()
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	ww, logs = &windowWrites{Client: db}, &lockedBuffer{}
	var views *state.Views
	opts := []aggregate.Option{aggregate.WithClock(now), aggregate.WithLogger(slog.New(slog.NewJSONHandler(logs, nil)))}
	p, pout := pipelineOn(t, carryConfig(name, carried), func(cfg *pipeline.Config, table string) *state.Views {
		views = state.NewViews(ww, table, cfg.Aggregates, state.WithClock(now))
		return views
	}, opts...)
	cfg, err := pipeline.Parse([]byte(carryConfig(name, true)))
	if err != nil {
		t.Fatal(err)
	}
	return &feed{t: t, p: p, base: base, clock: &clock}, ww, pout, logs, aggregate.New(cfg, views, pout, "results", opts...)
}

// minute sends minute m's records of keys a and b as one interval.
func (f *feed) minute(m int) {
	s := float64(m * 60)
	f.carry(at{"a", s + 10, 2*m + 1}, at{"b", s + 25, 1}, at{"a", s + 40, 2*m + 2}, at{"b", s + 50, 1})
}

// resultLinesOf counts the result log lines of key's windows of kind by
// their start, as "<kind> <start from base>".
func resultLinesOf(t *testing.T, logs *lockedBuffer, key string, base time.Time) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, l := range logs.resultLines(t) {
		if l["key"] != key {
			continue
		}
		start, err := time.Parse(state.TimeLayout, fmt.Sprint(l["start"]))
		if err != nil {
			t.Fatalf("result line start %v: %v", l["start"], err)
		}
		n[fmt.Sprintf("%s %s %v", l["resultType"], l["window"], start.Sub(base))]++
	}
	return n
}

// A window the shard's carry held until it closed has every record in the
// write that closes it and no item before: that write creates it already
// marked published, one write where there were two (written, then marked
// once on the stream). Its result is the one the pipeline without a carry
// gives, on the stream once and logged once; the first windows after the
// shard's first carry, which a flush before it may have written, close
// the usual way.
func TestAWindowTheCarryHeldToItsCloseIsOneWrite(t *testing.T) {
	const (
		notCarried = "not carried"
		carried    = "carried"
		switched   = "carried from 3m" // on a shard whose flushes wrote windows open before
	)
	results := map[string]string{}
	for _, mode := range []string{notCarried, carried, switched} {
		t.Run(mode, func(t *testing.T) {
			name := map[string]string{notCarried: "fwn", carried: "fwc", switched: "fws"}[mode]
			f, ww, out, logs, carrying := freshFeed(t, name, mode == carried)
			for m := range 10 {
				if mode == switched && m == 3 {
					f.p = carrying
				}
				f.minute(m)
				f.flush()
			}
			f.carry(at{"z", 2000, 1}) // closes every window of a and b
			f.flush()
			for _, k := range []string{"a", "b"} {
				results[mode] += strings.Join(out.of(k, f.base), "\n") + "\n"
			}
			if mode == notCarried {
				return
			}
			// Every window a new shard's carry holds to its close is
			// fresh; after a switch, those a flush before it may have
			// written are not (the first carry's bound: its watermark,
			// 3m45s, plus the longest window and the allowance: 6m50s).
			fromMinute := map[string]int{carried: 0, switched: 6}[mode]
			for m := fromMinute; m < 10; m++ {
				start := f.base.Add(time.Duration(m) * time.Minute)
				for _, kind := range []string{"tumbling:1m0s", "hopping:3m0s:1m0s"} {
					// Written in the page of a's bucket, which holds b's
					// too when it is b's: one write either way.
					if n := writesTo(ww, name+"#a", kind, start) + pageWritesTo(ww, name, "a", kind, start); n != 1 {
						t.Errorf("writes to key a's %s window at %dm, its item's and its result page's: %d, want 1", kind, m, n)
					}
				}
			}
			lines := resultLinesOf(t, logs, "a", f.base)
			for m := range 10 {
				for _, w := range []string{"tumbling:1m0s", "hopping:3m0s:1m0s"} {
					if n := lines[fmt.Sprintf("final %s %v", w, time.Duration(m)*time.Minute)]; n != 1 {
						t.Errorf("%d result lines of key a's final %s window at %dm, want 1: %v", n, w, m, lines)
					}
				}
			}
		})
	}
	for _, mode := range []string{carried, switched} {
		if results[mode] != results[notCarried] {
			t.Errorf("results %s:\n%s\nnot carried:\n%s", mode, results[mode], results[notCarried])
		}
	}
	if want := "final [9m0s,10m0s) r1 count 2 sum 39"; !strings.Contains(results[carried], want) {
		t.Errorf("results have no %q:\n%s", want, results[carried])
	}
}

// The write that creates a fresh window marks it published before its
// result goes on the stream: a flush or tick whose send fails fails, and
// the one after it (Lambda sending the final invocation again, the next
// tick) meets the window created and sends its result again, under the
// same id; its line is logged once, by the write that created it.
func TestAFreshResultTheStreamRefusedIsSentByTheRetry(t *testing.T) {
	for _, tt := range []struct {
		name  string
		close func(f *feed, out *outputLog) // refuses one send, then closes [7m,8m) again
	}{
		{"the final invocation sent again", func(f *feed, out *outputLog) {
			f.minute(8) // the watermark passes 8m
			st := f.state
			out.refuse = 1
			ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: f.shardID(), State: st, IsFinalInvokeForWindow: true}}
			if _, err := f.p.HandleInterval(context.Background(), ev); err == nil {
				f.t.Fatal("the flush succeeded with its send refused")
			}
			f.flush()
		}},
		{"the next tick", func(f *feed, out *outputLog) {
			f.tick(8*time.Minute + 10*time.Second) // idle for 30 s from here
			out.refuse = 1
			if _, err := f.p.Tick(context.Background(), f.base.Add(9*time.Minute)); err == nil {
				f.t.Fatal("the tick succeeded with its send refused")
			}
			f.tick(9*time.Minute + 10*time.Second)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _, out, logs, _ := freshFeed(t, "fr", true)
			for m := range 8 {
				f.minute(m)
				f.flush()
			}
			if got := strings.Join(out.of("a", f.base), "\n"); strings.Contains(got, "[7m0s,8m0s)") {
				t.Fatalf("[7m,8m) published before it closed:\n%s", got)
			}
			tt.close(f, out)
			got := strings.Join(out.of("a", f.base), "\n")
			if want := "final [7m0s,8m0s) r1 count 2 sum 31"; !strings.Contains(got, want) {
				t.Errorf("results of key a:\n%s\nwant %q", got, want)
			}
			if n := resultLinesOf(t, logs, "a", f.base)["final tumbling:1m0s 7m0s"]; n != 1 {
				t.Errorf("%d result lines of [7m,8m), want 1", n)
			}
		})
	}
}

// On a version of the views table a replay filled, a publisher asks the
// version before it what it published (handover.go): a window the carry
// held closes there as any window does, so the result the previous
// version published is marked, not sent again.
func TestAVersionHandedOverCreatesNoFreshWindow(t *testing.T) {
	ctx := context.Background()
	old, out, table := carriedOn(t, "fh")
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	play := func(p *aggregate.Processor) {
		f := &feed{t: t, p: p, base: base}
		for m := range 4 {
			f.minute(m)
			f.flush()
		}
	}
	play(old)
	id := "fh/a/tumbling:1m0s/2026-11-29T10:01:00.000Z/2026-11-29T10:02:00.000Z/r1"
	if out.copies[id] != 1 {
		t.Fatalf("the previous version put %s %d times, want once", id, out.copies[id])
	}
	next := table + "-v2"
	if err := state.CreateTable(ctx, db, next); err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.Parse([]byte(carryConfig("fh", true)))
	if err != nil {
		t.Fatal(err)
	}
	if err := state.NewViews(db, next, cfg.Aggregates).SetHandover(ctx, table, time.Now()); err != nil {
		t.Fatal(err)
	}
	live := aggregate.New(cfg, state.NewViews(db, next, cfg.Aggregates), out, "results", aggregate.WithLogger(quiet),
		aggregate.WithHandover(db, aggregate.FixedViewsTable(next).Current))
	play(live)
	if out.copies[id] != 1 {
		t.Errorf("%s is on the stream %d times, want once: the new version sent what the previous one published", id, out.copies[id])
	}
}

// A fresh window's item is created final, unlisted and marked published
// before its result is sent. When the send fails, the final invocation
// fails and its records come again; when they come to code that no longer
// keeps the carry (partitionKeyIsGroupingKey dropped: spillLeftCarry; the
// mapping moved to per-batch: spillOnce), the spill and the writes meet
// the window final and published, and hand it back to be sent (the item
// says it was created fresh): nothing lists it, and without that its
// result never reached the stream, though its line was logged.
func TestAFreshResultIsSentWhenTheCarryIsOffAtTheRetry(t *testing.T) {
	for _, change := range []string{"partitionKeyIsGroupingKey dropped", "mapping moved to per-batch"} {
		t.Run(change, func(t *testing.T) {
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			clock := base
			now := func() time.Time { return clock }
			var table string
			p, out := pipelineOn(t, carryConfig("fo", true), func(cfg *pipeline.Config, tbl string) *state.Views {
				table = tbl
				return state.NewViews(db, tbl, cfg.Aggregates, state.WithClock(now))
			}, aggregate.WithClock(now))
			f := &feed{t: t, p: p, base: base, clock: &clock}
			for m := range 4 {
				f.minute(m)
				f.flush()
			}
			// Minute 4's flush commits 4m45s: [3m,4m) closes, fresh (past
			// the first carry's itemsBy, 3m10s). Its send is refused.
			seq := f.seq
			f.minute(4)
			out.refuse = 1
			if err := finalInvoke(p, f); err == nil {
				t.Fatal("the flush succeeded with its send refused")
			}
			minute4 := []at{{"a", 250, 9}, {"b", 265, 1}, {"a", 280, 10}, {"b", 290, 1}} // f.minute(4)'s records
			switch change {
			case "partitionKeyIsGroupingKey dropped":
				// Lambda sends the final invocation again, to the new code.
				cfg, err := pipeline.Parse([]byte(carryConfig("fo", false)))
				if err != nil {
					t.Fatal(err)
				}
				p2 := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates, state.WithClock(now)), out, "results",
					aggregate.WithLogger(quiet), aggregate.WithClock(now))
				if err := finalInvoke(p2, f); err != nil {
					t.Fatalf("the final invocation sent again: %v", err)
				}
				f.p, f.state = p2, nil
				f.carry(at{"z", 2000, 1})
				f.flush()
			case "mapping moved to per-batch":
				// The same records again, as batches from the checkpoint.
				r := &feed{t: t, p: p, base: base, seq: seq, path: perBatch, clock: &clock}
				r.batch(minute4...)
				r.batch(at{"z", 2000, 1})
				r.tick(2100 * time.Second)
			}
			got := strings.Join(out.of("a", base), "\n")
			for _, want := range []string{
				"final [2m0s,3m0s) r1 count 2 sum 11", // closed before, the usual way
				"final [3m0s,4m0s) r1 count 2 sum 15", // the fresh window
				"final [1m0s,4m0s) r1 count 6 sum 33", // fresh too (hopping)
			} {
				if !strings.Contains(got, want) {
					t.Errorf("key a's results:\n%s\nwant %q", got, want)
				}
			}
		})
	}
}

// A window whose records all came in one interval closes fresh at that
// interval's flush. When the output stream refuses the send for longer
// than a hold lasts (holdFor, 30 minutes; no WithBacklog), the ticker
// advances the idle shard past the window and closes what the carry holds.
// The final invocation, sent again once the stream is back, then finds the
// window closed by the carry (ending by its closed) and writes it as a
// late partial, not fresh: it meets the item with its records applied and
// sends it again, as nothing else would (the window is not listed).
func TestAFreshResultIsSentAfterAnOutageLongerThanTheHold(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	p, out := carriedAt(t, "fho", &clock)
	f := &feed{t: t, p: p, base: base, clock: &clock}
	for m := range 4 {
		f.minute(m)
		f.flush()
	}
	// One interval: minute 4 and a record at 5m10s; its flush commits
	// 5m05s and closes [4m,5m), every record of it in the interval.
	f.minute(4)
	f.carry(at{"a", 310, 1})
	out.refuse = 1 << 20 // the output stream is down
	if err := finalInvoke(p, f); err == nil {
		t.Fatal("the flush succeeded with the output stream down")
	}
	// 40 minutes later the hold has expired: the ticker advances the idle
	// shard and closes the carried windows (their sends fail too).
	advanced, refused := 0, 0
	for _, m := range []time.Duration{40, 41, 45} {
		clock = base.Add(m * time.Minute)
		res, err := p.Tick(context.Background(), clock)
		advanced += res.Advanced
		if err != nil {
			refused++
		}
	}
	if advanced == 0 || refused == 0 {
		t.Fatalf("ticks during the outage: %d advanced, %d refused; want the shard advanced and its sends refused", advanced, refused)
	}
	out.refuse = 0 // the stream is back
	if err := finalInvoke(p, f); err != nil {
		t.Fatalf("the final invocation sent again: %v", err)
	}
	f.state = nil
	for _, at := range []time.Duration{46 * time.Minute, 50 * time.Minute} {
		f.tick(at)
	}
	got := strings.Join(out.of("a", base), "\n")
	if want := "final [4m0s,5m0s) r1 count 2 sum 19"; !strings.Contains(got, want) {
		t.Errorf("key a's results:\n%s\nwant %q", got, want)
	}
}
