package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/backlog"
)

// After a reshard the parent is idle for good: its keys' records go to the
// children. The ticker advanced it by the clock (now − idleTimeout −
// outOfOrderness), so with producers whose events reach the stream a
// minute after they happen (clients that send in batches) it made the
// parent's windows final while a child, its own watermark a minute behind
// the clock, was still receiving on-time records of them: dropped under
// latePolicy drop, a final result and then a correction under correct,
// where one shard never resharded gives one final result with every
// record. A closed parent now goes no further than its children's stored
// watermarks and holds.

// lagged is one run of a reshard test: a processor whose clock and
// backlog (when each record reached the stream) the test moves.
type lagged struct {
	t      *testing.T
	p      *aggregate.Processor
	out    *outputLog
	base   time.Time
	now    time.Time
	stream *lagStream
	states map[string]map[string]string // each shard's open interval
}

// newLagged runs cfg with parent closed into child (the same shard: no
// reshard).
func newLagged(t *testing.T, cfg, parent, child string, opts ...aggregate.Option) *lagged {
	l := &lagged{t: t, base: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), states: map[string]map[string]string{}}
	l.now = l.base
	clock := func() time.Time { return l.now }
	l.stream = &lagStream{now: clock, records: map[string][]lagRecord{}, children: map[string][]string{}}
	if parent != child {
		l.stream.children[parent] = []string{child}
	}
	opts = append([]aggregate.Option{aggregate.WithClock(clock), aggregate.WithBacklog(l.stream)}, opts...)
	l.p, l.out = pipelineOn(t, cfg, viewsAt(clock), opts...)
	return l
}

// at moves the clock to sec seconds after base.
func (l *lagged) at(sec int) { l.now = l.base.Add(time.Duration(sec) * time.Second) }

// record is record seq of key on shard that happened at event and reached
// the stream (and the function) at the clock's sec.
func (l *lagged) record(shard, key string, seq, event, sec int) events.KinesisEvent {
	l.at(sec)
	l.stream.records[shard] = append(l.stream.records[shard], lagRecord{seq, l.now})
	return kinesisEvent([]record{{shard: shard, seq: seq, env: envelopeAt(seq, key, l.base.Add(time.Duration(event)*time.Second), 1)}})
}

// deliver is a batch of that one record (the per-batch path).
func (l *lagged) deliver(shard, key string, seq, event, sec int) {
	l.t.Helper()
	if resp, err := l.p.HandleBatch(context.Background(), l.record(shard, key, seq, event, sec)); err != nil || len(resp.BatchItemFailures) > 0 {
		l.t.Fatalf("batch on %s: %v %v", shard, resp, err)
	}
}

// carry is an invocation of shard's open interval with that one record.
func (l *lagged) carry(shard, key string, seq, event, sec int) {
	l.t.Helper()
	ev := events.KinesisTimeWindowEvent{KinesisEvent: l.record(shard, key, seq, event, sec),
		TimeWindowProperties: events.TimeWindowProperties{ShardID: shard, State: l.states[shard]}}
	resp, err := l.p.HandleInterval(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		l.t.Fatalf("interval batch on %s: %v %v", shard, resp, err)
	}
	l.states[shard] = resp.State
}

// flush is the final invocation of shard's open interval at sec.
func (l *lagged) flush(shard string, sec int) {
	l.t.Helper()
	l.at(sec)
	ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: shard, State: l.states[shard], IsFinalInvokeForWindow: true}}
	if _, err := l.p.HandleInterval(context.Background(), ev); err != nil {
		l.t.Fatalf("flush of %s: %v", shard, err)
	}
	l.states[shard] = nil
}

// tick runs the ticker at each of secs.
func (l *lagged) tick(secs ...int) {
	l.t.Helper()
	for _, sec := range secs {
		l.at(sec)
		if _, err := l.p.Tick(context.Background(), l.now); err != nil {
			l.t.Fatal(err)
		}
	}
}

func (l *lagged) results(key string) string { return strings.Join(l.out.of(key, l.base), "\n") }

// asOnOneShard runs history on one shard, whose results must be want, and
// across a reshard, whose results must be the same.
func asOnOneShard(t *testing.T, want string, history func(parent, child string) string) {
	t.Helper()
	if got := history("shardId-000000000000", "shardId-000000000000"); got != want {
		t.Fatalf("on one shard the results of key a are:\n%s\nwant:\n%s", got, want)
	}
	if got := history("shardId-000000000000", "shardId-000000000001"); got != want {
		t.Errorf("resharded, the results of key a:\n%s\nwant, as on one shard:\n%s", got, want)
	}
}

func lagConfig(name, policy string, carry bool) string {
	late := `"latePolicy":"drop"`
	if policy == "correct" {
		late = `"latePolicy":"correct","allowedLateness":"10m"`
	}
	return fmt.Sprintf(`{"name":%q,"key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s",%s,"partitionKeyIsGroupingKey":%t}`, name, late, carry)
}

// The per-batch path: the child's records applied as they come, its
// watermark a minute behind the parent's clock.
func TestAClosedParentWaitsForItsChildrensWatermark(t *testing.T) {
	for _, policy := range []string{"drop", "correct"} {
		t.Run(policy, func(t *testing.T) {
			asOnOneShard(t, "final [0s,1m0s) r1 count 3 sum 3", func(parent, child string) string {
				l := newLagged(t, lagConfig("lagged", policy, false), parent, child)
				l.deliver(parent, "a", 1, 10, 12)
				l.tick(20)
				l.deliver(child, "a", 2, 15, 70) // a minute behind from here on
				l.tick(100)                      // the parent idle since 20 s: the clock says 65 s
				l.deliver(child, "a", 3, 50, 110)
				l.tick(150, 200, 260, 320)
				return l.results("a")
			})
		})
	}
}

