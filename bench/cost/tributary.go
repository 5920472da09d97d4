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
	"github.com/tributary-dev/tributary/pkg/standin"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// benchPipeline is the same computation the Powertools peer does: a count
// per key per event-time minute.
const benchPipeline = `{"name":"bench","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count"],"outOfOrderness":"5s","partitionKeyIsGroupingKey":true}`

var tableSeq atomic.Int64

// runTributary processes evs with Tributary's exactly-once windowed count
// against the stand-in at endpoint, in batches of batch records delivered
// one after the other as one shard's event source mapping would, in mode:
//
//   - "per-batch": one fenced conditional write per (key, window) per batch;
//   - "per-interval": Lambda's tumbling-window state as the accumulator
//     (one flush interval covering the run, as Lambda's TumblingWindowInSeconds
//     would for a run shorter than it), flushed once: one write per (key, window).
//
// It creates a fresh table and returns an error unless the view holds
// exactly the expected count per (key, window).
func runTributary(ctx context.Context, endpoint string, evs []stream.Envelope, batch int, mode string) error {
	cfg, err := pipeline.Parse([]byte(benchPipeline))
	if err != nil {
		return err
	}
	awsCfg, err := standin.Config(ctx, endpoint)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	table := fmt.Sprintf("tributary-bench-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		return err
	}
	views := state.NewViews(db, table, cfg.Aggregates)
	p := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	records := kinesisRecords(evs)

	switch mode {
	case "per-batch":
		for start := 0; start < len(records); start += batch {
			ev := events.KinesisEvent{Records: records[start:min(start+batch, len(records))]}
			resp, err := p.HandleBatch(ctx, ev)
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
		for start := 0; start < len(records); start += batch {
			ev := events.KinesisTimeWindowEvent{KinesisEvent: events.KinesisEvent{Records: records[start:min(start+batch, len(records))]}, TimeWindowProperties: win}
			ev.State = st
			resp, err := p.HandleInterval(ctx, ev)
			if err != nil {
				return err
			}
			st = resp.State
		}
		final := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
		final.State, final.IsFinalInvokeForWindow = st, true
		if _, err := p.HandleInterval(ctx, final); err != nil {
			return err
		}
	default:
		return fmt.Errorf("tributary: unknown mode %q (per-batch or per-interval)", mode)
	}
	return checkTributary(ctx, views, cfg, evs)
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
			Kinesis: events.KinesisRecord{SequenceNumber: s, PartitionKey: evs[i].Key, Data: data},
		})
	}
	return out
}

func checkTributary(ctx context.Context, views *state.Views, cfg *pipeline.Config, evs []stream.Envelope) error {
	want := expectedCounts(evs)
	keys := map[string]bool{}
	for i := range evs {
		keys[evs[i].Key] = true
	}
	got := map[string]int{}
	from, to := time.Unix(0, 0), time.Now().Add(24*time.Hour)
	for key := range keys {
		vs, err := views.Query(ctx, cfg.Name, key, cfg.Windows[0].ID(), from, to)
		if err != nil {
			return err
		}
		for _, v := range vs {
			got[key+"|"+v.Window.Start.UTC().Format(time.RFC3339)] += int(v.Result.Count)
		}
	}
	for k, n := range want {
		if got[k] != n {
			return fmt.Errorf("tributary: window %s holds %d, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("tributary: %d windows, want %d", len(got), len(want))
	}
	return nil
}
