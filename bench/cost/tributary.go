package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// benchPipeline is the same computation the Powertools peer does: a count
// per key per event-time minute. %s is the dedupe horizon ("0s": off).
const benchPipeline = `{"name":"bench","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count"],"outOfOrderness":"5s","idleTimeout":"30s","partitionKeyIsGroupingKey":true,"dedupeHorizon":%q}`

var tableSeq atomic.Int64

// tributaryRun is one prepared run of Tributary's handler: a fresh table,
// the processor, the records. process is what is measured; check verifies
// the views afterwards, outside the measured span.
type tributaryRun struct {
	cfg     *pipeline.Config
	views   *state.Views
	proc    *aggregate.Processor
	records []events.KinesisEventRecord
}

// prepareTributary creates a table and a processor for evs with suppression
// by event id on or off.
func prepareTributary(ctx context.Context, db *dynamodb.Client, evs []stream.Envelope, suppress bool) (*tributaryRun, error) {
	horizon := "0s"
	if suppress {
		horizon = "1h"
	}
	cfg, err := pipeline.Parse([]byte(fmt.Sprintf(benchPipeline, horizon)))
	if err != nil {
		return nil, err
	}
	table := fmt.Sprintf("tributary-bench-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		return nil, err
	}
	views := state.NewViews(db, table, cfg.Aggregates)
	ledger := aggregate.NewLedger(db, table, cfg)
	if ledger != nil {
		// The steady state, as bench/load prices it: the pipeline's layout
		// long in place, not the minutes after a deploy (dedupe.WithLayoutMarker).
		if err := ledger.SeedLayout(ctx, time.Now().Add(-3*time.Hour)); err != nil {
			return nil, err
		}
	}
	p := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		aggregate.WithDedupe(ledger))
	return &tributaryRun{cfg: cfg, views: views, proc: p, records: kinesisRecords(evs)}, nil
}

// process delivers the records in batches of batch as one shard's event
// source mapping would, on path:
//
//   - "per-batch": one fenced conditional write per (key, window) per batch;
//   - "per-interval": Lambda's tumbling-window state as the accumulator
//     (one flush interval covering the run, as TumblingWindowInSeconds would
//     for a run shorter than it), flushed once: one write per (key, window);
//
// then closes every window as the deployed ticker does (a tick, and one
// more after the idle timeout), so the writes that finalize them count too.
func (r *tributaryRun) process(ctx context.Context, batch int, path string) error {
	switch path {
	case "per-batch":
		for start := 0; start < len(r.records); start += batch {
			ev := events.KinesisEvent{Records: r.records[start:min(start+batch, len(r.records))]}
			resp, err := r.proc.HandleBatch(ctx, ev)
			if err != nil {
				return err
			}
			if len(resp.BatchItemFailures) > 0 {
				return fmt.Errorf("tributary per-batch: batch at %d reported failures %v", start, resp.BatchItemFailures)
			}
		}
	case "per-interval":
		st := map[string]string{}
		now := time.Now()
		win := events.TimeWindowProperties{Window: events.Window{Start: events.RFC3339EpochTime{Time: now}, End: events.RFC3339EpochTime{Time: now.Add(time.Minute)}}, ShardID: "shardId-000000000000"}
		for start := 0; start < len(r.records); start += batch {
			ev := events.KinesisTimeWindowEvent{KinesisEvent: events.KinesisEvent{Records: r.records[start:min(start+batch, len(r.records))]}, TimeWindowProperties: win}
			ev.State = st
			resp, err := r.proc.HandleInterval(ctx, ev)
			if err != nil {
				return err
			}
			st = resp.State
		}
		final := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
		final.State, final.IsFinalInvokeForWindow = st, true
		if _, err := r.proc.HandleInterval(ctx, final); err != nil {
			return err
		}
	default:
		return fmt.Errorf("tributary: unknown path %q (per-batch or per-interval)", path)
	}
	// The ticker: the shard is idle after the run; one tick notes it, the
	// next (past the idle timeout) advances the watermark and finalizes.
	tick := workloadWindow.Add(2 * time.Minute)
	for _, at := range []time.Time{tick, tick.Add(r.cfg.IdleTimeout + time.Second)} {
		if _, err := r.proc.Tick(ctx, at); err != nil {
			return fmt.Errorf("tributary: tick at %s: %w", at.Format(time.RFC3339), err)
		}
	}
	return nil
}

// kinesisRecords turns envelopes into one shard's records, as Lambda delivers them.
func kinesisRecords(evs []stream.Envelope) []events.KinesisEventRecord {
	out := make([]events.KinesisEventRecord, 0, len(evs))
	base := "4960000000000000000000000000000000000000000"
	for i := range evs {
		data, _ := json.Marshal(&evs[i])
		s := base + fmt.Sprintf("%013d", i+1)
		out = append(out, events.KinesisEventRecord{
			EventID: "shardId-000000000000:" + s, EventSource: "aws:kinesis",
			Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: evs[i].Key, Data: data,
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: evs[i].ReceivedAt}},
		})
	}
	return out
}

// check verifies that every window is final and holds want.
func (r *tributaryRun) check(ctx context.Context, keys []string, want map[string]int) error {
	got := map[string]int{}
	from, to := time.Unix(0, 0), time.Now().Add(24*time.Hour)
	for _, key := range keys {
		vs, err := r.views.Query(ctx, r.cfg.Name, key, r.cfg.Windows[0].ID(), from, to)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if !v.Final {
				return fmt.Errorf("tributary: window %s|%s is not final after the ticks", key, v.Window.Start.UTC().Format(time.RFC3339))
			}
			got[key+"|"+v.Window.Start.UTC().Format(time.RFC3339)] += int(v.Result.Count)
		}
	}
	return sameCounts("tributary views", got, want)
}
