package join_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestLateIsJudgedAgainstTheStoredWatermark: a search that arrives after a
// tick advanced the idle shard's watermark past its window is late — and
// dropped — in the execution environment that processed the shard's
// earlier batches (warm, its copy of the watermark older) as in a new one
// (cold, which reads it). Before, a warm environment took it in as on time
// and the next close sent it out unmatched, while a cold one dropped it: a
// new user's 80 s old search came out unmatched.
func TestLateIsJudgedAgainstTheStoredWatermark(t *testing.T) {
	ctx := context.Background()
	cfg, err := join.Parse([]byte(`{"name":"warm","left":"search","right":"click","within":"10s","joinType":"left","allowedLateness":"1s","idleTimeout":"30s"}`))
	if err != nil {
		t.Fatal(err)
	}
	env := func(id, typ string, sec int) stream.Envelope {
		at := base.Add(time.Duration(sec) * time.Second)
		return stream.Envelope{ID: id, Type: typ, Key: "k1", OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}
	}
	run := func(t *testing.T, warm bool) string {
		table, out, _ := newResources(t)
		environment := func() *join.Handler {
			return join.New(cfg, state.NewViews(db, table, nil), kin, out, join.DefaultLimits, keyed.WithLogger(quiet))
		}
		batch := func(h *join.Handler, seq int, e stream.Envelope) {
			t.Helper()
			resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords([]record{{shard: "shardId-000000000000", seq: seq, env: e}})})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch: %+v %v", resp, err)
			}
		}
		first := environment()
		batch(first, 1, env("s1", "search", 0))
		ticks := environment() // a tick lands in another environment
		for _, at := range []time.Time{base.Add(time.Minute), base.Add(2 * time.Minute)} {
			if _, err := ticks.Tick(ctx, at); err != nil {
				t.Fatal(err)
			}
		}
		next := first
		if !warm {
			next = environment()
		}
		batch(next, 2, env("s2", "search", 5)) // 5 s after s1: its window closed long ago
		for _, at := range []time.Time{base.Add(3 * time.Minute), base.Add(4 * time.Minute)} {
			if _, err := next.Tick(ctx, at); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Join(describe(t, keyedtest.ReadAll(t, kin, out)), " ")
	}
	warm, cold := run(t, true), run(t, false)
	if warm != cold {
		t.Fatalf("a warm environment's outputs %q, a cold one's %q: whether s2 is late depends on where Lambda ran it", warm, cold)
	}
	if want := "k1 [s1, null]"; cold != want {
		t.Errorf("outputs %q, want %q (s2 late, dropped)", cold, want)
	}
}
