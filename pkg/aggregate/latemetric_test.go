package aggregate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Each record is in three windows of this pipeline: one tumbling, two hopping.
const lateMetricConfig = `{"name":"late","key":"key","value":"data.ms",
  "windows":[{"kind":"tumbling","size":"1m"},{"kind":"hopping","size":"2m","advance":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`

// emfSum sums metric name over the EMF lines in buf (one per flush).
func emfSum(t *testing.T, buf *bytes.Buffer, name string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("EMF line is not JSON: %q: %v", sc.Text(), err)
		}
		if v, ok := doc[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

// LateDropped counts records, not (record, window) pairs: a record dropped
// from all three of its windows counts once, whether the watermark dropped
// it when it was routed or the store found its windows made final by the
// ticker, on the per-batch and the per-interval path; so 100 × LateDropped
// / RecordsIn (the lateDroppedPercent alarm) is at most 100.
func TestLateDroppedCountsRecords(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(lateMetricConfig))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const shard = "shardId-000000000000"
	rec := func(seq int, key string, offset time.Duration) record {
		at := base.Add(offset)
		return record{shard: shard, seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"ms":1}`)}}
	}
	type step func(t *testing.T, p, ticker *aggregate.Processor)
	batch := func(recs ...record) step {
		return func(t *testing.T, p, _ *aggregate.Processor) {
			resp, err := p.HandleBatch(context.Background(), kinesisEvent(recs))
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v", resp, err)
			}
		}
	}
	interval := func(recs ...record) step {
		return func(t *testing.T, p, _ *aggregate.Processor) {
			ctx := context.Background()
			win := events.TimeWindowProperties{ShardID: shard}
			resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs), TimeWindowProperties: win})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("interval: %+v %v", resp, err)
			}
			win.State, win.IsFinalInvokeForWindow = resp.State, true
			if resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{TimeWindowProperties: win}); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("final invocation: %+v %v", resp, err)
			}
		}
	}
	// The ticker (its own processor, as the ticker function is) finalizes
	// the idle shard's windows: the first tick starts its idle clock.
	tick := func(t *testing.T, _, ticker *aggregate.Processor) {
		for _, at := range []time.Time{base.Add(time.Hour), base.Add(time.Hour + time.Minute)} {
			if _, err := ticker.Tick(context.Background(), at); err != nil {
				t.Fatalf("tick: %v", err)
			}
		}
	}
	for _, c := range []struct {
		name         string
		setup        []step
		late         step
		in, wantLate float64
	}{
		{"per batch, late when routed", []step{batch(rec(1, "k", 10*time.Second), rec(2, "z", 5*time.Minute))},
			batch(rec(3, "k", 20*time.Second), rec(4, "k", 30*time.Second), rec(5, "k", 5*time.Minute+10*time.Second)), 3, 2},
		{"per batch, windows made final by the ticker", []step{batch(rec(1, "k", 10*time.Second)), tick},
			batch(rec(2, "k", 20*time.Second), rec(3, "k", 30*time.Second)), 2, 2},
		{"per interval, late when routed", []step{interval(rec(1, "k", 10*time.Second), rec(2, "z", 5*time.Minute))},
			interval(rec(3, "k", 20*time.Second), rec(4, "k", 30*time.Second), rec(5, "k", 5*time.Minute+10*time.Second)), 3, 2},
		{"per interval, windows made final by the ticker", []step{interval(rec(1, "k", 10*time.Second)), tick},
			interval(rec(2, "k", 20*time.Second), rec(3, "k", 30*time.Second)), 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			table := fmt.Sprintf("latemetric-%d", tableSeq.Add(1))
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			var emf bytes.Buffer
			m := metrics.New(&emf, "aggregate")
			p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "", aggregate.WithMetrics(m))
			ticker := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "",
				aggregate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			for _, s := range c.setup {
				s(t, p, ticker)
			}
			if got := emfSum(t, &emf, "LateDropped"); got != 0 {
				t.Fatalf("LateDropped %v before the late records, want 0", got)
			}
			emf.Reset()
			c.late(t, p, ticker)
			in, late := emfSum(t, &emf, "RecordsIn"), emfSum(t, &emf, "LateDropped")
			if in != c.in || late != c.wantLate {
				t.Errorf("RecordsIn %v, LateDropped %v; want %v and %v (each late record once, not once per window)", in, late, c.in, c.wantLate)
			}
			if late > in {
				t.Errorf("LateDropped %v > RecordsIn %v: the lateDroppedPercent alarm would read %v%%", late, in, 100*late/in)
			}
		})
	}
}

// A record Lambda delivers again after it was processed (a batch delivered
// twice, a retry from a few records back) is not judged late again:
// LateDropped counted it, or its windows had it, the first time. Before,
// a redelivered record whose window the watermark had made final since
// counted as dropped, and the lateDroppedPercent alarm rose during retries.
func TestLateDroppedIgnoresRedeliveries(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const shard = "shardId-000000000000"
	rec := func(seq int, key string, offset time.Duration) record {
		at := base.Add(offset)
		return record{shard: shard, seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"ms":1}`)}}
	}
	type step func(t *testing.T, p *aggregate.Processor)
	batch := func(recs ...record) step {
		return func(t *testing.T, p *aggregate.Processor) {
			resp, err := p.HandleBatch(context.Background(), kinesisEvent(recs))
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v", resp, err)
			}
		}
	}
	interval := func(recs ...record) step {
		return func(t *testing.T, p *aggregate.Processor) {
			ctx := context.Background()
			win := events.TimeWindowProperties{ShardID: shard}
			resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs), TimeWindowProperties: win})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("interval: %+v %v", resp, err)
			}
			win.State, win.IsFinalInvokeForWindow = resp.State, true
			if resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{TimeWindowProperties: win}); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("final invocation: %+v %v", resp, err)
			}
		}
	}
	// k@10s is on time when first processed; z@5m then makes its windows
	// final; k@20s is late when first processed.
	onTime, closing, late := rec(1, "k", 10*time.Second), rec(2, "z", 5*time.Minute), rec(3, "k", 20*time.Second)
	const tumbling, sliding = `{"kind":"tumbling","size":"1m"}`, `{"kind":"sliding","difference":"30s"}`
	for _, c := range []struct {
		name     string
		windows  string
		setup    []step
		again    step
		wantLate float64
	}{
		{"per batch: a batch again after its window was made final", tumbling,
			[]step{batch(onTime, closing)}, batch(onTime, closing), 0},
		{"per batch: a late record again", tumbling,
			[]step{batch(onTime, closing), batch(late)}, batch(late), 0},
		{"per batch: a retry from a few records back, with a new late record", tumbling,
			[]step{batch(onTime, closing)}, batch(onTime, closing, late), 1},
		{"per interval: an interval again after its window was made final", tumbling,
			[]step{interval(onTime, closing)}, interval(onTime, closing), 0},
		{"sliding: a batch again after its windows were made final", sliding,
			[]step{batch(onTime, closing)}, batch(onTime, closing), 0},
		{"sliding: a record dropped from every window, again", sliding,
			[]step{batch(onTime, closing), batch(late)}, batch(late), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, err := pipeline.Parse([]byte(`{"name":"late","key":"key","value":"data.ms","windows":[` + c.windows + `],
			  "aggregates":["count","sum"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`))
			if err != nil {
				t.Fatal(err)
			}
			table := fmt.Sprintf("lateagain-%d", tableSeq.Add(1))
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			var emf bytes.Buffer
			p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "",
				aggregate.WithMetrics(metrics.New(&emf, "aggregate")),
				aggregate.WithDedupe(aggregate.NewLedger(db, table, cfg)))
			for _, s := range c.setup {
				s(t, p)
			}
			emf.Reset()
			c.again(t, p)
			if got := emfSum(t, &emf, "LateDropped"); got != c.wantLate {
				t.Errorf("LateDropped %v for the redelivery, want %v: a record processed before is not judged late again", got, c.wantLate)
			}
		})
	}
}
