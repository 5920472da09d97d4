package keyedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// ErrCrash is the error an armed fault injects.
var ErrCrash = errors.New("keyedtest: injected crash between two writes")

// Budget is the writes a faulty client has left before its "crash": the
// write that spends it fails, the ones before and after succeed, as when a
// process dies between two writes and Lambda runs the batch again (< 0:
// none armed).
type Budget struct {
	n       atomic.Int64
	crashes atomic.Int64
	span    int
}

// Crashes is how many writes the budget failed so far.
func (b *Budget) Crashes() int64 { return b.crashes.Load() }

// NewBudget returns a budget with no crash armed; Mapping arms it to fail
// one of the next span writes of an invocation.
func NewBudget(span int) *Budget {
	b := &Budget{span: max(1, span)}
	b.n.Store(-1)
	return b
}

// Arm makes the n+1-th write from now fail (n < 0 disarms).
func (b *Budget) Arm(n int64) { b.n.Store(n) }

func (b *Budget) crash() bool {
	if b.n.Load() >= 0 && b.n.Add(-1) < 0 {
		b.crashes.Add(1)
		return true
	}
	return false
}

// DB is a DynamoDB client whose writes fail once its budget runs out, as a
// process that dies between two writes leaves them. Client is moto's
// *dynamodb.Client or the in-process memdb.DB.
type DB struct {
	memdb.Client
	B *Budget
	// ThrottleEvery throttles about one call in ThrottleEvery, at random
	// (0: none), as DynamoDB does under load: a transient error the
	// handler must retry, never a reason to drop or set aside a record.
	ThrottleEvery int
	// LoseEvery answers about one write in LoseEvery with ErrLostResponse
	// after making it (0: none): a timeout that leaves the caller not
	// knowing its write was applied.
	LoseEvery int
	// Rng, when set, draws the throttles and lost answers, so that a
	// scenario's seed replays them (a DB serves one mapping, which plays its
	// shard one invocation at a time; concurrent duplicates lock it).
	Rng *rand.Rand
	mu  sync.Mutex
}

