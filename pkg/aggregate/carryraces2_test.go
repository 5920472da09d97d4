package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// The mapping moves to the per-batch path (flushIntervalSeconds 0) with
// the pipeline file unchanged (partitionKeyIsGroupingKey still true): the
// carry the per-interval flushes left is written out before the batches
// write the same windows.
func TestAMappingMovedToPerBatchWritesTheCarryOut(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	p, out := carriedAt(t, "hb", &clock)
	r := &feed{t: t, p: p, base: base, clock: &clock}
	r.carry(at{"a", 10, 1}, at{"a", 20, 2})
	r.flush() // all carried
	// Same file, the mapping now per-batch (same function code).
	r2 := &feed{t: t, p: p, base: base, seq: r.seq, path: perBatch, clock: &clock}
	r2.batch(at{"a", 40, 4})
	r2.batch(at{"z", 1000, 1})
	r2.tick(1100 * time.Second)
	r2.tick(1200 * time.Second)
	got := strings.Join(out.of("a", base), "\n")
	if !strings.Contains(got, "final [0s,1m0s) r1 count 3 sum 7") {
		t.Errorf("key a's results after the mapping moved to per-batch:\n%s\nwant [0s,1m) with its three records", got)
	}
}

// A flush whose carry passes carryBytes writes the last keys' windows open
// (fitCarry). When its carry write then loses to the ticker (which closed
// another window meanwhile), its next attempt writes the same keys open
// again rather than carry what is written, though its carry would fit now
// (kept, the window's later write overlapped its fence and every flush
// failed).
func TestASpillRetriedAfterTheTickerLeavesNoShardStuck(t *testing.T) {
	for _, race := range []bool{false, true} {
		t.Run(fmt.Sprintf("ticker races the flush=%t", race), func(t *testing.T) {
			const limit = 64 // a's carried window fits, a's and i's (one chunk: carryChunk) do not
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			clock := base
			p, out, faults := faultyCarry(t, "hs", &clock, aggregate.WithCarryBytes(limit))
			ctx := context.Background()
			r := &feed{t: t, p: p, base: base}
			clock = base.Add(10 * time.Second)
			r.carry(at{"a", 10, 1})
			r.flush() // wm 5 s: a's [0s,1m) carried
			clock = base.Add(62 * time.Second)
			r.carry(at{"i", 62, 100}) // hold at 60 s, wm 57 s
			clock = base.Add(70 * time.Second)
			if _, err := p.Tick(ctx, clock); err != nil {
				t.Fatal(err)
			}
			done := false
			faults.hook = func(*dynamodb.UpdateItemInput) {
				if done || !race {
					return
				}
				done = true
				clock = base.Add(200 * time.Second)
				_, err := p.Tick(ctx, clock) // closes a's [0s,1m) from the carry
				t.Logf("the tick during the flush: %v", err)
			}
			r.flush()
			faults.hook = nil
			clock = base.Add(210 * time.Second)
			r.carry(at{"i", 70, 200})
			r.flush()
			r.carry(at{"z", 1000, 1})
			var err error
			for range 3 { // Lambda retries the final invocation
				if err = finalInvoke(p, r); err == nil {
					break
				}
				t.Logf("the last final invocation: %v", err)
			}
			if err != nil {
				t.Fatalf("the shard's flush fails at every retry: %v", err)
			}
			got := strings.Join(out.of("i", base), "\n")
			if !strings.Contains(got, "final [1m0s,2m0s) r1 count 2 sum 300") {
				t.Errorf("key i's results:\n%s\nwant [1m,2m) with both records", got)
			}
		})
	}
}

