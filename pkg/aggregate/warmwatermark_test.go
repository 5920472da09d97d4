package aggregate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

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
