package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// kin is the stand-in's Kinesis, set by TestMain.
var kin *kinesis.Client

// flakyStream is the output stream on the stand-in, except that it throttles
// the next refuse PutRecords calls whole (as Kinesis does under load, or a
// timeout would): the fault no endpoint can be made to show on demand. It
// counts the calls that reached the stream and the records they put.
type flakyStream struct {
	*kinesis.Client
	mu             sync.Mutex
	refuse         int
	calls, records int
}

func (s *flakyStream) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	if s.refuse > 0 {
		s.refuse--
		s.mu.Unlock()
		return nil, &kintypes.ProvisionedThroughputExceededException{Message: aws.String("injected: the output stream throttled the call")}
	}
	s.mu.Unlock()
	out, err := s.Client.PutRecords(ctx, in, opts...)
	if err == nil {
		s.mu.Lock()
		s.calls++
		s.records += len(in.Records)
		s.mu.Unlock()
	}
	return out, err
}

func (s *flakyStream) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = n
}

func (s *flakyStream) counts() (calls, records int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.records
}

// countingDB counts the views table's UpdateItem calls (and how many a
// condition refused) and its queries.
type countingDB struct {
	*dynamodb.Client
	mu                     sync.Mutex
	updates, failed, reads int
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates++
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		c.failed++
	}
	return out, err
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Client.Query(ctx, in, opts...)
}

func (c *countingDB) snapshot() (updates, failed, reads int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates, c.failed, c.reads
}

// publishConfig: one tumbling minute, late records corrected for an hour.
const publishConfig = `{"name":"pub","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`

const pubShard = "shardId-000000000000"

var pubBase = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// pubWindow is the id prefix of k's window [10:00, 10:01).
const pubWindow = "pub/k/tumbling:1m0s/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z/"

// publishFixture is a pipeline writing to a views table and a real output
// stream on the stand-in, through a flaky stream and a counting client.
type publishFixture struct {
	t      *testing.T
	cfg    *pipeline.Config
	table  string
	stream string
	out    *flakyStream
	db     *countingDB
	views  *state.Views
	logs   lockedBuffer
	logger *slog.Logger
}

func newPublishFixture(t *testing.T) *publishFixture {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(publishConfig))
	if err != nil {
		t.Fatal(err)
	}
	n := tableSeq.Add(1)
	f := &publishFixture{t: t, cfg: cfg, table: fmt.Sprintf("publish-%d", n), stream: fmt.Sprintf("publish-results-%d", n)}
	if err := state.CreateTable(context.Background(), db, f.table); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, f.stream, 1)
	f.out = &flakyStream{Client: kin}
	f.db = &countingDB{Client: db}
	f.views = state.NewViews(f.db, f.table, cfg.Aggregates)
	f.logger = slog.New(slog.NewJSONHandler(&f.logs, nil))
	return f
}

// processor is a cold start of the aggregate (or ticker) function.
func (f *publishFixture) processor() *aggregate.Processor {
	return aggregate.New(f.cfg, f.views, f.out, f.stream, aggregate.WithLogger(f.logger))
}

func (f *publishFixture) rec(seq int, key string, offset time.Duration) record {
	at := pubBase.Add(offset)
	return record{shard: pubShard, seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
		OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}}
}

// batch delivers recs and reports whether the batch succeeded entirely (no
// error, no item failures), as Lambda would judge it.
func (f *publishFixture) batch(p *aggregate.Processor, recs ...record) bool {
	f.t.Helper()
	resp, err := p.HandleBatch(context.Background(), kinesisEvent(recs))
	return err == nil && len(resp.BatchItemFailures) == 0
}

func (f *publishFixture) mustBatch(p *aggregate.Processor, recs ...record) {
	f.t.Helper()
	if !f.batch(p, recs...) {
		f.t.Fatalf("batch %v failed", recs)
	}
}