// On the per-interval path a child stores no watermark and no position
// before its first flush: the records it carries to that flush hold only
// the child itself (state.Views.Hold). Bounded by its children's
// watermarks alone, the parent went by its clock then (capped only by the
// child's first record's arrival − idleTimeout − outOfOrderness) and made
// final a window whose record the child carried, where on one shard the
// hold keeps the window open for it. The children's holds bound the
// parent too.
func TestAClosedParentWaitsForTheRecordsAChildCarriesToItsFlush(t *testing.T) {
	for _, carry := range []bool{false, true} {
		for _, policy := range []string{"drop", "correct"} {
			t.Run(fmt.Sprintf("carry=%v/%s", carry, policy), func(t *testing.T) {
				asOnOneShard(t, "final [0s,1m0s) r1 count 2 sum 2", func(parent, child string) string {
					l := newLagged(t, lagConfig("laggedint", policy, carry), parent, child,
						aggregate.WithShardLister(parentOf{parent, child}, "events"))
					l.carry(parent, "a", 1, 10, 12)
					l.flush(parent, 12)
					l.tick(20)
					l.carry(child, "a", 2, 50, 110) // a minute behind; carried to the flush
					l.tick(120)
					l.flush(child, 130)
					l.tick(150, 200, 260, 320)
					return l.results("a")
				})
			})
		}
	}
}

// Liveness: a closed parent bounded by its descendants' stored watermarks
// still closes its windows when they go idle: the ticker advances every
// shard with a stored watermark, the children included (a split, a merge,
// and a chain of six generations, past maxGenerations).
func TestAClosedParentStillClosesWhenItsChildrenGoIdle(t *testing.T) {
	cfg := lagConfig("liveness", "drop", false)
	sh := func(i int) string { return fmt.Sprintf("shardId-%012d", i) }
	for _, tt := range []struct {
		name     string
		children map[string][]string
		parents  []string // shards with a record of the window, read first
		leaves   []string // shards with one record each after them
	}{
		{"split", map[string][]string{sh(0): {sh(1), sh(2)}}, []string{sh(0)}, []string{sh(1), sh(2)}},
		{"merge", map[string][]string{sh(0): {sh(2)}, sh(1): {sh(2)}}, []string{sh(0), sh(1)}, []string{sh(2)}},
		{"chain of six", map[string][]string{sh(0): {sh(1)}, sh(1): {sh(2)}, sh(2): {sh(3)}, sh(3): {sh(4)}, sh(4): {sh(5)}, sh(5): {sh(6)}},
			[]string{sh(0), sh(1), sh(2), sh(3), sh(4), sh(5)}, []string{sh(6)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLagged(t, cfg, sh(0), sh(0))
			l.stream.children = tt.children
			seq := 0
			// Each shard a key of its own: its own watermark closes its window.
			for i, s := range tt.parents {
				seq++
				l.deliver(s, s, seq, 5+i, 10+i)
			}
			for i, s := range tt.leaves {
				seq++
				l.deliver(s, s, seq, 20+i, 30+i)
			}
			all := append(append([]string{}, tt.parents...), tt.leaves...)
			for at := 40; at <= 600; at += 20 {
				l.tick(at)
				closed := 0
				for _, s := range all {
					got := l.results(s)
					if got != "" && got != "final [0s,1m0s) r1 count 1 sum 1" {
						t.Fatalf("at %ds, %s: %s", at, s, got)
					}
					if got != "" {
						closed++
					}
				}
				if closed == len(all) {
					t.Logf("every shard's window closed by the tick at %ds", at)
					return
				}
			}
			t.Fatalf("a shard's [0s,1m0s) never closed by 600s")
		})
	}
}

// lagStream is a backlog stand-in that knows when each record reached
// the stream: FirstAfter(shard, seq) is the first record of shard after
// seq that has arrived by the clock, or, past the shard's last record and
// the shard closed, its children.
type lagStream struct {
	now      func() time.Time
	records  map[string][]lagRecord // per shard, in order
	children map[string][]string
}

type lagRecord struct {
	seq     int
	arrived time.Time
}

func (s *lagStream) FirstAfter(_ context.Context, shard, seq string) (backlog.Next, error) {
	after := 0
	if seq != "" {
		fmt.Sscan(seq, &after)
	}
	for _, r := range s.records[shard] {
		if r.seq > after && !r.arrived.After(s.now()) {
			return backlog.Next{Found: true, Arrived: r.arrived}, nil
		}
	}
	return backlog.Next{Children: s.children[shard]}, nil
}

// parentOf lists child with parent as its parent (a carry's reshard).
type parentOf struct{ parent, child string }

func (l parentOf) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	out := &kinesis.ListShardsOutput{Shards: []kintypes.Shard{{ShardId: aws.String(l.parent)}}}
	if l.child != l.parent {
		out.Shards = append(out.Shards, kintypes.Shard{ShardId: aws.String(l.child), ParentShardId: aws.String(l.parent)})
	}
	return out, nil
}
