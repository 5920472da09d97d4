package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// pageFailer fails the n-th result page write it sees (counting from 1)
// while armed, as a throttle the SDK gave up on or a timeout would.
type pageFailer struct {
	*dynamodb.Client
	mu    sync.Mutex
	armed bool
	n     int
	seen  int
}

func (p *pageFailer) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "~page#") {
		p.mu.Lock()
		fail := false
		if p.armed {
			p.seen++
			if p.seen == p.n {
				fail, p.armed = true, false
			}
		}
		p.mu.Unlock()
		if fail {
			return nil, errors.New("injected: the page write timed out")
		}
	}
	return p.Client.UpdateItem(ctx, in, opts...)
}

// A flush that closes windows in several result pages (two window kinds,
// so at least two pages) and fails on its second page write leaves the
// first page created. Its retry meets that page (Duplicate, Resend) and
// does not log it: the write that created it must have logged its
// results. Each final result is logged exactly once.
func TestAFlushWhoseSecondPageFailsLogsTheFirstPagesResults(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	pf := &pageFailer{Client: db}
	logs := &lockedBuffer{}
	p, _ := pipelineOn(t, carryConfig("rvpf", true), func(cfg *pipeline.Config, table string) *state.Views {
		return state.NewViews(pf, table, cfg.Aggregates, state.WithClock(now))
	}, aggregate.WithClock(now), aggregate.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	f := &feed{t: t, p: p, base: base, clock: &clock}
	for m := range 6 {
		f.minute(m)
		f.flush()
	}
	f.minute(6) // closes [5m,6m) tumbling and [3m,6m) hopping: two pages at least
	st := f.state
	pf.mu.Lock()
	pf.armed, pf.n, pf.seen = true, 2, 0
	pf.mu.Unlock()
	ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: f.shardID(), State: st, IsFinalInvokeForWindow: true}}
	if _, err := p.HandleInterval(context.Background(), ev); err == nil {
		t.Fatal("the flush succeeded with its second page write failing")
	}
	f.state = st
	f.flush() // Lambda sends the final invocation again
	for _, key := range []string{"a", "b"} {
		lines := resultLinesOf(t, logs, key, base)
		for _, w := range []string{"final tumbling:1m0s 5m0s", "final hopping:3m0s:1m0s 3m0s"} {
			if n := lines[w]; n != 1 {
				t.Errorf("key %s: %d result lines of %s, want 1 (lines %v)", key, n, w, lines)
			}
		}
	}
}

// beforeWindowWrite runs hook once, just before the first write to a
// per-key item of a tumbling window starting at 10:07, then lets it through.
type beforeWindowWrite struct {
	*dynamodb.Client
	once sync.Once
	hook func()
}

func (b *beforeWindowWrite) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && !strings.HasPrefix(pk.Value, "~") {
		if sk, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "tumbling:1m0s|2026-11-29T10:07:00") {
			b.once.Do(b.hook)
		}
	}
	return b.Client.UpdateItem(ctx, in, opts...)
}

// crashSwitch fails writes as a dying process would: with failCarrySK set,
// the carry save of that chunk; with crashAfterCarrySK set, every window
// write (pk not "~") once that chunk's carry has been saved.
type crashSwitch struct {
	*dynamodb.Client
	mu                           sync.Mutex
	failCarrySK, crashAfterCarry string
	crashed                      bool
}

func (c *crashSwitch) set(failCarry, crashAfter string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failCarrySK, c.crashAfterCarry, c.crashed = failCarry, crashAfter, false
}

func (c *crashSwitch) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
	sk, _ := in.Key["sk"].(*types.AttributeValueMemberS)
	c.mu.Lock()
	isCarry := pk != nil && sk != nil && strings.HasPrefix(pk.Value, "~carry#")
	if isCarry && c.failCarrySK != "" && sk.Value == c.failCarrySK {
		c.mu.Unlock()
		return nil, errors.New("injected: the process died before its carry was saved")
	}
	if c.crashed && pk != nil && !strings.HasPrefix(pk.Value, "~") {
		c.mu.Unlock()
		return nil, errors.New("injected: the process died")
	}
	c.mu.Unlock()
	out, err := c.Client.UpdateItem(ctx, in, opts...)
	if err == nil && isCarry && c.crashAfterCarry != "" && sk.Value == c.crashAfterCarry {
		c.mu.Lock()
		c.crashed = true
		c.mu.Unlock()
	}
	return out, err
}