// outputs reads the output stream: k's records by id, each id's copies
// checked to be the same bytes.
func (f *publishFixture) outputs() (byID map[string]aggregate.Output, copies map[string]int, order []string) {
	f.t.Helper()
	byID, copies = map[string]aggregate.Output{}, map[string]int{}
	raw := map[string]string{}
	for _, data := range keyedtest.ReadAll(f.t, kin, f.stream) {
		var o aggregate.Output
		if err := json.Unmarshal(data, &o); err != nil {
			f.t.Fatalf("output %q: %v", data, err)
		}
		if o.Key != "k" {
			continue
		}
		if prev, ok := raw[o.ID]; ok && prev != string(data) {
			f.t.Errorf("two records with id %s differ:\n%s\n%s", o.ID, prev, data)
		}
		if _, ok := raw[o.ID]; !ok {
			order = append(order, o.ID)
		}
		raw[o.ID] = string(data)
		byID[o.ID] = o
		copies[o.ID]++
	}
	return byID, copies, order
}

// logged counts k's result log lines by id and sums their countDelta.
func (f *publishFixture) logged() (map[string]int, float64) {
	seen := map[string]int{}
	var sum float64
	for _, l := range f.logs.resultLines(f.t) {
		if l["key"] != "k" {
			continue
		}
		seen[l["id"].(string)]++
		sum += l["countDelta"].(float64)
	}
	return seen, sum
}

// stored reads k's window: it must be final at revision and hold count,
// its result published, or pending (still to be published).
func (f *publishFixture) stored(revision int, count uint64, pending bool) {
	f.t.Helper()
	vs, err := f.views.Query(context.Background(), "pub", "k", "tumbling:1m0s", pubBase, pubBase.Add(time.Minute))
	if err != nil {
		f.t.Fatal(err)
	}
	if len(vs) != 1 || !vs[0].Final || vs[0].Revision != revision || vs[0].Result.Count != count || vs[0].Pending != pending {
		f.t.Fatalf("k's window %+v, want final at revision %d with count %d, pending %v", vs, revision, count, pending)
	}
}

// wantOutputs checks k's records on the stream: exactly the ids of want,
// once each, r1 a final result of 2 and r2 a correction to 3 retracting 2;
// and each logged once, countDelta summing to k's events.
func (f *publishFixture) wantOutputs(want ...string) {
	f.t.Helper()
	byID, copies, order := f.outputs()
	if fmt.Sprint(order) != fmt.Sprint(want) {
		f.t.Fatalf("k's outputs on the stream, in order: %v, want %v", order, want)
	}
	for id, n := range copies {
		if n != 1 {
			f.t.Errorf("%s is on the stream %d times, want once", id, n)
		}
	}
	if o, ok := byID[pubWindow+"r1"]; ok && (o.Kind != "final" || o.Result.Count != 2 || o.Previous != nil) {
		f.t.Errorf("r1 = %+v, want the final result, count 2", o)
	}
	if o, ok := byID[pubWindow+"r2"]; ok && (o.Kind != "correction" || o.Result.Count != 3 || o.Previous == nil || o.Previous.Count != 2) {
		f.t.Errorf("r2 = %+v, want a correction to count 3 retracting count 2", o)
	}
	seen, sum := f.logged()
	wantSeen := map[string]int{}
	var wantSum float64
	for _, id := range want {
		wantSeen[id] = 1
	}
	if len(want) > 0 {
		wantSum = 2 + float64(len(want)-1)
	}
	if fmt.Sprint(seen) != fmt.Sprint(wantSeen) || sum != wantSum {
		f.t.Errorf("k's result lines by id %v (countDelta sum %v), want %v (sum %v)", seen, sum, wantSeen, wantSum)
	}
}

// A correction whose emission fails is applied (the views table has it)
// and stays pending in its window item: the batch fails, and its retry —
// which finds the correction applied and writes nothing — publishes it,
// however many emissions fail first; later redeliveries add nothing. The
// stream ends with one record per revision, the log with one line each.
func TestCorrectionReachesStreamAfterFailedEmit(t *testing.T) {
	for _, refusals := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-refused", refusals), func(t *testing.T) {
			f := newPublishFixture(t)
			p := f.processor()
			// k's window [10:00, 10:01) holds 2; z's record moves the
			// watermark past it: final, r1 on the stream.
			f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second), f.rec(3, "z", 70*time.Second))
			f.wantOutputs(pubWindow + "r1")

			late := f.rec(4, "k", 5*time.Second)
			f.out.arm(refusals)
			for i := 0; i < refusals; i++ {
				if f.batch(p, late) {
					t.Fatalf("attempt %d: the stream refused the correction, yet the batch succeeded", i+1)
				}
				f.stored(2, 3, true) // applied at once, pending publication
			}
			f.mustBatch(p, late) // the retry that gets through
			f.mustBatch(p, late) // response lost: redelivered
			f.mustBatch(f.processor(), late)
			f.stored(2, 3, false)
			f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
		})
	}
}

