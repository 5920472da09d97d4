package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// died is what a killed invocation panics with here: nothing after the
// death point runs, as when Lambda stops a function at its deadline.
type died struct{ at deathPoint }

// deathPoint is where a try is killed: at the call-th call of op
// (PutItem, UpdateItem or PutRecords) in that try, before the call reaches
// the endpoint or after it has answered.
type deathPoint struct {
	op    string
	call  int
	after bool
}

func (d deathPoint) String() string {
	when := "before"
	if d.after {
		when = "after"
	}
	return fmt.Sprintf("%s %s #%d", when, d.op, d.call)
}

// dyingClients passes the request table's and the stream's calls on, and
// kills the try at its death point. No endpoint can be made to stop a
// caller between two calls.
type dyingClients struct {
	db    *dynamodb.Client
	kin   recordPutter
	at    *deathPoint // nil: the try lives
	calls map[string]int
}

// arm starts a try that dies at at (nil: lives).
func (d *dyingClients) arm(at *deathPoint) { d.at, d.calls = at, map[string]int{} }

func (d *dyingClients) enter(op string) {
	d.calls[op]++
	if d.at != nil && d.at.op == op && d.at.call == d.calls[op] && !d.at.after {
		panic(died{*d.at})
	}
}

func (d *dyingClients) leave(op string) {
	if d.at != nil && d.at.op == op && d.at.call == d.calls[op] && d.at.after {
		panic(died{*d.at})
	}
}

func (d *dyingClients) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.enter("PutItem")
	out, err := d.db.PutItem(ctx, in, opts...)
	d.leave("PutItem")
	return out, err
}

func (d *dyingClients) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.enter("UpdateItem")
	out, err := d.db.UpdateItem(ctx, in, opts...)
	d.leave("UpdateItem")
	return out, err
}

func (d *dyingClients) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.enter("GetItem")
	out, err := d.db.GetItem(ctx, in, opts...)
	d.leave("GetItem")
	return out, err
}

func (d *dyingClients) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	d.enter("PutRecords")
	out, err := d.kin.PutRecords(ctx, in, opts...)
	d.leave("PutRecords")
	return out, err
}

// try sends req as one invocation whose deadline is deadline, and reports
// whether it was killed.
func try(h *Handler, req events.LambdaFunctionURLRequest, deadline time.Time) (resp events.LambdaFunctionURLResponse, killed bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(died); !ok {
				panic(r)
			}
			killed = true
		}
	}()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	resp, _ = h.Handle(ctx, req)
	return resp, false
}

// tryStep is one try of a request before its last: it dies at die (nil:
// it lives and answers want), with e2 throttled through it if throttle.
type tryStep struct {
	die      *deathPoint
	throttle bool
	want     int
	// held: the dead try holds the key, so a retry before its deadline
	// gets 409 (false where it died after storing an answer).
	held bool
}

func dieAt(op string, call int, after bool) *deathPoint {
	return &deathPoint{op: op, call: call, after: after}
}

