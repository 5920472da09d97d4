package aggregate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// An interval on a shard with more keys than the window state holds the
// claims and points of: what does not fit is written as overflow items,
// and each key's ledger and session state are written once, at the flush.

const overflowPipeline = `{"name":"ovf","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"},{"kind":"session","gap":"30s"}],
  "aggregates":["count","sum"],"outOfOrderness":"5s"}`

// overflowRig is one pipeline on its own table, with its ledger and its
// metrics, rebuilt (a cold process) on the same table by restart.
type overflowRig struct {
	t      *testing.T
	cfg    *pipeline.Config
	table  string
	opts   []aggregate.Option
	p      *aggregate.Processor
	out    *outputLog
	emf    *bytes.Buffer
	state  map[string]string
	shard  string
	ledger int // LedgerWrites before the flush
}

func newOverflowRig(t *testing.T, opts ...aggregate.Option) *overflowRig {
	t.Helper()
	return newRigOf(t, overflowPipeline, opts...)
}

// newRigOf is an overflowRig of the pipeline spec.
func newRigOf(t *testing.T, spec string, opts ...aggregate.Option) *overflowRig {
	t.Helper()
	r := &overflowRig{t: t, opts: opts, out: &outputLog{}, emf: &bytes.Buffer{}, shard: feedShard}
	var err error
	if r.cfg, err = pipeline.Parse([]byte(spec)); err != nil {
		t.Fatal(err)
	}
	r.table = fmt.Sprintf("%s-%d", r.cfg.Name, tableSeq.Add(1))
	if err := state.CreateTable(context.Background(), db, r.table); err != nil {
		t.Fatal(err)
	}
	r.restart()
	return r
}

// restart is a new process on the same table: nothing kept in memory.
func (r *overflowRig) restart() {
	r.p = aggregate.New(r.cfg, state.NewViews(db, r.table, r.cfg.Aggregates), r.out, "results", append([]aggregate.Option{
		aggregate.WithLogger(quiet), aggregate.WithShardLister(parentOf{feedShard, feedShard}, "events"),
		aggregate.WithDedupe(aggregate.NewLedger(db, r.table, r.cfg)), aggregate.WithMetrics(metrics.New(r.emf, "aggregate")),
	}, r.opts...)...)
}

// invoke is one invocation of the open interval; it returns the state
// Lambda would pass to the next without keeping it (a retry sends the
// same state again).
func (r *overflowRig) invoke(recs []record) (map[string]string, error) {
	ev := events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs), TimeWindowProperties: events.TimeWindowProperties{ShardID: r.shard, State: r.state}}
	resp, err := r.p.HandleInterval(context.Background(), ev)
	if err == nil && len(resp.BatchItemFailures) > 0 {
		err = fmt.Errorf("item failures: %v", resp.BatchItemFailures)
	}
	return resp.State, err
}

func (r *overflowRig) carry(recs []record) {
	r.t.Helper()
	st, err := r.invoke(recs)
	if err != nil {
		r.t.Fatal(err)
	}
	r.state = st
}

func (r *overflowRig) flush() {
	r.t.Helper()
	r.ledger = int(emfSum(r.t, r.emf, "LedgerWrites"))
	ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: r.shard, State: r.state, IsFinalInvokeForWindow: true}}
	if _, err := r.p.HandleInterval(context.Background(), ev); err != nil {
		r.t.Fatalf("flush: %v", err)
	}
	r.state = nil
}

// overflowItems counts the table's overflow items.
func (r *overflowRig) overflowItems() int {
	r.t.Helper()
	n := 0
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(r.table), ExclusiveStartKey: start})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, it := range out.Items {
			if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok && state.IsOverflowItem(pk.Value) {
				n++
			}
		}
		if start = out.LastEvaluatedKey; start == nil {
			return n
		}
	}
}

// results are the outputs' values by id.
func (r *overflowRig) results() map[string]string {
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	got := map[string]string{}
	for id, o := range r.out.byID {
		got[id] = fmt.Sprintf("%s count=%d sum=%g", o.Kind, o.Result.Count, o.Result.Sum)
	}
	return got
}

// overflowRecords are n records from seq first on, over keys keys, seq
// seconds of event time from base (ids are their sequence numbers).
func overflowRecords(first, n, keys int, base time.Time) []record {
	recs := make([]record, n)
	for i := range recs {
		seq := first + i
		when := base.Add(time.Duration(seq) * time.Second)
		recs[i] = record{shard: feedShard, seq: seq, env: stream.Envelope{ID: fmt.Sprint(seq), Type: "v", Key: fmt.Sprintf("k%02d", seq%keys),
			OccurredAt: when, SentAt: when, ReceivedAt: when, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, seq%7))}}
	}
	return recs
}

