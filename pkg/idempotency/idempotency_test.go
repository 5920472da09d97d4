package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

var tableSeq atomic.Int64

// TestStore runs the store's cases against one stand-in, each on its own table.
func TestStore(t *testing.T) {
	srv := standintest.Start(t)
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	cases := []struct {
		name string
		run  func(t *testing.T, db *dynamodb.Client, table string)
	}{
		{"duplicate returns the stored result and runs once", testDuplicateReturnsStoredResultAndRunsOnce},
		{"concurrent duplicates run once", testConcurrentDuplicatesRunOnce},
		{"crash before completion runs again after the lock expires", testCrashBeforeCompletionRunsAgainAfterTheLockExpires},
		{"expired record runs again", testExpiredRecordRunsAgain},
		{"payload mismatch", testPayloadMismatch},
		{"function error deletes the record", testFunctionErrorDeletesTheRecord},
		{"a failure after a takeover leaves the new holder's record", testFailureAfterTakeoverKeepsTheNewLock},
		{"missing key", testMissingKey},
		{"completion is marked after the context ends", testCompletionAfterContextEnds},
		{"a slow completion gets the time the context has left", testSlowCompletionGetsTheTimeLeft},
		{"a result too large to keep is not kept, the completion is", testResultTooLargeToKeep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("idem%d", tableSeq.Add(1))
			if err := CreateTable(context.Background(), db, name); err != nil {
				t.Fatal(err)
			}
			c.run(t, db, name)
		})
	}
}

func newStore(t *testing.T, db recordStore, table string, cfg Config, opts ...Option) *Store {
	t.Helper()
	if cfg.FunctionName == "" {
		cfg.FunctionName = "worker"
	}
	s, err := New(db, table, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func getRecord(t *testing.T, db *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// counter is a side effect that counts its runs and returns a result naming
// the run.
type counter struct{ n atomic.Int32 }

func (c *counter) fn(ctx context.Context) ([]byte, error) {
	n := c.n.Add(1)
	return []byte(fmt.Sprintf(`{"run":%d}`, n)), nil
}

func testDuplicateReturnsStoredResultAndRunsOnce(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, db, table, Config{KeyPath: "data.orderId"})
	var c counter
	ctx := context.Background()
	first, err := s.Do(ctx, []byte(`{"id":"m1","data":{"orderId":"o-1","qty":2}}`), c.fn)
	if err != nil {
		t.Fatal(err)
	}
	// Same order id, different envelope id: the same key.
	second, err := s.Do(ctx, []byte(`{"id":"m2","data":{"qty":2,"orderId":"o-1"}}`), c.fn)
	if err != nil {
		t.Fatal(err)
	}
	if c.n.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", c.n.Load())
	}
	if string(first) != `{"run":1}` || string(second) != string(first) {
		t.Errorf("results %s and %s, want {\"run\":1} twice", first, second)
	}
	key, _ := s.Key([]byte(`{"data":{"orderId":"o-1"}}`))
	rec := getRecord(t, db, table, key)
	if str(rec, AttrStatus) != StatusCompleted || str(rec, AttrData) != `{"run":1}` {
		t.Errorf("record %v, want COMPLETED with the result", rec)
	}
	if _, ok := rec[AttrInProgressExpiration]; ok {
		t.Error("a COMPLETED record keeps in_progress_expiration")
	}
	if !strings.HasPrefix(key, "worker#") || len(key) != len("worker#")+64 {
		t.Errorf("key %q, want worker#<sha256 hex>", key)
	}
	// Another order runs.
	if _, err := s.Do(ctx, []byte(`{"data":{"orderId":"o-2"}}`), c.fn); err != nil || c.n.Load() != 2 {
		t.Errorf("another key: err %v, runs %d, want nil, 2", err, c.n.Load())
	}
}

func testConcurrentDuplicatesRunOnce(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, db, table, Config{KeyPath: "body"})
	payload := []byte(`{"body":"task-7"}`)
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context) ([]byte, error) {
		runs.Add(1)
		<-release
		return []byte(`"done"`), nil
	}
	const n = 6
	var wg sync.WaitGroup
	results := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Do(context.Background(), payload, fn)
			results[i], errs[i] = string(r), err
		}()
	}
	// The ones that lost the race return ErrInProgress at once; then let
	// the winner finish.
	time.Sleep(300 * time.Millisecond)
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", runs.Load())
	}
	var done, inProgress int
	for i := range n {
		switch {
		case errs[i] == nil && results[i] == `"done"`:
			done++
		case errors.Is(errs[i], ErrInProgress):
			inProgress++
		default:
			t.Errorf("call %d: %q, %v; want the result or ErrInProgress", i, results[i], errs[i])
		}
	}
	if done < 1 || inProgress < 1 {
		t.Errorf("%d got the result, %d ErrInProgress; want at least one of each", done, inProgress)
	}
	// After completion every duplicate gets the result.
	r, err := s.Do(context.Background(), payload, fn)
	if err != nil || string(r) != `"done"` {
		t.Errorf("after completion: %q, %v", r, err)
	}
}