// TestIdempotencyKeyDeathAtEachStep kills a keyed request of 3 events (e2
// throttled on the first try, so the first answer is 429 and its retry a
// resume) at each step a try can die at, then retries it after the dead
// try's lock has expired, until it is answered. The last answer is the one
// a request that never died gets, a further retry replays it, and the
// stream holds each event once: twice only where a try died after Kinesis
// took events and before its record could say so. Those copies carry the
// same key, id and content, and aggregate's suppression by event id counts
// each event once.
func TestIdempotencyKeyDeathAtEachStep(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	kin, db := kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	sent := []string{"e0", "e1", "e2"}
	body := batchOf(sent...)
	const key = `"0b6f4c1e-death-at-each-step"`

	// The answer of the same request that never died.
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("death-reference"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := idempotency.CreateTable(ctx, db, "death-reference"); err != nil {
		t.Fatal(err)
	}
	ref, _ := New(kin, "death-reference", WithRoutes(testRoutes), WithIdempotency(NewRequestStore(db, "death-reference"), 0),
		WithLogger(slog.New(slog.DiscardHandler))).Handle(ctx, keyed("/orders", key, body))
	if ref.StatusCode != http.StatusAccepted {
		t.Fatalf("reference: %d %s", ref.StatusCode, ref.Body)
	}

	first := tryStep{throttle: true, want: http.StatusTooManyRequests} // e2 throttled: PARTIAL, pending 2
	cases := []struct {
		name  string
		steps []tryStep
		// twice are the events a try wrote and died before its record
		// said so: the next try writes them again.
		twice []string
	}{
		{name: "first try, after claiming the key",
			steps: []tryStep{{die: dieAt("PutItem", 1, true), throttle: true, held: true}}},
		{name: "first try, before Kinesis takes its PutRecords",
			steps: []tryStep{{die: dieAt("PutRecords", 1, false), throttle: true, held: true}}},
		{name: "first try, after its PutRecords, before its answer is stored",
			steps: []tryStep{{die: dieAt("PutRecords", 1, true), throttle: true, held: true}},
			twice: []string{"e0", "e1"}},
		{name: "first try, while storing its partial answer",
			steps: []tryStep{{die: dieAt("UpdateItem", 1, false), throttle: true, held: true}},
			twice: []string{"e0", "e1"}},
		{name: "first try, after storing its partial answer",
			steps: []tryStep{{die: dieAt("UpdateItem", 1, true), throttle: true}}},
		{name: "resume, after taking the key",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 1, true), held: true}}},
		{name: "resume, throttled until killed at its deadline (issue 21)",
			steps: []tryStep{first, {die: dieAt("PutRecords", 2, false), throttle: true, held: true}}},
		{name: "resume, after its PutRecords, before its answer is stored",
			steps: []tryStep{first, {die: dieAt("PutRecords", 1, true), held: true}},
			twice: []string{"e2"}},
		{name: "resume, while storing its answer",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 2, false), held: true}},
			twice: []string{"e2"}},
		{name: "resume, after storing its answer",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 2, true)}}},
		{name: "resume throttled again, after storing its partial answer",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 2, true), throttle: true}}},
		{name: "takeover of a dead resume, after taking the key",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 1, true), held: true}, {die: dieAt("UpdateItem", 1, true), held: true}}},
		{name: "takeover of a dead resume, after its PutRecords",
			steps: []tryStep{first, {die: dieAt("UpdateItem", 1, true), held: true}, {die: dieAt("PutRecords", 1, true), held: true}},
			twice: []string{"e2"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := idemEnv{kin: kin, db: db, stream: fmt.Sprintf("death-events-%d", i), name: fmt.Sprintf("death-requests-%d", i)}
			if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.stream), ShardCount: aws.Int32(2)}); err != nil {
				t.Fatal(err)
			}
			if err := idempotency.CreateTable(ctx, db, e.name); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			throttler := &throttlingPutter{real: kin, throttle: map[string]bool{"e2": true}}
			clients := &dyingClients{db: db, kin: throttler}
			store := NewRequestStore(clients, e.name)
			store.now = func() time.Time { return now }
			h := New(clients, e.stream, WithRoutes(testRoutes), WithIdempotency(store, 0),
				WithLogger(slog.New(slog.DiscardHandler)), WithRetry(4, time.Millisecond, 5*time.Millisecond))
			req := keyed("/orders", key, body)
			const invokeTimeout = 10 * time.Second

			for n, s := range c.steps {
				throttler.throttleCalls = 0
				if s.throttle {
					throttler.throttleCalls = 1 << 30
				}
				clients.arm(s.die)
				r, killed := try(h, req, now.Add(invokeTimeout))
				clients.arm(nil)
				throttler.throttleCalls = 0
				switch {
				case s.die != nil && !killed:
					t.Fatalf("try %d did not reach its death point (%s): %d %s", n+1, s.die, r.StatusCode, r.Body)
				case s.die == nil && r.StatusCode != s.want:
					t.Fatalf("try %d: %d %s, want %d", n+1, r.StatusCode, r.Body, s.want)
				}
				if s.held {
					if r, _ := try(h, req, now.Add(invokeTimeout)); r.StatusCode != http.StatusConflict {
						t.Fatalf("before the dead try %d's deadline: %d %s, want 409", n+1, r.StatusCode, r.Body)
					}
				}
				now = now.Add(invokeTimeout + time.Second) // past the dead try's lock
			}

			last, _ := try(h, req, now.Add(invokeTimeout))
			if last.StatusCode != ref.StatusCode || last.Body != ref.Body || last.Headers["Content-Type"] != ref.Headers["Content-Type"] {
				t.Errorf("last answer %d %s, want the answer of a request that never died: %d %s", last.StatusCode, last.Body, ref.StatusCode, ref.Body)
			}
			again, _ := try(h, req, now.Add(invokeTimeout))
			if again.StatusCode != ref.StatusCode || again.Body != ref.Body || again.Headers[HeaderReplayed] != "true" {
				t.Errorf("a retry of the answered request: %d %v %s, want the answer replayed", again.StatusCode, again.Headers, again.Body)
			}

			want := each(sent, 1)
			for _, id := range c.twice {
				want[id] = 2
			}
			if got := onStream(t, e); !reflect.DeepEqual(got, want) {
				t.Errorf("stream holds %v, want %v", got, want)
			}
			if len(c.twice) > 0 {
				if got := countedByAggregate(t, e, db, fmt.Sprintf("death-views-%d", i)); !reflect.DeepEqual(got, each(sent, 1)) {
					t.Errorf("aggregate counts %v, want each event once: suppression by event id misses ingest's copies", got)
				}
			}
		})
	}
}