func TestAnIntervalPastItsStateBudgetWritesOverflowAndEachKeyOnceAtTheFlush(t *testing.T) {
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	small := newOverflowRig(t, aggregate.WithCarriedBudget(600))
	whole := newOverflowRig(t)
	const keys = 30
	for i := 0; i < 6; i++ {
		recs := overflowRecords(1+i*60, 60, keys, base)
		for _, r := range []*overflowRig{small, whole} {
			r.carry(recs)
		}
		if i == 2 {
			small.restart() // a cold process reads the items the state names
		}
	}
	if small.overflowItems() == 0 {
		t.Fatal("the interval wrote no overflow item: its state held everything, and the test proves nothing")
	}
	if n := len(small.state["c|~ovf"]); n == 0 {
		t.Fatalf("the state names no overflow item: %v", small.state)
	}
	for _, r := range []*overflowRig{small, whole} {
		r.flush()
	}
	if small.ledger != 0 {
		t.Errorf("the interval wrote %d ledger items before its flush, want 0 (its claims go to overflow items)", small.ledger)
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%02d", i)
	}
	if got, want := emfSum(t, small.emf, "LedgerWrites"), float64(rangesOf(names)); got < want {
		t.Errorf("the flush wrote %v ledger items, want one a hash range of the keys at least (%v)", got, want)
	}
	sameResults(t, whole.results(), small.results(), "with overflow", "without")
}

// sameResults fails t unless got (the rig named with) emitted the results
// want (the rig named without) did, no more and no fewer.
func sameResults(t *testing.T, want, got map[string]string, with, without string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no result: nothing compared")
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q %s, %q %s", id, got[id], with, w, without)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: %q %s only", id, g, with)
		}
	}
}

// A producer's copy of an event whose claim went to an overflow item, sent
// later in the interval to a process that never saw the original, is
// suppressed; and an invocation sent again after it wrote its overflow
// (its answer lost) counts its records once.
func TestACopyOfAnEventWhoseClaimOverflowedIsSuppressed(t *testing.T) {
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r := newOverflowRig(t, aggregate.WithCarriedBudget(200))
	first := overflowRecords(1, 40, 4, base)
	r.carry(first)
	if r.overflowItems() == 0 {
		t.Fatal("no overflow item: the test proves nothing")
	}
	second := overflowRecords(41, 40, 4, base)
	if _, err := r.invoke(second); err != nil { // its answer lost: sent again with the same state
		t.Fatal(err)
	}
	r.restart()
	r.carry(second)
	// The copy: record 3's key, id and content, a new sequence number.
	dup := first[2]
	dup.seq = 81
	when := base.Add(81 * time.Second)
	dup.env.SentAt, dup.env.ReceivedAt = when, when
	r.carry([]record{dup})
	r.flush()
	if got := emfSum(t, r.emf, "DuplicatesSuppressed"); got != 1 {
		t.Errorf("DuplicatesSuppressed = %v, want 1", got)
	}
	total := uint64(0)
	for id, o := range r.out.byID {
		if strings.Contains(id, "/tumbling:") {
			total += o.Result.Count
		}
	}
	// Every record of the 80 whose tumbling window the flush closed
	// (those before the watermark's minute) counted once, the copy not.
	wantTotal := uint64(0)
	wm := base.Add(80*time.Second - 5*time.Second) // the last event time less the out-of-orderness
	for _, rec := range append(first, second...) {
		if !rec.env.OccurredAt.Truncate(time.Minute).Add(time.Minute).After(wm) {
			wantTotal++
		}
	}
	if wantTotal == 0 {
		t.Fatal("no tumbling window closed: nothing compared")
	}
	if total != wantTotal {
		t.Errorf("the tumbling windows closed count %d records, want %d (each once, the copy never)", total, wantTotal)
	}
}

// A state naming an overflow item the table does not hold (expired, or
// deleted by hand) fails the invocation, naming it, rather than going on
// without what it held.
func TestAStateNamingAMissingOverflowItemFailsTheInvocation(t *testing.T) {
	r := newOverflowRig(t)
	r.state = map[string]string{"c|~ovf": "12.p.00000000000000ff"}
	_, err := r.invoke(overflowRecords(20, 5, 2, time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)))
	if err == nil || !strings.Contains(err.Error(), "12.p.00000000000000ff") || !strings.Contains(err.Error(), "not in the table") {
		t.Fatalf("err = %v, want one naming the missing overflow item", err)
	}
	r.state = map[string]string{"c|~ovf": "a|b"}
	if _, err := r.invoke(nil); err == nil || !strings.Contains(err.Error(), "overflow name") {
		t.Fatalf("err = %v, want the malformed name refused", err)
	}
}

// Busy keys, hundreds of records each, are written per key when they
// outgrow the state, as before overflow: an item would bill their bytes
// and the flush again, a write per key a unit or so.
func TestBusyKeysPastTheBudgetAreWrittenPerKeyNotOverflowed(t *testing.T) {
	base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	busy := newOverflowRig(t, aggregate.WithCarriedBudget(4<<10))
	whole := newOverflowRig(t)
	for i := 0; i < 4; i++ {
		recs := overflowRecords(1+i*150, 150, 2, base)
		for j := range recs { // two keys, a record each a second: busy
			recs[j].env.OccurredAt = base.Add(time.Duration(recs[j].seq) * time.Second / 2)
		}
		busy.carry(recs)
		whole.carry(recs)
	}
	if n := busy.overflowItems(); n != 0 {
		t.Errorf("two busy keys wrote %d overflow items, want none (a write per key is cheaper)", n)
	}
	busy.flush()
	whole.flush()
	if busy.ledger == 0 {
		t.Error("the busy keys' claims were not written before the flush: they stayed in a state past its budget")
	}
	sameResults(t, whole.results(), busy.results(), "written early", "carried")
}