// The flush of an interval closes [6m,7m), whose records are all in the
// interval, in a result page (logged), and dies before its carry is saved.
// The mapping is then moved to per-batch (flushIntervalSeconds 0): Lambda
// sends the interval's records again as a batch. The instance that takes
// it writes the carry out (spillOnce, which marks it as one that left a
// carry: leftCarry) and dies before it applies the batch; a new instance
// takes the batch again. That instance found no carry, so its writes of
// [6m,7m) do not look in the pages (leftCarry is the process's, not the
// table's): it creates a's [6m,7m) item open, and finalizes it as a new
// r1, logged a second time. Each final result must be logged once.
func TestAPagedWindowSentAgainPerBatchToANewInstanceIsLoggedOnce(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	logs := &lockedBuffer{}
	cs := &crashSwitch{Client: db}
	var table string
	var cfg *pipeline.Config
	opts := []aggregate.Option{aggregate.WithClock(now), aggregate.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))),
		aggregate.WithShardLister(parentOf{feedShard, feedShard}, "events")}
	p, out := pipelineOn(t, carryConfig("rvpb", true), func(c *pipeline.Config, tbl string) *state.Views {
		table, cfg = tbl, c
		return state.NewViews(cs, tbl, c.Aggregates, state.WithClock(now))
	}, opts...)
	f := &feed{t: t, p: p, base: base, clock: &clock}
	for m := range 6 {
		f.minute(m)
		f.flush()
	}
	// Minute 6's records and one at 7m30s: the flush's watermark (7m25s)
	// closes [6m,7m), every record of it in this interval.
	recs := f.records(at{"a", 370, 13}, at{"b", 385, 1}, at{"a", 400, 14}, at{"b", 410, 1}, at{"z", 450, 1})
	resp, err := p.HandleInterval(context.Background(), events.KinesisTimeWindowEvent{KinesisEvent: recs,
		TimeWindowProperties: events.TimeWindowProperties{ShardID: feedShard, State: f.state}})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("interval: %v %v", resp, err)
	}
	cs.set(fmt.Sprintf("%s#%d", feedShard, state.PageBucket("a")), "")
	if state.PageBucket("a") == 0 {
		cs.set(feedShard, "")
	}
	final := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: feedShard, State: resp.State, IsFinalInvokeForWindow: true}}
	if _, err := p.HandleInterval(context.Background(), final); err == nil {
		t.Fatal("the flush succeeded with its carry save failing")
	}
	if n := resultLinesOf(t, logs, "a", base)["final tumbling:1m0s 6m0s"]; n != 1 {
		t.Fatalf("the flush that died logged a's [6m,7m) %d times, want 1 (in its page)", n)
	}
	// The mapping is per batch now; the first instance dies after writing
	// the carry out (chunk 0 is saved last).
	cs.set("", feedShard)
	p1 := aggregate.New(cfg, state.NewViews(cs, table, cfg.Aggregates, state.WithClock(now)), out, "results", opts...)
	if r, err := p1.HandleBatch(context.Background(), recs); err == nil && len(r.BatchItemFailures) == 0 {
		t.Fatal("the first per-batch instance did not die")
	}
	cs.set("", "")
	p2 := aggregate.New(cfg, state.NewViews(cs, table, cfg.Aggregates, state.WithClock(now)), out, "results", opts...)
	if r, err := p2.HandleBatch(context.Background(), recs); err != nil || len(r.BatchItemFailures) > 0 {
		t.Fatalf("batch on a new instance: %v %v", r, err)
	}
	for _, at := range []time.Duration{3 * time.Hour, 3*time.Hour + time.Minute} {
		clock = base.Add(at)
		if _, err := p2.Tick(context.Background(), clock); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a on the stream: %v", out.of("a", base))
	v := state.NewViews(db, table, cfg.Aggregates)
	for _, kind := range []string{"tumbling:1m0s", "hopping:3m0s:1m0s"} {
		vs, err := v.Query(context.Background(), cfg.Name, "a", kind, base, base.Add(time.Hour))
		for _, x := range vs {
			t.Logf("a %s %v final=%v r%d count %d pending=%v", kind, x.Window.Start.Sub(base), x.Final, x.Revision, x.Result.Count, x.Pending)
		}
		if err != nil {
			t.Log(err)
		}
	}
	if n := resultLinesOf(t, logs, "a", base)["final tumbling:1m0s 6m0s"]; n != 1 {
		t.Errorf("%d result lines of a's [6m,7m), want 1", n)
	}
}

// After a reshard the parent's flushes have closed [0s,1m) of key a in a
// result page. The child's first flush has no key of a's bucket, so it
// stores no carry chunk of that bucket: the parents' closed bound
// (spillParents) reaches only the chunks that flush stores. The child's
// next flush has a late record of a for [0s,1m) (policy correct): its
// chunk is a first carry again, with no closed bound, and the write does
// not look in the pages (Update.Paged unset). It creates a's item as a new
// r1 holding the late record alone, which Query takes over the page: the
// parent's records are gone from the view, and r1 is on the stream twice
// with two values. Before pages the parent's item was there to correct.
func TestAChildsLateRecordInAChunkItsFirstFlushDidNotStoreCorrectsThePage(t *testing.T) {
	const child = "shardId-000000000001"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	logs := &lockedBuffer{}
	p, out := pipelineOn(t, carryConfig("rvrc", true), viewsAt(now), aggregate.WithClock(now),
		aggregate.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))), aggregate.WithShardLister(parentOf{feedShard, child}, "events"))
	other := ""
	for _, k := range []string{"c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"} {
		if b := state.PageBucket(k); b != state.PageBucket("a") && b != state.PageBucket("b") {
			other = k
			break
		}
	}
	parent := &feed{t: t, p: p, base: base, clock: &clock}
	for m := range 3 {
		parent.minute(m) // a's [0s,1m) closes in a page at the second flush
		parent.flush()
	}
	kid := &feed{t: t, p: p, base: base, clock: &clock, shard: child, seq: parent.seq}
	kid.carry(at{other, 190, 1}) // the child's first flush: none of a's or b's bucket
	kid.flush()
	kid.carry(at{"a", 30, 100}, at{other, 250, 1}) // a late record of a's [0s,1m)
	kid.flush()
	got := strings.Join(out.of("a", base), "\n")
	if want := "correction [0s,1m0s) r2 count 3 sum 103"; !strings.Contains(got, want) {
		t.Errorf("key a's results:\n%s\nwant %q (the page's r1, count 2 sum 3, corrected)", got, want)
	}
	vs, err := p.Windows(context.Background(), "a", "tumbling:1m0s", base, base.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Result.Count != 3 {
		t.Errorf("a's [0s,1m) as read: %+v, want one window of count 3", vs)
	}
}