// countedByAggregate runs the stream's records, shard by shard, through an
// aggregate pipeline that suppresses producer duplicates by event id (its
// default), with its state in table, and returns how many events each
// window counted, by event id (each event has its own key).
func countedByAggregate(t *testing.T, e idemEnv, db *dynamodb.Client, table string) map[string]int {
	t.Helper()
	ctx := context.Background()
	cfg, err := pipeline.Parse([]byte(`{"name":"idem","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
		"aggregates":["count"],"outOfOrderness":"1s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DedupeHorizon <= 0 {
		t.Fatalf("the pipeline's dedupeHorizon is %s: suppression by id is off", cfg.DedupeHorizon)
	}
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(db, table, cfg.Aggregates)
	proc := aggregate.New(cfg, views, nil, "", aggregate.WithLogger(slog.New(slog.DiscardHandler)),
		aggregate.WithDedupe(aggregate.NewLedger(db, table, cfg)))
	shards, err := e.kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{} // key → event id
	for _, sh := range shards.Shards {
		var batch events.KinesisEvent
		it, err := e.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			recs, err := e.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs.Records {
				seq := aws.ToString(rec.SequenceNumber)
				batch.Records = append(batch.Records, events.KinesisEventRecord{
					EventID: aws.ToString(sh.ShardId) + ":" + seq, EventSource: "aws:kinesis",
					EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/" + e.stream,
					Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: aws.ToString(rec.PartitionKey), Data: rec.Data,
						ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(rec.ApproximateArrivalTimestamp)}},
				})
				keys[aws.ToString(rec.PartitionKey)] = ""
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
		if len(batch.Records) == 0 {
			continue
		}
		resp, err := proc.HandleBatch(ctx, batch)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("aggregate on %s: %v %v", aws.ToString(sh.ShardId), resp.BatchItemFailures, err)
		}
	}
	for _, ev := range readStream(t, e.kin, e.stream) {
		keys[ev.Key] = ev.ID
	}
	got := map[string]int{}
	for k, id := range keys {
		vs, err := views.Query(ctx, cfg.Name, k, cfg.Windows[0].ID(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			got[id] += int(v.Result.Count)
		}
	}
	return got
}

// racingTable runs beforeUpdate once, just before the first UpdateItem it
// passes on: another request's write landing between a claim's read and
// its write, which no endpoint can be made to order.
type racingTable struct {
	*dynamodb.Client
	beforeUpdate func()
}

func (r *racingTable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f := r.beforeUpdate; f != nil {
		r.beforeUpdate = nil
		f()
	}
	return r.Client.UpdateItem(ctx, in, opts...)
}

// TestTakeoverResumesFromTheLastStoredAnswer: a resume outlives its lock
// and stores its (partial) answer just as a retry takes the key over. The
// retry resumes from that answer, not from the pending indexes it read
// before: it never writes what the answer says is on the stream.
func TestTakeoverResumesFromTheLastStoredAnswer(t *testing.T) {
	srv := standintest.Start(t)
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	ctx := context.Background()
	const table = "takeover-race"
	if err := idempotency.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	racing := &racingTable{Client: db}
	store := NewRequestStore(racing, table)
	store.now = func() time.Time { return now }
	id, fp := recordID("anonymous", "/orders", "race-1"), fingerprint([]byte(batchOf("e0", "e1", "e2")))
	const lock = 10 * time.Second

	first, err := store.Claim(ctx, id, fp, now, now.Add(lock), time.Hour)
	if err != nil || first.kind != claimNew {
		t.Fatalf("first claim: %+v %v", first, err)
	}
	partial := storedResponse{Status: http.StatusTooManyRequests, Body: `{"events":3,"accepted":1,"failed":2}`}
	if err := store.Complete(ctx, first, partial, []int{1, 2}, time.Hour); err != nil {
		t.Fatal(err)
	}
	slow, err := store.Claim(ctx, id, fp, now, now.Add(lock), time.Hour)
	if err != nil || slow.kind != claimResume || !reflect.DeepEqual(slow.pending, []int{1, 2}) {
		t.Fatalf("resume: %+v %v, want pending [1 2]", slow, err)
	}

	now = now.Add(lock + time.Second) // the slow resume's lock has expired
	later := storedResponse{Status: http.StatusTooManyRequests, Body: `{"events":3,"accepted":2,"failed":1}`}
	racing.beforeUpdate = func() {
		if err := store.Complete(ctx, slow, later, []int{2}, time.Hour); err != nil {
			t.Errorf("the slow resume's answer: %v", err)
		}
	}
	takeover, err := store.Claim(ctx, id, fp, now, now.Add(lock), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if takeover.kind != claimResume || !reflect.DeepEqual(takeover.pending, []int{2}) || takeover.stored.Body != later.Body {
		t.Errorf("takeover: kind %d, pending %v, previous answer %s; want a resume of [2] on top of %s",
			takeover.kind, takeover.pending, takeover.stored.Body, later.Body)
	}
	if err := store.Complete(ctx, slow, later, nil, time.Hour); !errors.Is(err, ErrLockLost) {
		t.Errorf("the slow resume storing again after the takeover: %v, want ErrLockLost", err)
	}
}