// A correction whose emission failed and whose batch is never retried by
// this process (a crash, a cold start, retries exhausted) is published by
// the ticker, which finds its window listed.
func TestTickerPublishesPendingCorrection(t *testing.T) {
	f := newPublishFixture(t)
	p := f.processor()
	f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second), f.rec(3, "z", 70*time.Second))
	f.out.arm(1)
	if f.batch(p, f.rec(4, "k", 5*time.Second)) {
		t.Fatal("the stream refused the correction, yet the batch succeeded")
	}
	f.wantOutputs(pubWindow + "r1")
	ticker := f.processor()
	if _, err := ticker.Tick(context.Background(), pubBase.Add(time.Hour)); err != nil {
		t.Fatalf("tick: %v", err)
	}
	f.stored(2, 3, false)
	f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
	// Published once: the next tick finds nothing to publish.
	if _, err := ticker.Tick(context.Background(), pubBase.Add(time.Hour+time.Minute)); err != nil {
		t.Fatalf("tick: %v", err)
	}
	f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
}

// A final result whose emission fails fails the batch that finalized it;
// the retry publishes it although its watermark no longer moves (the
// process remembers the shard's finalization failed), and only once.
func TestFinalResultReachesStreamAfterFailedEmit(t *testing.T) {
	f := newPublishFixture(t)
	p := f.processor()
	f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second))
	closing := f.rec(3, "z", 70*time.Second)
	f.out.arm(2)
	for i := 0; i < 2; i++ {
		if f.batch(p, closing) {
			t.Fatalf("attempt %d: the stream refused the final result, yet the batch succeeded", i+1)
		}
	}
	f.wantOutputs()
	f.mustBatch(p, closing)
	f.mustBatch(p, closing)
	f.stored(1, 2, false)
	f.wantOutputs(pubWindow + "r1")
}

// A correction waits for the window's previous result: the ticker made k's
// window final and failed to emit it; a late record for k then publishes
// that final result before it applies and publishes its correction, so the
// stream carries r1 then r2 and the log sums to k's events.
func TestCorrectionPublishesUnpublishedResultFirst(t *testing.T) {
	f := newPublishFixture(t)
	p := f.processor()
	f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second))
	ticker := f.processor()
	// The first tick notes the shard idle; the second advances its
	// watermark past k's window and finalizes it.
	if _, err := ticker.Tick(context.Background(), pubBase.Add(time.Hour)); err != nil {
		t.Fatalf("tick: %v", err)
	}
	f.out.arm(1)
	if _, err := ticker.Tick(context.Background(), pubBase.Add(time.Hour+time.Minute)); err == nil {
		t.Fatal("the stream refused the final result, yet the tick succeeded")
	}
	f.stored(1, 2, true)
	f.wantOutputs()
	// The handler's watermark is the batch's: the late record is routed to
	// an open window and meets it final in the store.
	f.mustBatch(p, f.rec(4, "k", 5*time.Second))
	f.stored(2, 3, false)
	f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
}