// failingUpdates passes every request to the stand-in except UpdateItem,
// which fails: the invocation "dies" after the side effect, before the
// COMPLETED mark. A real endpoint cannot be made to lose one request.
type failingUpdates struct{ *dynamodb.Client }

func (failingUpdates) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errors.New("invocation timed out")
}

func testCrashBeforeCompletionRunsAgainAfterTheLockExpires(t *testing.T, db *dynamodb.Client, table string) {
	now := time.Now()
	clock := func() time.Time { return now }
	payload := []byte(`{"data":{"orderId":"o-9"}}`)
	cfg := Config{KeyPath: "data.orderId"}
	var c counter

	// The first invocation has 30s left; it runs the side effect and dies.
	crashing := newStore(t, failingUpdates{db}, table, cfg, WithClock(clock))
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(30*time.Second))
	defer cancel()
	_, err := crashing.Do(ctx, payload, c.fn)
	var pe *PersistenceError
	if !errors.As(err, &pe) || pe.Op != "save completed" {
		t.Fatalf("err %v, want a PersistenceError saving completed", err)
	}
	key, _ := crashing.Key(payload)
	rec := getRecord(t, db, table, key)
	if str(rec, AttrStatus) != StatusInProgress || str(rec, AttrInProgressExpiration) != fmt.Sprint(now.Add(30*time.Second).UnixMilli()) {
		t.Fatalf("record %v, want INPROGRESS until the deadline in ms", rec)
	}

	s := newStore(t, db, table, cfg, WithClock(clock))
	// A redelivery while the dead invocation's deadline has not passed: locked.
	if _, err := s.Do(context.Background(), payload, c.fn); !errors.Is(err, ErrInProgress) {
		t.Fatalf("before the deadline: %v, want ErrInProgress", err)
	}
	// After it: the side effect runs again (Powertools' documented behaviour).
	now = now.Add(31 * time.Second)
	r, err := s.Do(context.Background(), payload, c.fn)
	if err != nil || string(r) != `{"run":2}` || c.n.Load() != 2 {
		t.Fatalf("after the deadline: %s, %v, runs %d; want run 2", r, err, c.n.Load())
	}
}

func testExpiredRecordRunsAgain(t *testing.T, db *dynamodb.Client, table string) {
	now := time.Now()
	s := newStore(t, db, table, Config{Expires: time.Minute}, WithClock(func() time.Time { return now }))
	var c counter
	payload := []byte(`{"x":1}`)
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{
		{0, `{"run":1}`},
		{59 * time.Second, `{"run":1}`}, // still stored
		{2 * time.Second, `{"run":2}`},  // expired (61s): runs again
		{30 * time.Second, `{"run":2}`}, // the new record lives from its completion
	} {
		now = now.Add(step.advance)
		r, err := s.Do(context.Background(), payload, c.fn)
		if err != nil || string(r) != step.want {
			t.Fatalf("at +%v: %s, %v; want %s", step.advance, r, err, step.want)
		}
	}
}

