package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestTickCountsOnlyTheWindowsItMakesFinal: a session that closed stays
// listed until its allowed lateness has passed (a late record may still
// correct it), so every tick looks at its state again; a new user saw the
// pageviews ticker report WindowsFinalized=3 on each of 30 ticks that made
// nothing final and sent nothing. A tick counts the windows it makes
// final, not the states it looks at.
func TestTickCountsOnlyTheWindowsItMakesFinal(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"ticks","key":"key","windows":[{"kind":"session","gap":"30s"}],
	  "aggregates":["count"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("ticks-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	now := base.Add(50 * time.Second)
	p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), nil, "",
		aggregate.WithLogger(slog.New(slog.DiscardHandler)), aggregate.WithClock(func() time.Time { return now }))
	rec := func(seq int, key string, offset time.Duration) record {
		at := base.Add(offset)
		return record{shard: "shardId-000000000000", seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}}
	}
	// k's session [10:00:00, 10:00:40) is listed to be looked at when the
	// watermark passes 10:00:40; a record at 10:00:35 grows it to 10:01:05
	// while j's at 10:00:45 moves the watermark past 10:00:40: the state is
	// due on every tick, and still open, until the watermark passes 10:01:05.
	for _, batch := range [][]record{{rec(1, "k", 0), rec(2, "k", 10*time.Second)}, {rec(3, "k", 35*time.Second), rec(4, "j", 45*time.Second)}} {
		if resp, err := p.HandleBatch(ctx, kinesisEvent(batch)); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %+v %v", resp, err)
		}
	}
	var made []int
	for i := range 4 {
		// Before the shard has been idle for idleTimeout: the watermark
		// stays at 10:00:45.
		now = base.Add(50*time.Second + time.Duration(i)*time.Second)
		res, err := p.Tick(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, res.Finalized)
	}
	for i, n := range made {
		if n != 0 {
			t.Errorf("tick %d made nothing final but reports %d finalized (all ticks: %v)", i+1, n, made)
		}
	}
}
