package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A session shows its running value while open, then its final value; a
// record that bridges two final sessions retracts them into one corrected.
func TestSessionRunningThenFinalThenMerged(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"s","key":"key","value":"data.ms","windows":[{"kind":"session","gap":"10s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"0s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("session-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	seq := 0
	send := func(offsets ...time.Duration) {
		t.Helper()
		var recs []record
		for _, o := range offsets {
			seq++
			at := base.Add(o)
			recs = append(recs, record{shard: "shardId-000000000000", seq: seq, env: stream.Envelope{
				ID: fmt.Sprint(seq), Type: "v", Key: "k", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"ms":1}`)}})
		}
		resp, err := p.HandleBatch(ctx, kinesisEvent(recs))
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %v %v", resp, err)
		}
	}
	read := func() []state.View {
		t.Helper()
		vs, err := p.Windows(ctx, "k", cfg.Windows[0].ID(), base.Add(-time.Hour), base.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	describe := func(vs []state.View) string {
		s := ""
		for _, v := range vs {
			s += fmt.Sprintf("[%s+%s count %d final %v rev %d] ", v.Window.Start.Sub(base), v.Window.Size(), v.Result.Count, v.Final, v.Revision)
		}
		return s
	}

	send(0, 2*time.Second) // one open session [0, 12s)
	if got := describe(read()); got != "[0s+12s count 2 final false rev 0] " {
		t.Fatalf("running: %s", got)
	}
	send(20*time.Second, 45*time.Second) // watermark 45s: [0,12s) final; [20s,30s) final; [45s,55s) open
	if got := describe(read()); got != "[0s+12s count 2 final true rev 1] [20s+10s count 1 final true rev 1] [45s+10s count 1 final false rev 0] " {
		t.Fatalf("after the watermark passed: %s", got)
	}
	// Late, less than the gap from both: bridges [0,12s) and [20s,30s) into
	// [0s,30s), a new final session; the two it replaces are retracted.
	send(11 * time.Second)
	if got := describe(read()); got != "[0s+30s count 4 final true rev 1] [45s+10s count 1 final false rev 0] " {
		t.Fatalf("after the bridging late record: %s", got)
	}
}

// Near the invoke deadline the handler stops writing and answers with item
// failures (not a timeout, which would redeliver the whole batch); the
// retry from the reported record counts every record once.
func TestDeadlineReportsItemFailuresThenRetryCountsOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"d","key":"key","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count"],"partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("deadline-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(db, table, cfg.Aggregates)
	p := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var recs []record
	for i := 1; i <= 6; i++ {
		at := base.Add(time.Duration(i) * time.Second)
		recs = append(recs, record{shard: "shardId-000000000000", seq: i, env: stream.Envelope{
			ID: fmt.Sprint(i), Type: "v", Key: fmt.Sprintf("k%d", i%3), OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}})
	}
	// Warm: the first record, so the shard's watermark is cached.
	if _, err := p.HandleBatch(ctx, kinesisEvent(recs[:1])); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // less than the handler's margin
	defer cancel()
	resp, err := p.HandleBatch(short, kinesisEvent(recs[1:]))
	if err != nil {
		t.Fatalf("near the deadline: error %v, want item failures", err)
	}
	if len(resp.BatchItemFailures) == 0 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
		t.Fatalf("near the deadline: failures %v, want the batch's first record (2) first", resp.BatchItemFailures)
	}
	// Lambda retries from record 2.
	if resp, err := p.HandleBatch(ctx, kinesisEvent(recs[1:])); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("retry: %v %v", resp, err)
	}
	total := uint64(0)
	for _, k := range []string{"k0", "k1", "k2"} {
		vs, err := views.Query(ctx, "d", k, cfg.Windows[0].ID(), base.Add(-time.Minute), base.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			total += v.Result.Count
		}
	}
	if total != 6 {
		t.Fatalf("counted %d records, want 6", total)
	}
}