func testPayloadMismatch(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, db, table, Config{KeyPath: "data.orderId", ValidationPath: "data.amount"})
	var c counter
	ctx := context.Background()
	if _, err := s.Do(ctx, []byte(`{"data":{"orderId":"o-1","amount":10}}`), c.fn); err != nil {
		t.Fatal(err)
	}
	_, err := s.Do(ctx, []byte(`{"data":{"orderId":"o-1","amount":99}}`), c.fn)
	var pm *PayloadMismatchError
	if !errors.As(err, &pm) {
		t.Fatalf("err %v, want *PayloadMismatchError", err)
	}
	key, _ := s.Key([]byte(`{"data":{"orderId":"o-1"}}`))
	if pm.Key != key || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "data.amount") {
		t.Errorf("error %q should name key %s and the field", err, key)
	}
	// ... and say what to do: other work under a new data.orderId, after
	// which this one may be reused.
	if !strings.Contains(err.Error(), "new value of payload field data.orderId") || pm.Until.IsZero() || !strings.Contains(err.Error(), pm.Until.UTC().Format(time.RFC3339)) {
		t.Errorf("error %q should say to send other work under a new data.orderId, and until when the key is taken", err)
	}
	// The same amount is a plain duplicate.
	if r, err := s.Do(ctx, []byte(`{"data":{"orderId":"o-1","amount":10}}`), c.fn); err != nil || string(r) != `{"run":1}` {
		t.Errorf("duplicate: %s, %v", r, err)
	}
	if c.n.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", c.n.Load())
	}
}

func testFunctionErrorDeletesTheRecord(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, db, table, Config{})
	payload := []byte(`{"task":"t-1"}`)
	boom := errors.New("downstream unavailable")
	_, err := s.Do(context.Background(), payload, func(context.Context) ([]byte, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want fn's error", err)
	}
	key, _ := s.Key(payload)
	if rec := getRecord(t, db, table, key); rec != nil {
		t.Fatalf("record left behind: %v", rec)
	}
	var c counter
	if r, err := s.Do(context.Background(), payload, c.fn); err != nil || string(r) != `{"run":1}` {
		t.Errorf("retry: %s, %v; want fn to run", r, err)
	}
}

// testFailureAfterTakeoverKeepsTheNewLock: invocation A's lock expires
// while its fn still runs (fn ends with the deadline it was given: exactly
// when the lock does), and B takes the key over. When A's fn then fails,
// A must not delete B's INPROGRESS record: a third delivery would run the
// side effect beside B.
func testFailureAfterTakeoverKeepsTheNewLock(t *testing.T, db *dynamodb.Client, table string) {
	t0 := time.Now()
	payload := []byte(`{"data":{"orderId":"o-7"}}`)
	cfg := Config{KeyPath: "data.orderId"}
	a := newStore(t, db, table, cfg, WithClock(func() time.Time { return t0 }))
	later := func() time.Time { return t0.Add(31 * time.Second) }
	b := newStore(t, db, table, cfg, WithClock(later))
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(30*time.Second))
	defer cancel()

	started, release, bDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var c counter
	_, err := a.Do(ctx, payload, func(context.Context) ([]byte, error) {
		go func() {
			_, err := b.Do(context.Background(), payload, func(ctx context.Context) ([]byte, error) {
				close(started)
				<-release
				return c.fn(ctx)
			})
			bDone <- err
		}()
		<-started
		return nil, context.DeadlineExceeded
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("A: %v, want its fn's error", err)
	}
	// A third delivery while B runs: B holds the key.
	third := newStore(t, db, table, cfg, WithClock(later))
	_, err = third.Do(context.Background(), payload, c.fn)
	close(release)
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	if !errors.Is(err, ErrInProgress) || c.n.Load() != 1 {
		t.Errorf("a delivery while B holds the key: %v, side effect ran %d times; want ErrInProgress and 1 run", err, c.n.Load())
	}
}

