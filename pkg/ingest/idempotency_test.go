package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/idempotency"
)

func TestParseIdempotencyKey(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{in: `8e03978e-40d5-43e8-bc93-6894a57f9324`, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{in: ` "clkyoesmbgybucifusbbtdsbohtyuuwz" `, want: "clkyoesmbgybucifusbbtdsbohtyuuwz"},
		{in: `"a \"quoted\" key, with a comma"`, want: `a "quoted" key, with a comma`},
		{in: `order:2026/11/29+1=`, want: `order:2026/11/29+1=`},
		{in: ``, err: "is empty"},
		{in: `""`, err: "is empty"},
		{in: `"a", "b"`, err: "more than one value"},
		{in: `a,b`, err: "more than one value"},
		{in: `"abc`, err: "closing quote is missing"},
		{in: `"abc";p=1`, err: "parameters are not accepted"},
		{in: `"a\nb"`, err: `a backslash escapes only " and \`},
		{in: "\"caf\xc3\xa9\"", err: "byte 0xc3 is not printable ASCII"},
		{in: `key with spaces`, err: `byte 3 (' ') is not allowed`},
		{in: strings.Repeat("k", MaxIdempotencyKeyLength+1), err: "is 256 characters long; at most 255"},
	}
	for _, tt := range tests {
		got, err := parseIdempotencyKey(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parse(%q) = %q, %v; want an error containing %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parse(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// countingTable passes every call to the stand-in and counts them by
// operation: the test of "one conditional write per request, not per event".
type countingTable struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls map[string]int
	// failUpdates makes UpdateItem fail: the invocation dies after writing
	// the events, before storing the answer. No endpoint can be made to
	// lose one request.
	failUpdates bool
}

func (c *countingTable) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
}

func (c *countingTable) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	c.calls = nil
	return out
}

func (c *countingTable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem")
	return c.Client.PutItem(ctx, in, opts...)
}

func (c *countingTable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	if c.failUpdates {
		return nil, errors.New("invocation timed out")
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

func (c *countingTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.Client.GetItem(ctx, in, opts...)
}

// idemEnv is one case's stream and request table on the shared stand-in.
type idemEnv struct {
	kin    *kinesis.Client
	db     *dynamodb.Client
	table  *countingTable
	stream string
	name   string
}

func (e idemEnv) handler(putter recordPutter, opts ...Option) *Handler {
	if putter == nil {
		putter = e.kin
	}
	base := []Option{WithRoutes(testRoutes), WithIdempotency(NewRequestStore(e.table, e.name), 0),
		WithLogger(slog.New(slog.DiscardHandler)), WithRetry(4, time.Millisecond, 5*time.Millisecond)}
	return New(putter, e.stream, append(base, opts...)...)
}

func keyed(path, key, body string) events.LambdaFunctionURLRequest {
	r := postTo(path, body)
	r.Headers = map[string]string{"content-type": "application/json", "idempotency-key": key}
	return r
}

// TestIdempotencyKey runs the Idempotency-Key cases against one stand-in,
// each on its own stream and table.
func TestIdempotencyKey(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	kin, db := kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	cases := []struct {
		name string
		run  func(t *testing.T, e idemEnv)
	}{
		{"a retry gets the first answer byte for byte and writes nothing", testRetryReplaysTheFirstAnswer},
		{"the same key with another body is refused with 422", testSameKeyOtherBody},
		{"a request in flight under the key gets 409", testInFlight},
		{"a throttled request resumes: its retry writes only the rest", testResumeWritesOnlyTheRest},
		{"keys are scoped by route and caller", testKeysAreScoped},
		{"a crash before the answer is stored: 409 until the lock ends, then written again", testCrashBeforeTheAnswer},
		{"an expired key is a new request", testExpiredKey},
		{"a resume and a takeover stamp the first try's receivedAt", testRetryKeepsTheFirstReceivedAt},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := idemEnv{kin: kin, db: db, table: &countingTable{Client: db}, stream: fmt.Sprintf("idem-events-%d", i), name: fmt.Sprintf("idem-requests-%d", i)}
			ctx := context.Background()
			if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.stream), ShardCount: aws.Int32(2)}); err != nil {
				t.Fatal(err)
			}
			if err := idempotency.CreateTable(ctx, db, e.name); err != nil {
				t.Fatal(err)
			}
			c.run(t, e)
		})
	}
}

// onStream counts the stream's records by event id.
func onStream(t *testing.T, e idemEnv) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range readStream(t, e.kin, e.stream) {
		out[ev.ID]++
	}
	return out
}

func ids(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func each(idList []string, n int) map[string]int {
	out := map[string]int{}
	for _, id := range idList {
		out[id] = n
	}
	return out
}

func testRetryReplaysTheFirstAnswer(t *testing.T, e idemEnv) {
	h := e.handler(nil)
	ctx := context.Background()
	sent := ids(3, "r")
	req := keyed("/", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, batchOf(sent...))
	first, err := h.Handle(ctx, req)
	if err != nil || first.StatusCode != http.StatusAccepted {
		t.Fatalf("first: %d %s %v", first.StatusCode, first.Body, err)
	}
	if first.Headers[HeaderReplayed] != "" {
		t.Error("the first answer says it is a replay")
	}
	if got := e.table.snapshot(); !reflect.DeepEqual(got, map[string]int{"PutItem": 1, "UpdateItem": 1}) {
		t.Errorf("first request made %v, want one conditional PutItem and one UpdateItem", got)
	}
	// The same request again, and with the key as a bare token: the stored
	// answer, byte for byte, and nothing written.
	bare := keyed("/", `8e03978e-40d5-43e8-bc93-6894a57f9324`, batchOf(sent...))
	for i, r := range []events.LambdaFunctionURLRequest{req, req, bare} {
		again, err := h.Handle(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if again.StatusCode != first.StatusCode || again.Body != first.Body || again.Headers["Content-Type"] != first.Headers["Content-Type"] {
			t.Errorf("retry %d: %d %q %v, want the first answer %d %q %v", i, again.StatusCode, again.Body, again.Headers, first.StatusCode, first.Body, first.Headers)
		}
		if again.Headers[HeaderReplayed] != "true" {
			t.Errorf("retry %d: no %s: true header", i, HeaderReplayed)
		}
	}
	if got := e.table.snapshot(); !reflect.DeepEqual(got, map[string]int{"PutItem": 3}) {
		t.Errorf("three retries made %v, want one (failed) conditional PutItem each and no read", got)
	}
	if got := onStream(t, e); !reflect.DeepEqual(got, each(sent, 1)) {
		t.Errorf("stream holds %v, want each event once", got)
	}

	// The record: COMPLETED, the answer, kept for a day.
	id := recordID("anonymous", "/", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.name), Key: map[string]ddbtypes.AttributeValue{idempotency.AttrID: str(id)}})
	if err != nil || out.Item == nil {
		t.Fatalf("record %s: %v %v", id, out, err)
	}
	if getS(out.Item, idempotency.AttrStatus) != idempotency.StatusCompleted || getS(out.Item, idempotency.AttrData) != first.Body || getN(out.Item, attrStatusCode) != "202" {
		t.Errorf("record %v, want COMPLETED with the answer", out.Item)
	}
	if _, ok := out.Item[idempotency.AttrInProgressExpiration]; ok {
		t.Error("a completed record keeps its lock")
	}
	var exp int64
	fmt.Sscan(getN(out.Item, idempotency.AttrExpiration), &exp)
	if d := time.Until(time.Unix(exp, 0)); d < DefaultIdempotencyExpiry-time.Minute || d > DefaultIdempotencyExpiry {
		t.Errorf("record expires in %s, want %s", d, DefaultIdempotencyExpiry)
	}

	// 300 events cost the same two writes as 3.
	many := ids(300, "m")
	if r, _ := h.Handle(ctx, keyed("/", "many-1", batchOf(many...))); r.StatusCode != 202 {
		t.Fatalf("300 events: %d %s", r.StatusCode, r.Body)
	}
	if got := e.table.snapshot(); !reflect.DeepEqual(got, map[string]int{"PutItem": 1, "UpdateItem": 1}) {
		t.Errorf("a request of 300 events made %v, want the same two writes as one of 3", got)
	}
}

func testSameKeyOtherBody(t *testing.T, e idemEnv) {
	h := e.handler(nil)
	ctx := context.Background()
	if r, _ := h.Handle(ctx, keyed("/", "k-422", batchOf("a", "b"))); r.StatusCode != 202 {
		t.Fatalf("first: %d %s", r.StatusCode, r.Body)
	}
	r, _ := h.Handle(ctx, keyed("/", "k-422", batchOf("a", "b", "c")))
	if r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("another body under the key: %d %s, want 422", r.StatusCode, r.Body)
	}
	var er ErrorResponse
	if err := json.Unmarshal([]byte(r.Body), &er); err != nil || !strings.Contains(er.Error, `Idempotency-Key "k-422" was used for a request with a different body`) {
		t.Errorf("422 body %s: want it to name the key and say the body differs", r.Body)
	}
	if got := onStream(t, e); !reflect.DeepEqual(got, each([]string{"a", "b"}, 1)) {
		t.Errorf("stream holds %v, want a and b once, c never", got)
	}
}

// blockingPutter holds the first PutRecords call until released: the one
// mock here, to keep a request in flight.
type blockingPutter struct {
	real    *kinesis.Client
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (p *blockingPutter) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.once.Do(func() {
		close(p.entered)
		<-p.release
	})
	return p.real.PutRecords(ctx, in, opts...)
}

func testInFlight(t *testing.T, e idemEnv) {
	p := &blockingPutter{real: e.kin, entered: make(chan struct{}), release: make(chan struct{})}
	h := e.handler(p)
	req := keyed("/", `"in-flight-1"`, batchOf("x", "y"))
	done := make(chan events.LambdaFunctionURLResponse)
	go func() {
		r, _ := h.Handle(context.Background(), req)
		done <- r
	}()
	<-p.entered
	r, _ := h.Handle(context.Background(), req)
	if r.StatusCode != http.StatusConflict || r.Headers["Retry-After"] == "" || !strings.Contains(r.Body, "still being processed") {
		t.Errorf("while in flight: %d %v %s, want 409 with Retry-After", r.StatusCode, r.Headers, r.Body)
	}
	close(p.release)
	first := <-done
	if first.StatusCode != 202 {
		t.Fatalf("first: %d %s", first.StatusCode, first.Body)
	}
	after, _ := h.Handle(context.Background(), req)
	if after.StatusCode != 202 || after.Body != first.Body {
		t.Errorf("after it completed: %d %s, want the first answer %s", after.StatusCode, after.Body, first.Body)
	}
	if got := onStream(t, e); !reflect.DeepEqual(got, each([]string{"x", "y"}, 1)) {
		t.Errorf("stream holds %v, want x and y once", got)
	}
}

// countingPutter counts the entries sent per event id.
type countingPutter struct {
	recordPutter
	mu   sync.Mutex
	sent []int // entries per call
}

func (p *countingPutter) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.mu.Lock()
	p.sent = append(p.sent, len(in.Records))
	p.mu.Unlock()
	return p.recordPutter.PutRecords(ctx, in, opts...)
}

func testResumeWritesOnlyTheRest(t *testing.T, e idemEnv) {
	sent := ids(9, "o")
	throttle := map[string]bool{sent[1]: true, sent[4]: true, sent[8]: true}
	tp := &throttlingPutter{real: e.kin, throttle: throttle, throttleCalls: 4} // the backpressure route's 4 tries
	p := &countingPutter{recordPutter: tp}
	h := e.handler(p)
	req := keyed("/orders", "resume-1", batchOf(sent...))
	first, _ := h.Handle(context.Background(), req)
	if first.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first: %d %s, want 429", first.StatusCode, first.Body)
	}
	var r Response
	_ = json.Unmarshal([]byte(first.Body), &r)
	if r.Accepted != 6 || r.Failed != 3 || len(r.Failures) != 3 || r.Failures[0].Index != 1 || r.Failures[1].Index != 4 || r.Failures[2].Index != 8 {
		t.Fatalf("429 body %s, want failures at 1, 4, 8", first.Body)
	}
	p.sent = nil
	// The producer resends the same request with the same key: only the
	// three are written, and the answer is for the whole request.
	second, _ := h.Handle(context.Background(), req)
	if second.StatusCode != 202 {
		t.Fatalf("retry: %d %s", second.StatusCode, second.Body)
	}
	if !reflect.DeepEqual(p.sent, []int{3}) {
		t.Errorf("the retry sent %v entries per call, want one call of the 3 not accepted", p.sent)
	}
	r = Response{}
	_ = json.Unmarshal([]byte(second.Body), &r)
	if r.Events != 9 || r.Accepted != 9 || r.Failed != 0 || len(r.Failures) != 0 {
		t.Errorf("retry answer %s, want all 9 accepted", second.Body)
	}
	third, _ := h.Handle(context.Background(), req)
	if third.StatusCode != 202 || third.Body != second.Body || third.Headers[HeaderReplayed] != "true" {
		t.Errorf("third: %d %s, want the completed answer replayed", third.StatusCode, third.Body)
	}
	if got := onStream(t, e); !reflect.DeepEqual(got, each(sent, 1)) {
		t.Errorf("stream holds %v, want each event once", got)
	}
}

func testKeysAreScoped(t *testing.T, e idemEnv) {
	h := e.handler(nil)
	as := func(req events.LambdaFunctionURLRequest, user string) events.LambdaFunctionURLRequest {
		req.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/" + user},
		}
		return req
	}
	for _, req := range []events.LambdaFunctionURLRequest{
		keyed("/", "shared", batchOf("s1")),
		keyed("/orders", "shared", batchOf("s1")),
		as(keyed("/", "shared", batchOf("s1")), "alice"),
		as(keyed("/", "shared", batchOf("s1")), "bob"),
	} {
		if r, _ := h.Handle(context.Background(), req); r.StatusCode != 202 || r.Headers[HeaderReplayed] != "" {
			t.Errorf("%s as %v: %d %v, want a new request", req.RawPath, req.RequestContext.Authorizer, r.StatusCode, r.Headers)
		}
	}
	if got := onStream(t, e); got["s1"] != 4 {
		t.Errorf("s1 is on the stream %d times, want 4 (one per route and caller)", got["s1"])
	}
}

func testCrashBeforeTheAnswer(t *testing.T, e idemEnv) {
	now := time.Now()
	clock := func() time.Time { return now }
	store := NewRequestStore(e.table, e.name)
	store.now = clock
	h := e.handler(nil, WithIdempotency(store, 0))
	req := keyed("/", "crash-1", batchOf("c1", "c2"))
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
	defer cancel()
	e.table.failUpdates = true
	first, _ := h.Handle(ctx, req)
	e.table.failUpdates = false
	if first.StatusCode != 202 {
		t.Fatalf("first: %d %s, want 202: the events are written even if the answer is not stored", first.StatusCode, first.Body)
	}
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != http.StatusConflict {
		t.Errorf("before the dead request's deadline: %d %s, want 409", r.StatusCode, r.Body)
	}
	now = now.Add(11 * time.Second)
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != 202 || r.Headers[HeaderReplayed] != "" {
		t.Errorf("after it: %d %v %s, want the request run again", r.StatusCode, r.Headers, r.Body)
	}
	if got := onStream(t, e); !reflect.DeepEqual(got, each([]string{"c1", "c2"}, 2)) {
		t.Errorf("stream holds %v, want each twice (the documented cost of a crash between the write and the answer)", got)
	}
}

func testExpiredKey(t *testing.T, e idemEnv) {
	now := time.Now()
	store := NewRequestStore(e.table, e.name)
	store.now = func() time.Time { return now }
	h := e.handler(nil, WithIdempotency(store, time.Hour))
	req := keyed("/", "expiring", batchOf("x1"))
	var replays atomic.Int32
	for _, step := range []time.Duration{0, 59 * time.Minute, 2 * time.Minute} {
		now = now.Add(step)
		r, _ := h.Handle(context.Background(), req)
		if r.StatusCode != 202 {
			t.Fatalf("at +%s: %d %s", step, r.StatusCode, r.Body)
		}
		if r.Headers[HeaderReplayed] == "true" {
			replays.Add(1)
		}
	}
	if replays.Load() != 1 {
		t.Errorf("%d replays, want 1 (at 59 min; at 61 min the key has expired)", replays.Load())
	}
	if got := onStream(t, e); got["x1"] != 2 {
		t.Errorf("x1 is on the stream %d times, want 2", got["x1"])
	}
}

// testRetryKeepsTheFirstReceivedAt: the body of a retry with the same key
// is the first try's, sentAt included, so its events must carry the first
// try's receivedAt: stamped with the retry's, an event resent an hour later
// would have its event time (occurredAt + receivedAt − sentAt) moved an
// hour late.
func testRetryKeepsTheFirstReceivedAt(t *testing.T, e idemEnv) {
	first := time.Now().UTC().Truncate(time.Millisecond)
	now := first
	clock := func() time.Time { return now }
	store := NewRequestStore(e.table, e.name)
	store.now = clock

	// A resume: two of three events throttled to the end, resent an hour
	// later with the same key.
	sent := ids(3, "rt")
	tp := &throttlingPutter{real: e.kin, throttle: map[string]bool{sent[0]: true, sent[2]: true}, throttleCalls: 4}
	h := e.handler(tp, WithIdempotency(store, 0), WithClock(clock))
	req := keyed("/orders", "recv-1", batchOf(sent...))
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first: %d %s, want 429", r.StatusCode, r.Body)
	}
	now = first.Add(time.Hour)
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != 202 {
		t.Fatalf("resume: %d %s, want 202", r.StatusCode, r.Body)
	}

	// A takeover: the first try died after writing, before its answer was
	// stored; its retry after the lock writes the events again.
	now = first
	h = e.handler(nil, WithIdempotency(store, 0), WithClock(clock))
	req = keyed("/", "recv-2", batchOf("tk1", "tk2"))
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
	defer cancel()
	e.table.failUpdates = true
	_, _ = h.Handle(ctx, req)
	e.table.failUpdates = false
	now = first.Add(time.Minute)
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != 202 {
		t.Fatalf("takeover: %d %s, want 202", r.StatusCode, r.Body)
	}

	envs := readStream(t, e.kin, e.stream)
	if len(envs) != 7 {
		t.Fatalf("%d records on the stream, want 7 (3 + 2 twice)", len(envs))
	}
	for _, env := range envs {
		if !env.ReceivedAt.Equal(first) {
			t.Errorf("event %s: receivedAt %s, want the first try's %s", env.ID, env.ReceivedAt.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
		}
	}
}

// TestIdempotencyKeyWithoutATable: a handler keeping no records refuses the
// header rather than ignore it.
func TestIdempotencyKeyWithoutATable(t *testing.T) {
	h := New(refusingPutter{t}, "events")
	r, _ := h.Handle(context.Background(), keyed("/", "k", batchOf("a")))
	if r.StatusCode != 400 || !strings.Contains(r.Body, "INGEST_IDEMPOTENCY_TABLE is not set") {
		t.Errorf("%d %s, want 400 naming INGEST_IDEMPOTENCY_TABLE", r.StatusCode, r.Body)
	}
	r, _ = h.Handle(context.Background(), keyed("/", `"a", "b"`, batchOf("a")))
	if r.StatusCode != 400 || !strings.Contains(r.Body, "Idempotency-Key header: holds more than one value") {
		t.Errorf("%d %s, want 400 naming the header", r.StatusCode, r.Body)
	}
}