// During a deploy that drops partitionKeyIsGroupingKey the new ticker
// (keeping no carry) writes a shard's carry out while the old function's
// flush still carries. The spill stores the carry with its partials as
// spilling before it writes them, so the flush fails its own store, reads
// the carry again, writes the spilling partials first and carries only
// its new records (when the spill wrote first, it then wrote a partial
// overlapping the fence its first try left, and every flush failed).
func TestALeftCarrySpillRacingACarryingFlushLeavesNoShardStuck(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	faults := &carryFaults{Client: db}
	var table string
	pOld, _ := pipelineOn(t, tumblingCarryConfig("hd"), func(cfg *pipeline.Config, tbl string) *state.Views {
		table = tbl
		return state.NewViews(faults, tbl, cfg.Aggregates, state.WithClock(now))
	}, aggregate.WithClock(now))
	cfg, err := pipeline.Parse([]byte(strings.Replace(tumblingCarryConfig("hd"), `"partitionKeyIsGroupingKey":true`, `"partitionKeyIsGroupingKey":false`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	out := &outputLog{}
	pNew := aggregate.New(cfg, state.NewViews(faults, table, cfg.Aggregates, state.WithClock(now)), out, "results", aggregate.WithLogger(quiet), aggregate.WithClock(now))
	ctx := context.Background()
	old := &feed{t: t, p: pOld, base: base}
	clock = base.Add(10 * time.Second)
	old.carry(at{"a", 10, 1})
	old.flush() // wm 5 s: a's [0s,1m) carried
	done := false
	faults.hook = func(*dynamodb.UpdateItemInput) {
		if done {
			return
		}
		done = true
		// The old function's next interval, flushed while the new
		// ticker's spill is between its window writes and its carry write.
		clock = base.Add(32 * time.Second)
		old.carry(at{"a", 30, 2})
		old.flush() // wm 25 s: [0s,1m) still carried, now with both records
	}
	clock = base.Add(40 * time.Second)
	_, err = pNew.Tick(ctx, clock) // the new ticker: spillLeftCarry
	t.Logf("the new ticker: %v", err)
	faults.hook = nil
	// The deploy is over: the new function has the shard.
	r := &feed{t: t, p: pNew, base: base, seq: old.seq}
	clock = base.Add(45 * time.Second)
	r.carry(at{"a", 44, 4})
	for range 3 {
		if err = finalInvoke(pNew, r); err == nil {
			break
		}
		t.Logf("the new function's flush: %v", err)
	}
	if err != nil {
		t.Fatalf("the shard's flush fails at every retry: %v", err)
	}
	r.state = nil
	r.carry(at{"z", 1000, 1})
	if err := finalInvoke(pNew, r); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(out.of("a", base), "\n")
	if !strings.Contains(got, "final [0s,1m0s) r1 count 3 sum 7") {
		t.Errorf("key a's results:\n%s\nwant [0s,1m) with its three records", got)
	}
}

// The ticker stores the windows it closes (each a window's partial, where
// the carry holds one per key and pane) beside the rest of the carry, so
// that store can pass carryBytes though the carry fit: it writes the
// carry's chunk out instead (spillChunk) and the windows close from their
// listings. Whatever the limit, no tick fails and no record is lost.
func TestATickerClosingMoreThanACarryHoldsWritesItOut(t *testing.T) {
	keys := []string{"a", "i", "y", "user-1"} // one chunk (carryChunk)
	for limit := 64; limit <= 400; limit += 24 {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			clock := base
			now := func() time.Time { return clock }
			p, out := pipelineOn(t, carryConfig(fmt.Sprintf("tc%d", limit), true), viewsAt(now), aggregate.WithClock(now), aggregate.WithCarryBytes(limit))
			r := &feed{t: t, p: p, base: base, clock: &clock}
			var recs []at
			for i, k := range keys {
				recs = append(recs, at{k, float64(10 + i), i + 1})
			}
			r.carry(recs...)
			r.flush() // wm 8 s: everything carried
			r.tick(60 * time.Second)
			if _, err := p.Tick(context.Background(), base.Add(100*time.Second)); err != nil {
				t.Fatalf("the tick that closes [0s,1m): %v", err)
			}
			r.tick(400 * time.Second)
			for i, k := range keys {
				got := strings.Join(out.of(k, base), "\n")
				for _, w := range []string{"[0s,1m0s)", "[-2m0s,1m0s)", "[0s,3m0s)"} {
					if want := fmt.Sprintf("final %s r1 count 1 sum %d", w, i+1); !strings.Contains(got, want) {
						t.Errorf("key %s: no %q in\n%s", k, want, got)
					}
				}
			}
		})
	}
}
