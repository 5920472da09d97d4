package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// shardRecordsPerSecond is what one Kinesis shard accepts.
const shardRecordsPerSecond = 1000

// keepupRun is one measured run of keepup on one path.
type keepupRun struct {
	recordsPerSecond float64
	// waitPerRequest is the time the invocations waited for the store
	// (wall time less CPU time) per request they made.
	waitPerRequest time.Duration
	// earlyFinals is how many times Lambda ended the window early (the
	// state past lambdaMaxWindowState).
	earlyFinals int
}

// keepup measures the records a second one aggregate instance sustains on
// a full shard (1,000 records a second, batches of the mapping's size, over
// keys keys) at the stack's memory, with every store request answering
// after latency, the handler making them at its own concurrency: each
// invocation's duration at the memory is its CPU time over the vCPU share
// plus the time it waited (wall time less CPU time, on one core). batches
// invocations are measured after a warm-up one. On the per-interval path,
// the interval of flush holds flush × 1,000 / batchSize invocations that
// carry the state and a final one that flushes: every one of them is
// measured (batches is raised to a whole interval), because they are not
// alike — the first meet keys new to the container and read their state,
// later ones carry a larger state and spill it — and the interval is
// priced from them.
func keepup(ctx context.Context, cfg *pipeline.Config, st stack, path string, keys, batches int, flush, latency time.Duration, sdk sdkcost.CPU) (keepupRun, error) {
	one := st
	one.shards = 1
	if path == pathInterval {
		batches = max(batches, int(flush.Seconds())*shardRecordsPerSecond/st.batchSize)
	}
	start := time.Now().UTC().Truncate(time.Hour)
	span := time.Duration(batches+1) * time.Duration(st.batchSize) * time.Second / shardRecordsPerSecond
	evs := generate(shardRecordsPerSecond, keys, span, start, 1)
	var win time.Duration
	if path == pathInterval {
		win = 24 * time.Hour // one interval holds every measured batch; its final invocation follows
	}
	invs := cut(evs, one, win, start, start) // no ticks
	db := memdb.New(map[string]memdb.Schema{deployed.ViewsTable: memdb.ViewsTable, deployed.QuarantineTable: memdb.QuarantineTable})
	if err := deployed.SettleLayout(ctx, db, cfg, start); err != nil {
		return keepupRun{}, err
	}
	s := newStore(db)
	s.latency = latency
	now := start
	agg := deployed.New(cfg, s, &deployed.Putter{}, deployed.Function{Name: "aggregate", Now: func() time.Time { return now }})
	seq := make([]int, 1)
	var state map[string]string
	var carriedDur, finalDur, waited time.Duration
	var carried, records, requests int
	share := st.vcpu()
	run := keepupRun{}
	for i := 0; i < len(invs); i++ { // an early final invocation may be added after invs[i]
		inv := &invs[i]
		now = inv.at
		raw := inv.payload(seq, state)
		s.take()
		c0, w0 := cpuTime(), time.Now()
		answer, err := agg.Invoke(ctx, raw)
		wall, cpu := time.Since(w0), cpuTime()-c0
		u := s.take()
		// The store's own work (memdb, the billing) is DynamoDB's, done
		// while the handler waits: it is not the handler's CPU time.
		handlerCPU := max(0, cpu-u.Busy) + sdk.Of(u.Requests)
		if err != nil {
			return keepupRun{}, fmt.Errorf("keepup %s: %w", path, err)
		}
		var r response
		if err := json.Unmarshal(answer, &r); err != nil {
			return keepupRun{}, fmt.Errorf("keepup %s: the answer %.200q: %w", path, answer, err)
		}
		if len(r.BatchItemFailures) > 0 {
			return keepupRun{}, fmt.Errorf("keepup %s: %d records failed", path, len(r.BatchItemFailures))
		}
		state = r.State
		if early := inv.endsEarly(r.State); early != nil {
			run.earlyFinals++
			invs = slices.Insert(invs, i+1, *early)
		}
		if inv.final {
			state = nil
		}
		if i == 0 {
			continue // the warm-up: the cold start's reads
		}
		wait := max(0, wall-cpu)
		d := time.Duration(float64(handlerCPU)/share) + wait
		waited += wait
		requests += u.TotalRequests()
		if inv.final {
			finalDur += d
			continue
		}
		carriedDur += d
		carried++
		records += len(inv.events)
	}
	if carried == 0 {
		return keepupRun{}, fmt.Errorf("keepup %s: no invocation measured", path)
	}
	if requests > 0 {
		run.waitPerRequest = waited / time.Duration(requests)
	}
	if path == pathInterval {
		// A full interval: flush's records in carried invocations like the
		// measured ones, and one final flush.
		perInterval := int(flush.Seconds()) * shardRecordsPerSecond
		n := float64(perInterval) / float64(st.batchSize)
		run.recordsPerSecond = float64(perInterval) / (n*carriedDur.Seconds()/float64(carried) + finalDur.Seconds())
		return run, nil
	}
	run.recordsPerSecond = float64(records) / carriedDur.Seconds()
	return run, nil
}