func testMissingKey(t *testing.T, db *dynamodb.Client, table string) {
	payload := []byte(`{"data":{}}`)
	var c counter
	// Powertools' default: run without idempotency.
	lax := newStore(t, db, table, Config{KeyPath: "data.orderId"})
	for range 2 {
		if _, err := lax.Do(context.Background(), payload, c.fn); err != nil {
			t.Fatal(err)
		}
	}
	if c.n.Load() != 2 {
		t.Errorf("fn ran %d times without a key, want 2", c.n.Load())
	}
	strict := newStore(t, db, table, Config{KeyPath: "data.orderId", RequireKey: true})
	_, err := strict.Do(context.Background(), payload, c.fn)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Path != "data.orderId" || c.n.Load() != 2 {
		t.Errorf("err %v, runs %d; want *KeyError for data.orderId and no run", err, c.n.Load())
	}
}

func TestNewRequiresAFunctionName(t *testing.T) {
	if _, err := New(nil, "t", Config{}); err == nil || !strings.Contains(err.Error(), "FunctionName") {
		t.Errorf("New without FunctionName: %v", err)
	}
}

// testCompletionAfterContextEnds: the deadline passes while fn runs (its
// side effect done); the COMPLETED mark is still written, so a redelivery
// gets the result instead of running fn again.
func testCompletionAfterContextEnds(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, db, table, Config{})
	payload := []byte(`{"task":"late"}`)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := s.Do(ctx, payload, func(context.Context) ([]byte, error) {
		cancel()
		return []byte(`"done"`), nil
	})
	if err != nil || string(r) != `"done"` {
		t.Fatalf("Do = %s, %v; want the result", r, err)
	}
	var c counter
	if r, err := s.Do(context.Background(), payload, c.fn); err != nil || string(r) != `"done"` || c.n.Load() != 0 {
		t.Errorf("redelivery: %s, %v, runs %d; want the stored result and no run", r, err, c.n.Load())
	}
}

// slowUpdates is the stand-in's table answering UpdateItem only after delay
// (a throttled or busy table), as no endpoint can be made to on demand.
type slowUpdates struct {
	*dynamodb.Client
	delay time.Duration
}

func (s slowUpdates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(s.delay):
	}
	return s.Client.UpdateItem(ctx, in, optFns...)
}

// The COMPLETED mark waits for a table slower than completionTimeout when
// the invocation has time left: giving up would leave the side effect
// unrecorded and the message back only after the visibility timeout.
func testSlowCompletionGetsTheTimeLeft(t *testing.T, db *dynamodb.Client, table string) {
	s := newStore(t, slowUpdates{db, completionTimeout + 500*time.Millisecond}, table, Config{})
	payload := []byte(`{"task":"slow table"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*completionTimeout)
	defer cancel()
	var c counter
	if r, err := s.Do(ctx, payload, c.fn); err != nil {
		t.Fatalf("Do = %s, %v; want the result, marked completed", r, err)
	}
	var again counter
	if _, err := s.Do(context.Background(), payload, again.fn); err != nil || again.n.Load() != 0 {
		t.Errorf("redelivery: %v, runs %d; want the stored result and no run", err, again.n.Load())
	}
}

// testResultTooLargeToKeep: fn's result (500 KB) would take the COMPLETED
// record past DynamoDB's 400 KB item. The call gets it, the record is
// COMPLETED without it, and a duplicate call does not run fn again (it
// gets no result): the side effect is not repeated.
func testResultTooLargeToKeep(t *testing.T, db *dynamodb.Client, table string) {
	ctx := context.Background()
	s := newStore(t, db, table, Config{})
	big := []byte(strings.Repeat("r", 500<<10))
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return big, nil }
	got, err := s.Do(ctx, []byte(`{"id":"big"}`), fn)
	if err != nil || len(got) != len(big) {
		t.Fatalf("first call: %d bytes, %v; want the whole result", len(got), err)
	}
	key, err := s.Key([]byte(`{"id":"big"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := getRecord(t, db, table, key)
	if str(rec, AttrStatus) != StatusCompleted || rec[AttrData] != nil {
		t.Fatalf("record %s, data kept %v; want COMPLETED without the result", str(rec, AttrStatus), rec[AttrData] != nil)
	}
	got, err = s.Do(ctx, []byte(`{"id":"big"}`), fn)
	if err != nil || got != nil || runs != 1 {
		t.Fatalf("duplicate call: %d bytes, %v, fn ran %d times; want no result and one run", len(got), err, runs)
	}
}
