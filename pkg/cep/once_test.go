package cep

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestMatchSentOnceAcrossEnvironments: a batch's match goes on the stream
// once, though the ticks that follow run in another execution environment
// of the function (Lambda runs several; a tick lands on any), which cannot
// know from memory that the batch sent it. Before, the batch's write
// listed the key as due at once until its next fold, and the first tick
// elsewhere sent every match a second time.
func TestMatchSentOnceAcrossEnvironments(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	table, out := name("cep-state"), name("matches")
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, out, 1)
	cfg := &Config{Name: "once", IdleTimeout: time.Minute}
	rules := newStaticRules([]*Rule{rule(t, `{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`)})
	environment := func() *Handler {
		return NewHandler(cfg, state.NewViews(db, table, nil), kin, out, rules, c.now, keyed.WithLogger(quiet))
	}
	batches, ticks := environment(), environment()
	for i, amount := range []int{1000, 5, 2000} {
		e := stream.Envelope{ID: "pay-" + string(rune('a'+i)), Type: "payment", Key: "acct", OccurredAt: c.now(), SentAt: c.now(), ReceivedAt: c.now(),
			Data: json.RawMessage(`{"amount":` + itoa(amount) + `}`)}
		resp, err := batches.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords([]shardRecord{{shard: "shardId-000000000000", seq: i + 1, env: e}})})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: %v %v", i, resp, err)
		}
		c.add(10 * time.Second)
		if _, err := ticks.Tick(ctx, c.now()); err != nil {
			t.Fatal(err)
		}
	}
	c.add(5 * time.Minute)
	if _, err := ticks.Tick(ctx, c.now()); err != nil {
		t.Fatal(err)
	}
	recs := keyedtest.ReadAll(t, kin, out)
	if len(recs) != 2 {
		for _, r := range recs {
			t.Log(string(r))
		}
		t.Fatalf("%d records on the matches stream, want the 2 matches once each", len(recs))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
