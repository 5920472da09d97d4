package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// slowReads answers each GetItem after a DynamoDB-like latency and keeps
// the most reads it had in flight at once.
type slowReads struct {
	memdb.Client
	inFlight, most atomic.Int64
	reads          atomic.Int64
}

func (s *slowReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	s.reads.Add(1)
	time.Sleep(3 * time.Millisecond)
	return s.Client.GetItem(ctx, in, opts...)
}

// TestKeysNewToTheContainerAreReadAtOnce: a batch over many keys the warm
// container has not seen reads each key's session state (the budget check)
// several at a time, not one after another: at 4 ms a read, 250 keys read
// in turn made a carried invocation wait a second (BENCH keepup).
func TestKeysNewToTheContainerAreReadAtOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"reads","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"30s"}],"aggregates":["count","max"],"outOfOrderness":"1s",
	 "partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	store := &slowReads{Client: mem}
	p := aggregate.New(cfg, state.NewViews(store, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	const keys = 64
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ev events.KinesisEvent
	for i := range keys {
		key := fmt.Sprintf("user-%02d", i)
		ev.Records = append(ev.Records, rawRecord(i+1, key, view(fmt.Sprint("e", i), key, at, `{"ms":1}`), at))
	}
	resp, err := p.HandleBatch(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", err, resp.BatchItemFailures)
	}
	if got := store.reads.Load(); got < keys {
		t.Fatalf("%d reads for %d keys new to the container: want each key's state read", got, keys)
	}
	if most := store.most.Load(); most < 8 {
		t.Errorf("at most %d reads in flight for %d keys new to the container: want them read several at a time (the handler's concurrency, %d)", most, keys, aggregate.DefaultConcurrency)
	}
}

// slowWrites answers each UpdateItem after a DynamoDB-like latency and
// keeps the most writes it had in flight at once.
type slowWrites struct {
	memdb.Client
	inFlight, most atomic.Int64
}

func (s *slowWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(3 * time.Millisecond)
	return s.Client.UpdateItem(ctx, in, opts...)
}

// TestABatchWritesItsWindowsManyAtOnce: a batch over many keys has up to
// DefaultConcurrency writes in flight, never more. An instance waits on
// its writes (a few ms each), so the number in flight is what lets one
// keep up with a shard: at 16, one instance on a full shard over 1,000 keys
// kept up with 2.25 times the shard's rate (BENCH keepup); at 64, 5.4 times.
func TestABatchWritesItsWindowsManyAtOnce(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"writes","key":"key","value":"data.ms",
	 "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","max"],"outOfOrderness":"1s",
	 "dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	store := &slowWrites{Client: mem}
	p := aggregate.New(cfg, state.NewViews(store, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	const keys = 4 * aggregate.DefaultConcurrency
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ev events.KinesisEvent
	for i := range keys {
		key := fmt.Sprintf("user-%03d", i)
		ev.Records = append(ev.Records, rawRecord(i+1, key, view(fmt.Sprint("e", i), key, at, `{"ms":1}`), at))
	}
	resp, err := p.HandleBatch(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %v %v", err, resp.BatchItemFailures)
	}
	most := store.most.Load()
	if most > aggregate.DefaultConcurrency {
		t.Errorf("%d writes in flight: want at most DefaultConcurrency (%d)", most, aggregate.DefaultConcurrency)
	}
	if most < aggregate.DefaultConcurrency/2 {
		t.Errorf("at most %d writes in flight for %d keys: want up to DefaultConcurrency (%d) at once", most, keys, aggregate.DefaultConcurrency)
	}
}

// failingKey refuses every write to one key's items, as a throttled
// partition would while Lambda retries.
type failingKey struct {
	memdb.Client
	key string
}

func (f *failingKey) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && strings.HasSuffix(pk.Value, "#"+f.key) {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected: the key's partition is throttled")}
	}
	return f.Client.UpdateItem(ctx, in, opts...)
}

// TestAPartlyFailedBatchMovesTheWatermarkByWhatItApplied: Lambda resumes a
// batch from its lowest failed record, so the records before it, applied,
// never come again. Their event times move the shard's watermark, or a
// shard whose retries bring nothing that moves it (copies the ledger
// suppresses, a parent shard closed by a split) never stored a watermark,
// and the ticker, which closes the windows of the shards it knows, left
// the windows of those records open for good (make soak found one).
func TestAPartlyFailedBatchMovesTheWatermarkByWhatItApplied(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"partly","key":"key","value":"data.ms",
	 "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],"outOfOrderness":"1s",
	 "idleTimeout":"30s","dedupeHorizon":"0s"}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	views := state.NewViews(&failingKey{Client: mem, key: "b"}, "views", cfg.Aggregates)
	p := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(quiet))
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "a", view("e1", "a", at, `{"ms":1}`), at),
		rawRecord(2, "a", view("e2", "a", at.Add(20*time.Second), `{"ms":1}`), at.Add(20*time.Second)),
		rawRecord(3, "b", view("e3", "b", at.Add(25*time.Second), `{"ms":1}`), at.Add(25*time.Second)),
	}}
	resp, err := p.HandleBatch(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "3" {
		t.Fatalf("failures %+v, want record 3 alone (key b's write refused)", resp.BatchItemFailures)
	}
	marks, err := views.Watermarks(context.Background(), "partly")
	if err != nil {
		t.Fatal(err)
	}
	wm, ok := marks[hardShard]
	if !ok {
		t.Fatal("no watermark stored for the shard: the applied records' event times were dropped with the failed one")
	}
	if want := at.Add(20 * time.Second); !wm.MaxEventTime.Equal(want) {
		t.Errorf("stored max event time %s, want %s (record 2, the last applied before the failure; not record 3)", wm.MaxEventTime, want)
	}
	// Nothing else comes on the shard: the ticker closes key a's window.
	tick := aggregate.New(cfg, state.NewViews(mem, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	for _, now := range []time.Time{at.Add(time.Hour), at.Add(2 * time.Hour)} {
		if _, err := tick.Tick(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := views.Query(context.Background(), "partly", "a", "tumbling:1m0s", at.Add(-time.Hour), at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || !vs[0].Final || vs[0].Result.Count != 2 {
		t.Fatalf("key a's window after the ticks: %+v, want one final window counting 2", vs)
	}
}
