package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// beforeUnlist runs hook once, just before the first write that takes a
// window off the open-windows index: the moment the ticker has emitted a
// final result and not yet unlisted it.
type beforeUnlist struct {
	*dynamodb.Client
	once sync.Once
	hook func()
}

func (b *beforeUnlist) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.UpdateExpression != nil && strings.HasPrefix(*in.UpdateExpression, "REMOVE") {
		b.once.Do(b.hook)
	}
	return b.Client.UpdateItem(ctx, in, opts...)
}

// A window's lifecycle logs each revision once, so summing countDelta over
// the result lines (the top-keys query and rule) counts each event once:
// nothing while open; the final result once although the ticker and the
// aggregate handler both finalize and emit it (the handler's batch runs
// after the ticker emitted, before it unlisted); a correction once; and
// nothing more when Lambda redelivers the batches.
func TestWindowLifecycleLogsEachResultOnce(t *testing.T) {
	r := newOnceRun(t, "resultonce", `{"name":"once","key":"key","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`)
	ctx, rec, send, base := context.Background(), r.rec, r.send, r.base
	kLines := func() []map[string]any { lines, _, _ := r.resultsOf("k"); return lines }

	// Open: k's window [10:00, 10:01) holds two events; nothing logged.
	first := []record{rec(1, "k", 10*time.Second), rec(2, "k", 20*time.Second)}
	send(first...)
	if l := kLines(); len(l) != 0 {
		t.Fatalf("an open window logged results: %v", l)
	}

	// Final: the ticker finalizes the idle shard and emits; before it
	// unlists, the handler's next batch finalizes the same window (found
	// final already) and emits it too.
	raced := false
	ticker := r.processor(state.NewViews(&beforeUnlist{Client: db, hook: func() {
		raced = true
		send(rec(3, "z", 2*time.Minute))
	}}, r.table, r.cfg.Aggregates))
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(time.Hour + time.Minute)} {
		if _, err := ticker.Tick(ctx, at); err != nil {
			t.Fatalf("tick: %v", err)
		}
	}
	if !raced {
		t.Fatal("the ticker unlisted nothing: no race was set up")
	}

	// Correction: a late event of k (correct policy) and, Lambda
	// redelivering, the first batch and the late one again.
	late := rec(4, "k", 30*time.Second)
	send(late)
	send(first...)
	send(late)

	lines, seen, sum := r.resultsOf("k")
	id := "once/k/tumbling:1m0s/2026-11-29T10:00:00.000Z/2026-11-29T10:01:00.000Z/"
	want := map[string]int{id + "r1": 1, id + "r2": 1}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("result lines of k by id %v, want %v (each revision once): %v", seen, want, lines)
	}
	if sum != 3 {
		t.Errorf("countDelta over k's result lines sums to %v, want 3 (k's events): %v", sum, lines)
	}
}

// beforeSessionClear runs hook once, just before the first write of a
// keyed state after a session window item was written: the moment a
// finalizer has written and sent a session's final result and not yet
// taken it out of the state's pending results.
type beforeSessionClear struct {
	*dynamodb.Client
	mu    sync.Mutex
	wrote bool
	once  sync.Once
	hook  func()
}

func (b *beforeSessionClear) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	sk := ""
	if v, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok {
		sk = v.Value
	}
	b.mu.Lock()
	fire := strings.HasSuffix(sk, "|~state") && b.wrote
	if strings.HasPrefix(sk, "session") && !strings.HasSuffix(sk, "|~state") {
		b.wrote = true
	}
	b.mu.Unlock()
	if fire {
		b.once.Do(b.hook)
	}
	return b.Client.UpdateItem(ctx, in, opts...)
}

// A session's final result is logged once although two finalizers race on
// its key's state: the ticker writes and sends it, and before its save
// takes it out of the state's pending results, the handler's next batch
// finalizes the same state, finds it pending, sends it again (the same id)
// and clears it. The ticker's save then conflicts and reloads a state
// without it: it does not log it a second time, so summing countDelta
// counts the session's events once. Before, each finalizer logged what it
// sent.
func TestSessionFinalLoggedOnceWhenFinalizersRace(t *testing.T) {
	r := newOnceRun(t, "sessiononce", `{"name":"sonce","key":"key","windows":[{"kind":"session","gap":"30s"}],
	  "aggregates":["count"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"1h","partitionKeyIsGroupingKey":true}`)
	ctx, rec, send, base := context.Background(), r.rec, r.send, r.base
	send(rec(1, "k", 10*time.Second), rec(2, "k", 20*time.Second))

	raced := false
	ticker := r.processor(state.NewViews(&beforeSessionClear{Client: db, hook: func() {
		raced = true
		send(rec(3, "z", 5*time.Minute)) // its watermark closes k's session too
	}}, r.table, r.cfg.Aggregates))
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(time.Hour + time.Minute)} {
		if _, err := ticker.Tick(ctx, at); err != nil {
			t.Fatalf("tick: %v", err)
		}
	}
	if !raced {
		t.Fatal("the ticker wrote no session window before a state save: no race was set up")
	}
	lines, seen, sum := r.resultsOf("k")
	if len(seen) != 1 {
		t.Fatalf("k's result lines by id %v, want one session: %v", seen, lines)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("k's session %s logged %d times, want once: %v", id, n, lines)
		}
	}
	if sum != 2 {
		t.Errorf("countDelta over k's result lines sums to %v, want 2 (k's events): %v", sum, lines)
	}
}

// onceRun is what the log-once tests share: a pipeline's processor on a
// table of its own, its result lines (both functions' log groups, as the
// query reads them) in logs, and records of one shard at offsets from base.
type onceRun struct {
	t     *testing.T
	cfg   *pipeline.Config
	table string
	logs  lockedBuffer
	p     *aggregate.Processor
	base  time.Time
}

func newOnceRun(t *testing.T, prefix, doc string) *onceRun {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r := &onceRun{t: t, cfg: cfg, table: fmt.Sprintf("%s-%d", prefix, tableSeq.Add(1)), base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	if err := state.CreateTable(context.Background(), db, r.table); err != nil {
		t.Fatal(err)
	}
	r.p = r.processor(state.NewViews(db, r.table, cfg.Aggregates))
	return r
}

// processor is a processor of the run's pipeline on views (the ticker's,
// its client with a hook), logging to r.logs.
func (r *onceRun) processor(views *state.Views) *aggregate.Processor {
	return aggregate.New(r.cfg, views, nil, "", aggregate.WithLogger(slog.New(slog.NewJSONHandler(&r.logs, nil))))
}

func (r *onceRun) rec(seq int, key string, offset time.Duration) record {
	at := r.base.Add(offset)
	return record{shard: "shardId-000000000000", seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: key,
		OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{}`)}}
}

// send hands the run's processor a batch, which must succeed whole.
func (r *onceRun) send(recs ...record) {
	r.t.Helper()
	resp, err := r.p.HandleBatch(context.Background(), kinesisEvent(recs))
	if err != nil || len(resp.BatchItemFailures) > 0 {
		r.t.Fatalf("batch: %+v %v", resp, err)
	}
}

// resultsOf is key's result lines, how many there are of each id, and
// their countDelta summed.
func (r *onceRun) resultsOf(key string) (lines []map[string]any, byID map[string]int, countDelta float64) {
	byID = map[string]int{}
	for _, l := range r.logs.resultLines(r.t) {
		if l["key"] == key {
			lines = append(lines, l)
			byID[l["id"].(string)]++
			countDelta += l["countDelta"].(float64)
		}
	}
	return lines, byID, countDelta
}