func (d *DB) intN(n int) int {
	if d.Rng == nil {
		return rand.IntN(n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Rng.IntN(n)
}

// ErrLostResponse is the error of a write that was made but whose answer
// was lost (a timeout).
var ErrLostResponse = errors.New("keyedtest: injected timeout after the write was made")

func (d *DB) lost(err error) error {
	if err == nil && d.LoseEvery > 0 && d.intN(d.LoseEvery) == 0 {
		return ErrLostResponse
	}
	return err
}

// ErrThrottled is the error a throttled call gets.
var ErrThrottled = &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("keyedtest: injected throttle")}

func (d *DB) throttled() bool { return d.ThrottleEvery > 0 && d.intN(d.ThrottleEvery) == 0 }

// GetItem is throttled now and then.
func (d *DB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.throttled() {
		return nil, ErrThrottled
	}
	return d.Client.GetItem(ctx, in, opts...)
}

// BatchGetItem is throttled now and then.
func (d *DB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if d.throttled() {
		return nil, ErrThrottled
	}
	return d.Client.BatchGetItem(ctx, in, opts...)
}

// Query is throttled now and then.
func (d *DB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if d.throttled() {
		return nil, ErrThrottled
	}
	return d.Client.Query(ctx, in, opts...)
}

// UpdateItem fails when the budget is spent, is throttled now and then and
// now and then loses its answer.
func (d *DB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.B.crash() {
		return nil, ErrCrash
	}
	if d.throttled() {
		return nil, ErrThrottled
	}
	out, err := d.Client.UpdateItem(ctx, in, opts...)
	if err = d.lost(err); err != nil {
		return nil, err
	}
	return out, nil
}

// PutItem fails when the budget is spent, is throttled now and then and
// now and then loses its answer.
func (d *DB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.B.crash() {
		return nil, ErrCrash
	}
	if d.throttled() {
		return nil, ErrThrottled
	}
	out, err := d.Client.PutItem(ctx, in, opts...)
	if err = d.lost(err); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteItem fails when the budget is spent, is throttled now and then and
// now and then loses its answer.
func (d *DB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if d.B.crash() {
		return nil, ErrCrash
	}
	if d.throttled() {
		return nil, ErrThrottled
	}
	out, err := d.Client.DeleteItem(ctx, in, opts...)
	if err = d.lost(err); err != nil {
		return nil, err
	}
	return out, nil
}

// TransactWriteItems fails when the budget is spent, and now and then
// loses its answer.
func (d *DB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if d.B.crash() {
		return nil, ErrCrash
	}
	out, err := d.Client.TransactWriteItems(ctx, in, opts...)
	if err = d.lost(err); err != nil {
		return nil, err
	}
	return out, nil
}

// Kinesis is a Kinesis client whose PutRecords fails when the budget is
// spent: the state was written, its outputs were not. Client is moto's
// *kinesis.Client or a Stream.
type Kinesis struct {
	emit.Putter
	B *Budget
}

// PutRecords fails when the budget is spent.
func (k *Kinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if k.B.crash() {
		return nil, ErrCrash
	}
	return k.Putter.PutRecords(ctx, in, opts...)
}

// Handler is what Play drives.
type Handler interface {
	HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error)
}

// Mapping plays one shard's event source mapping.
type Mapping struct {
	T   testing.TB
	Rng *rand.Rand
	// Budgets are the faulty clients' budgets (DynamoDB, Kinesis): an
	// invocation arms at most one of them.
	Budgets []*Budget
	// New builds a handler as a cold start does.
	New func() Handler
	// MaxBatch bounds batch sizes (default 25).
	MaxBatch int
	h        Handler
	// Log lists what was played, for a failure message.
	Log []string
}

// invoke runs one batch, maybe with a crash armed, and returns the index to
// resume from (len(recs): all done) and whether the invocation "crashed".
func (m *Mapping) invoke(recs []events.KinesisEventRecord) (int, bool) {
	budget := int64(-1)
	var armed *Budget
	if len(m.Budgets) > 0 && m.Rng.IntN(3) == 0 {
		armed = m.Budgets[m.Rng.IntN(len(m.Budgets))]
		budget = int64(m.Rng.IntN(armed.span))
		armed.Arm(budget)
		defer armed.Arm(-1)
	}
	resp, err := m.h.HandleBatch(context.Background(), events.KinesisEvent{Records: recs})
	if err != nil {
		return 0, true
	}
	if budget >= 0 && m.Rng.IntN(3) == 0 {
		return 0, true // died after its writes, before Lambda got the response
	}
	if len(resp.BatchItemFailures) == 0 {
		return len(recs), false
	}
	lowest := resp.BatchItemFailures[0].ItemIdentifier
	for i, r := range recs {
		if r.Kinesis.SequenceNumber == lowest {
			return i, false
		}
	}
	m.T.Fatalf("item failure %s is not in the batch", lowest)
	return 0, false
}

// Run plays recs (one shard's, in order) to the end.
func (m *Mapping) Run(recs []events.KinesisEventRecord) {
	if m.MaxBatch == 0 {
		m.MaxBatch = 25
	}
	m.h = m.New()
	stuck := 0
	for pos := 0; pos < len(recs); {
		if m.Rng.IntN(10) == 0 {
			m.h = m.New()
			m.Log = append(m.Log, "cold start")
		}
		b := recs[pos:min(pos+1+m.Rng.IntN(m.MaxBatch), len(recs))]
		switch m.Rng.IntN(6) {
		case 0:
			var wg sync.WaitGroup
			for i := 0; i < 2; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = m.h.HandleBatch(context.Background(), events.KinesisEvent{Records: b})
				}()
			}
			wg.Wait()
			m.Log = append(m.Log, fmt.Sprintf("dup %d+%d", pos, len(b)))
		case 1:
			_, _ = m.h.HandleBatch(context.Background(), events.KinesisEvent{Records: b})
			m.Log = append(m.Log, fmt.Sprintf("redeliver %d+%d", pos, len(b)))
		}
		resume, crashed := m.invoke(b)
		if crashed {
			m.Log = append(m.Log, fmt.Sprintf("crash %d+%d", pos, len(b)))
			if len(b) > 1 && m.Rng.IntN(2) == 0 {
				half := b[:len(b)/2]
				if r, c := m.invoke(half); !c {
					pos += r
				}
				m.Log = append(m.Log, fmt.Sprintf("bisect %d+%d", pos, len(half)))
			}
			continue
		}
		if resume == 0 {
			if stuck++; stuck > 50 {
				m.T.Fatalf("the batch at %d keeps failing: %v", pos, m.Log[max(0, len(m.Log)-10):])
			}
		} else {
			stuck = 0
		}
		pos += resume
		if resume < len(b) {
			m.Log = append(m.Log, fmt.Sprintf("checkpoint at %d", pos))
		}
	}
}

