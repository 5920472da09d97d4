package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// keyedStateBytes is the size of key's stored sliding state blob.
func keyedStateBytes(t *testing.T, mem *memdb.DB, key string) int {
	t.Helper()
	for _, it := range mem.Items("views") {
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		sk, _ := it["sk"].(*types.AttributeValueMemberS)
		if pk != nil && sk != nil && strings.HasSuffix(pk.Value, "#"+key) && strings.HasSuffix(sk.Value, "|~state") {
			if b, ok := it["state"].(*types.AttributeValueMemberB); ok {
				return len(b.Value)
			}
		}
	}
	return 0
}

// TestABudgetCheckReadsTheStateItsCopySaysIsFull: the handler keeps the
// state its finalize saved; the ticker (which always reads) prunes it
// since. The key's next records fit the pruned state: the budget check,
// whose copy says the state is full and behind which no conditional write
// would find out otherwise, reads the state before setting any aside.
func TestABudgetCheckReadsTheStateItsCopySaysIsFull(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"busy","key":"key","value":"data.ms","distinct":"data.user",
	 "windows":[{"kind":"sliding","difference":"1h"}],
	 "aggregates":["count","max","distinct"],"outOfOrderness":"0s","idleTimeout":"30s",
	 "latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	views := state.NewViews(mem, "views", cfg.Aggregates, state.WithClock(clock))
	handler := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(quiet), aggregate.WithClock(clock),
		aggregate.WithSetAside(setaside.New(mem, "quarantine", setaside.WithFunction("aggregate"))))
	ticker := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(quiet), aggregate.WithClock(clock))
	ctx := context.Background()
	seq := 0
	batch := func(key string, n int, at time.Time, step time.Duration) {
		t.Helper()
		var ev events.KinesisEvent
		for i := 0; i < n; i++ {
			seq++
			ev.Records = append(ev.Records, rawRecord(seq, key, view(fmt.Sprint("e", seq), key, at, fmt.Sprintf(`{"ms":1,"user":"u%d"}`, seq)), at))
			at = at.Add(step)
		}
		resp, err := handler.HandleBatch(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch of %s: %v %v", key, err, resp.BatchItemFailures)
		}
	}
	// 1. A busy key: many sliding windows, each with a distinct sketch.
	batch("busy", 400, t0, 100*time.Millisecond)
	// 2. Another key moves the handler's watermark past the busy key's
	// left windows (within the allowed lateness: none is pruned); the
	// handler's finalize records them final and saves: its copy is big.
	now = t0.Add(45 * time.Second)
	batch("other", 1, t0.Add(45*time.Second), 0)
	big := keyedStateBytes(t, mem, "busy")
	t.Logf("the busy key's state after the handler's finalize: %d bytes", big)
	// 3. The shard goes idle; the ticker advances its watermark past the
	// allowed lateness, finalizes the rest and prunes the state.
	for _, at := range []time.Duration{3 * time.Hour, 3*time.Hour + time.Minute} {
		now = t0.Add(at)
		if _, err := ticker.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	small := keyedStateBytes(t, mem, "busy")
	t.Logf("the busy key's state after the ticker's prune: %d bytes", small)
	if small >= big/4 {
		t.Fatalf("the ticker left %d bytes of %d: the scenario needs it pruned", small, big)
	}
	// 4. The busy key sends again: n records that fit the stored state
	// with room to spare, but not the handler's stale copy of it.
	n := (aggregate.MaxKeyedStateBytes-big)/45 + 200
	if small+n*45 > aggregate.MaxKeyedStateBytes {
		t.Fatalf("the scenario's %d records would not fit the stored state either", n)
	}
	now = t0.Add(3*time.Hour + 2*time.Minute)
	batch("busy", n, now, time.Millisecond)
	aside := 0
	for _, it := range mem.Items("quarantine") {
		if c, ok := it["category"].(*types.AttributeValueMemberS); ok && c.Value == setaside.KindStateBudget {
			aside++
		}
	}
	if aside > 0 {
		t.Errorf("%d of the busy key's %d records set aside as over its state budget; the stored state holds %d bytes, room for all of them (the handler judged them by its copy of %d bytes the ticker had pruned since)", aside, n, small, big)
	}
}
