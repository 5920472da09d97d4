package join_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestAKeyNeedingManyFoldRoundsIsFoldedInOneInvocation: a key whose
// records make its state reach FoldBytes again and again (one search, 40
// clicks) is folded round after round within the invocation, each round
// written and its joins sent. Each round used to end the invocation for
// the key, reporting its next record; Lambda counts such a partial failure
// as a retry of the batch, so past the mapping's 3 retries the rest of the
// key's records went to the on-failure queue as a transient failure (a
// producer's 300 clicks on one search: 204 quarantined).
func TestAKeyNeedingManyFoldRoundsIsFoldedInOneInvocation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // Lambda's invocations have a deadline
	defer cancel()
	cfg, err := join.Parse([]byte(`{"name":"rounds","left":"search","right":"click","within":"10m","joinType":"left","allowedLateness":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	table, out, _ := newResources(t)
	lim := join.Limits{MaxRecordData: 1000, MaxOpenBytes: 1 << 20, FoldBytes: 300}
	h := join.New(cfg, state.NewViews(db, table, nil), kin, out, lim, keyed.WithLogger(quiet))
	env := func(id, typ, key string, ms int) stream.Envelope {
		at := base.Add(time.Duration(ms) * time.Millisecond)
		return stream.Envelope{ID: id, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"q":"a"}`)}
	}
	var recs []record
	add := func(e stream.Envelope) {
		recs = append(recs, record{shard: "shardId-000000000000", seq: 100 + len(recs), env: e})
	}
	add(env("s1", "search", "k1", 0))
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("c%02d", i)
		add(env(id, "click", "k1", 100+i))
		want = append(want, "k1 [s1, "+id+"]")
	}
	add(env("t1", "search", "k2", 50))
	add(env("u1", "click", "k2", 60))
	want = append(want, "k2 [t1, u1]")
	resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(recs)})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %+v %v; want every record done in this invocation", resp, err)
	}
	if n := h.Stats().FoldCheckpoints; n < 5 {
		t.Fatalf("%d fold rounds ended at FoldBytes; want at least 5 (more than the mapping's retries), or the test shows nothing", n)
	}
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	got := describe(t, keyedtest.ReadAll(t, kin, out))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("joins %v\nwant %v", got, want)
	}
}
