package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// On the per-interval path a record waits in Lambda's tumbling window state
// until the interval's flush. The shard's stored watermark does not move
// meanwhile, so the ticker would take it for idle and close the record's
// window by processing time before the flush writes it: the record, on
// time, was then dropped as late. The ticker now stops at the window the
// carried records open until the flush has written them, and a flush that
// never comes holds the shard back for at most half an hour.
func TestTickerWaitsForRecordsTheIntervalCarries(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		window string
		flush  bool            // whether the interval's flush comes
		ticks  []time.Duration // ticks while the record is carried
		want   string          // key a's results at the end
	}{
		{"tumbling: the window waits for its flush", `{"kind":"tumbling","size":"10s"}`, true,
			[]time.Duration{15 * time.Second, 50 * time.Second, 59 * time.Second}, "final [0s,10s) r1 count 2 sum 2"},
		{"hopping: the window waits for its flush", `{"kind":"hopping","size":"10s","advance":"5s"}`, true,
			[]time.Duration{15 * time.Second, 50 * time.Second, 59 * time.Second},
			"final [-5s,5s) r1 count 1 sum 1\nfinal [0s,10s) r1 count 2 sum 2\nfinal [5s,15s) r1 count 1 sum 1"},
		{"a flush that never comes holds the shard for half an hour", `{"kind":"tumbling","size":"10s"}`, false,
			[]time.Duration{15 * time.Second, 50 * time.Second, 29 * time.Minute, 31 * time.Minute, 32 * time.Minute}, "final [0s,10s) r1 count 1 sum 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := pipeline.Parse([]byte(`{"name":"kh","key":"key","value":"data.v","windows":[` + tt.window + `],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			table := fmt.Sprintf("intervalhold-%d", tableSeq.Add(1))
			if err := state.CreateTable(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			now := base
			clock := func() time.Time { return now }
			out := &outputLog{}
			p := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates, state.WithClock(clock)), out, "results",
				aggregate.WithLogger(quiet), aggregate.WithClock(clock))
			const shard = "shardId-000000000000"
			win := events.TimeWindowProperties{ShardID: shard}
			seq := 0
			carry := func(seconds float64) map[string]string {
				t.Helper()
				seq++
				when := base.Add(time.Duration(seconds * float64(time.Second)))
				now = when
				recs := []record{{shard: shard, seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: "a",
					OccurredAt: when, SentAt: when, ReceivedAt: when, Data: json.RawMessage(`{"v":1}`)}}}
				resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs), TimeWindowProperties: win})
				if err != nil || len(resp.BatchItemFailures) > 0 {
					t.Fatalf("interval batch: %v %v", resp, err)
				}
				return resp.State
			}
			flush := func(st map[string]string) {
				t.Helper()
				fin := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
				fin.State, fin.IsFinalInvokeForWindow = st, true
				if _, err := p.HandleInterval(ctx, fin); err != nil {
					t.Fatalf("interval flush: %v", err)
				}
			}
			tick := func(at time.Duration) {
				t.Helper()
				now = base.Add(at)
				if _, err := p.Tick(ctx, now); err != nil {
					t.Fatal(err)
				}
			}
			flush(carry(0)) // the first interval: a@0s written
			st := carry(5)  // the second: a@5s carried
			for _, at := range tt.ticks[:2] {
				tick(at)
				if got := out.of("a", base); tt.flush && len(got) > 0 {
					t.Fatalf("tick at %v, a@5s still carried: results already\n%s", at, strings.Join(got, "\n"))
				}
			}
			for _, at := range tt.ticks[2:] {
				tick(at)
			}
			if tt.flush {
				flush(st)
			}
			tick(time.Hour)
			tick(time.Hour + time.Minute)
			if got := strings.Join(out.of("a", base), "\n"); got != tt.want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