// On the per-interval path the flush's corrections are published too, and
// a failed emission fails the final invocation, whose retry (same state)
// publishes them once.
func TestIntervalCorrectionReachesStream(t *testing.T) {
	f := newPublishFixture(t)
	p := f.processor()
	ctx := context.Background()
	interval := func(fail bool, recs ...record) {
		t.Helper()
		win := events.TimeWindowProperties{ShardID: pubShard}
		resp, err := p.HandleInterval(ctx, events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs), TimeWindowProperties: win})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("interval: %+v %v", resp, err)
		}
		win.State, win.IsFinalInvokeForWindow = resp.State, true
		final := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
		if fail {
			f.out.arm(1)
			if _, err := p.HandleInterval(ctx, final); err == nil {
				t.Fatal("the stream refused the flush's output, yet the final invocation succeeded")
			}
		}
		for i := 0; i < 2; i++ { // the retry, then a redelivery after success
			if resp, err := p.HandleInterval(ctx, final); err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("final invocation: %+v %v", resp, err)
			}
		}
	}
	interval(false, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second), f.rec(3, "z", 70*time.Second))
	f.wantOutputs(pubWindow + "r1")
	interval(true, f.rec(4, "k", 5*time.Second))
	f.stored(2, 3, false)
	f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
}

// The normal path pays for a correction's durability with one write: the
// late record's batch makes the refused open-window write, the correction
// and its listing, then one write marks it published; the stream
// gets one PutRecords per batch with one record per result; a final
// result costs what it did (finalize, one PutRecords, one unlist).
func TestPublishRequestsInTheNormalPath(t *testing.T) {
	f := newPublishFixture(t)
	p := f.processor()
	f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second))
	u0, _, r0 := f.db.snapshot()
	f.mustBatch(p, f.rec(3, "z", 70*time.Second))
	u1, failed1, r1 := f.db.snapshot()
	if calls, records := f.out.counts(); calls != 1 || records != 1 {
		t.Errorf("finalizing one window: %d PutRecords carrying %d records, want 1 and 1", calls, records)
	}
	// z's window write and its listing, the watermark, k's finalization
	// and its unlist; one query of the open-windows index (keyed states)
	// and one of the listings.
	if u1-u0 != 5 || failed1 != 0 || r1-r0 != 2 {
		t.Errorf("the closing batch made %d UpdateItem (%d refused) and %d queries, want 5 (0) and 2", u1-u0, failed1, r1-r0)
	}
	// The refused open-window write, the correction, its window's listing
	// (for the ticker, should publishing fail) and the unlist; and, the
	// batch holding only the late record, which does not move the
	// watermark, the shard's position (the ticker's backlog check).
	f.mustBatch(p, f.rec(4, "k", 5*time.Second))
	u2, failed2, r2 := f.db.snapshot()
	if u2-u1 != 5 || failed2-failed1 != 1 || r2 != r1 {
		t.Errorf("the correcting batch made %d UpdateItem (%d refused) and %d queries, want 5 (1 refused) and none", u2-u1, failed2-failed1, r2-r1)
	}
	if calls, records := f.out.counts(); calls != 2 || records != 2 {
		t.Errorf("after the correction: %d PutRecords carrying %d records, want 2 and 2", calls, records)
	}
	f.wantOutputs(pubWindow+"r1", pubWindow+"r2")
}

// documentedOutputID is the shape docs/windows.md gives a result's id.
const documentedOutputID = "<pipeline>/<key>/<kind>/<start>/<end>/r<revision>"

// TestOutputIDIsAsDocumented: the id a result has on the output stream,
// which consumers dedupe by, is the one docs/windows.md describes.
func TestOutputIDIsAsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/windows.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`"+documentedOutputID+"`") {
		t.Fatalf("docs/windows.md does not give a result's id as %s", documentedOutputID)
	}
	f := newPublishFixture(t)
	p := f.processor()
	f.mustBatch(p, f.rec(1, "k", time.Second), f.rec(2, "k", 2*time.Second), f.rec(3, "z", 70*time.Second))
	byID, _, _ := f.outputs()
	if len(byID) != 1 {
		t.Fatalf("k's outputs %v, want its window's final result", byID)
	}
	for id, o := range byID {
		want := strings.NewReplacer("<pipeline>", o.Pipeline, "<key>", o.Key, "<kind>", o.Window,
			"<start>", o.Start.UTC().Format("2006-01-02T15:04:05.000Z"), "<end>", o.End.UTC().Format("2006-01-02T15:04:05.000Z"),
			"<revision>", strconv.Itoa(o.Revision)).Replace(documentedOutputID)
		if id != want {
			t.Errorf("id %s, want %s as docs/windows.md gives it", id, want)
		}
	}
}
