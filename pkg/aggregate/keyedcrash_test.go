package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// failSaveAfterWindow fails, once, the first write of a keyed state item
// that follows a write of a window item: a process dying (or throttled)
// after finalize wrote a final window and before the keyed state says so.
type failSaveAfterWindow struct {
	*memdb.DB
	wroteWindow, failed atomic.Bool
}

func (f *failSaveAfterWindow) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	keyed, window := false, false
	for _, v := range in.Key {
		if s, ok := v.(*types.AttributeValueMemberS); ok && strings.HasPrefix(s.Value, "session:") {
			keyed = strings.HasSuffix(s.Value, "|~state")
			window = !keyed
		}
	}
	if window {
		f.wroteWindow.Store(true)
	}
	if keyed && f.wroteWindow.Load() && f.failed.CompareAndSwap(false, true) {
		return nil, errCrash
	}
	return f.DB.UpdateItem(ctx, in, opts...)
}

// A final session that a later record merges into a larger one is
// retracted, also when the process that wrote it died before its keyed
// state recorded the write: the views then list only the larger session,
// and the output stream carries the retraction.
func TestKeyedFinalSessionRetractedAfterCrashBeforeStateSave(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"kc","key":"key","value":"data.v","windows":[{"kind":"session","gap":"20s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"1s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const table, shard = "keyedcrash", "shardId-000000000000"
	store := &failSaveAfterWindow{DB: memdb.New(map[string]memdb.Schema{table: memdb.ViewsTable})}
	out := &outputLog{}
	p := aggregate.New(cfg, state.NewViews(store, table, cfg.Aggregates), out, "results", aggregate.WithLogger(quiet))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	batch := func(rs ...at) []record {
		var recs []record
		for i, r := range rs {
			when := base.Add(time.Duration(r.seconds * float64(time.Second)))
			recs = append(recs, record{shard: shard, seq: i + 1, env: stream.Envelope{ID: fmt.Sprint(i + 1), Type: "v", Key: r.key,
				OccurredAt: when, SentAt: when, ReceivedAt: when, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, r.value))}})
		}
		return recs
	}
	// The watermark (59s) makes the session [0s,20s) final; the keyed
	// state's save after its window item is written fails.
	resp, err := p.HandleBatch(ctx, kinesisEvent(batch(at{"a", 0, 1}, at{"a", 60, 2})))
	if err == nil && len(resp.BatchItemFailures) == 0 || !store.failed.Load() {
		t.Fatalf("the injected failure did not fail the batch: %v %v", resp, err)
	}
	// Lambda retries from the same checkpoint with a larger batch: the
	// record at 15s grows [0s,20s) into [0s,35s).
	resp, err = p.HandleBatch(ctx, kinesisEvent(batch(at{"a", 0, 1}, at{"a", 60, 2}, at{"a", 15, 4})))
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("retried batch: %v %v", resp, err)
	}

	views, err := p.Windows(ctx, "a", "session:20s", base.Add(-time.Hour), base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range views {
		got = append(got, fmt.Sprintf("[%s,%s) final %t count %d sum %g", v.Window.Start.Sub(base), v.Window.End.Sub(base), v.Final, v.Result.Count, v.Result.Sum))
	}
	want := []string{"[0s,35s) final true count 2 sum 5", "[1m0s,1m20s) final false count 1 sum 2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("session windows of key a:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantOut := []string{"final [0s,20s) r1 count 1 sum 1", "retraction [0s,20s) r2", "final [0s,35s) r1 count 2 sum 5"}
	if got := out.of("a", base); strings.Join(got, "\n") != strings.Join(wantOut, "\n") {
		t.Errorf("results of key a:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOut, "\n"))
	}
}