// CreateStream creates a Kinesis stream of n shards and waits for it.
func CreateStream(t testing.TB, kin *kinesis.Client, name string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(n))}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// PutEnvelope puts env on the stream called name (partition key: its key)
// and returns it as Lambda hands it over: sequence number and arrival as
// Kinesis gave them, so a test can deliver it and a reader of the stream
// (package backlog) finds it there.
func PutEnvelope(t testing.TB, kin *kinesis.Client, name string, env stream.Envelope) events.KinesisEventRecord {
	t.Helper()
	ctx := context.Background()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	put, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(env.Key), Data: data})
	if err != nil {
		t.Fatal(err)
	}
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: put.ShardId,
		ShardIteratorType: kintypes.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: put.SequenceNumber})
	if err != nil {
		t.Fatal(err)
	}
	got, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil || len(got.Records) != 1 {
		t.Fatalf("reading back %s: %v %v", aws.ToString(put.SequenceNumber), got, err)
	}
	r := got.Records[0]
	seq := aws.ToString(r.SequenceNumber)
	return events.KinesisEventRecord{
		EventID: aws.ToString(put.ShardId) + ":" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
		EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/" + name,
		Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: env.Key, Data: r.Data,
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}},
	}
}

// ReadAll reads every record's data from every shard of a stream.
func ReadAll(t testing.TB, kin *kinesis.Client, name string) [][]byte {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId,
			ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				out = append(out, r.Data)
			}
			if len(page.Records) == 0 || aws.ToInt64(page.MillisBehindLatest) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return out
}

// Stream is an output stream in memory, for scenarios on memdb: it keeps
// every record put on it, copies included, in the order they were put, as
// ReadAll reads a stream of moto's.
type Stream struct {
	mu   sync.Mutex
	data [][]byte
}

// PutRecords keeps every record of the call.
func (s *Stream) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(0)}
	for _, e := range in.Records {
		s.data = append(s.data, append([]byte(nil), e.Data...))
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{
			SequenceNumber: aws.String(fmt.Sprint(len(s.data))), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

// Records returns every record's data put so far, in order.
func (s *Stream) Records() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.data...)
}

// Seeds says which seeded scenarios a fault-injection test runs: seeds
// First to First+N-1 on the in-process store ("memdb"), and the first
// Moto of them on moto too ("moto"), so that memdb cannot drift from it.
// Test and Package name the test and its package (./pkg/x) for the
// one-line command a failing scenario prints.
type Seeds struct {
	Test, Package  string
	First, N, Moto int
}

// Run runs run(t, backend, seed) for each seed on each backend, as
// parallel subtests named <backend>/seed-<n>; a failing one logs the
// command that runs it alone.
func (s Seeds) Run(t *testing.T, run func(t *testing.T, backend string, seed int)) {
	for _, b := range []struct {
		backend string
		n       int
	}{{"moto", min(s.Moto, s.N)}, {"memdb", s.N}} {
		t.Run(b.backend, func(t *testing.T) {
			t.Parallel()
			for seed := s.First; seed < s.First+b.n; seed++ {
				t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
					t.Parallel()
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("run this scenario alone: go test -count=1 -run '^%s$/^%s$/^seed-%d$' %s -args -fault.seed=%d",
								s.Test, b.backend, seed, s.Package, seed)
						}
					})
					run(t, b.backend, seed)
				})
			}
		})
	}
}

// EventRecord is the Kinesis event record Lambda would hand a consumer of
// the events stream for env, put with its key at sequence number seq of
// shard.
func EventRecord(shard string, seq int, env stream.Envelope) events.KinesisEventRecord {
	data, _ := json.Marshal(env)
	n := strconv.Itoa(seq)
	return events.KinesisEventRecord{EventID: shard + ":" + n, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
		EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
		Kinesis: events.KinesisRecord{SequenceNumber: n, PartitionKey: env.Key, Data: data,
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: env.ReceivedAt}}}
}

// Distinct describes the distinct outputs on a stream, one line each
// (describe's), sorted, failing t when one id comes with two contents:
// an output emitted again must be the same bytes.
func Distinct(t testing.TB, recs [][]byte, describe func(env *stream.Envelope, raw []byte) string) []string {
	t.Helper()
	byID := map[string]string{}
	var out []string
	for _, b := range recs {
		var env stream.Envelope
		if err := stream.Unmarshal(b, &env); err != nil {
			t.Fatalf("output %s: %v", b, err)
		}
		if prev, ok := byID[env.ID]; ok {
			if prev != string(b) {
				t.Errorf("output id %s emitted with two contents:\n%s\n%s", env.ID, prev, b)
			}
			continue
		}
		byID[env.ID] = string(b)
		out = append(out, describe(&env, b))
	}
	sort.Strings(out)
	return out
}
