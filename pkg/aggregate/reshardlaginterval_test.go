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

// On the per-interval path a child stores no watermark and no position
// before its first flush: the records it carries to that flush hold only
// the child itself (state.Views.Hold). A closed parent bounded by its
// children's watermarks alone went by its clock then (capped only by the
// child's first record's arrival − idleTimeout − outOfOrderness), and with
// producers a minute behind made final a window whose record the child
// carried: dropped under drop, a correction under correct, where on one
// shard the hold keeps the window open for it. The children's holds bound
// the parent too.
func TestAClosedParentWaitsForTheRecordsAChildCarriesToItsFlush(t *testing.T) {
	for _, carry := range []bool{false, true} {
		for _, policy := range []string{"drop", "correct"} {
			t.Run(fmt.Sprintf("carry=%v/%s", carry, policy), func(t *testing.T) {
				late := `"latePolicy":"drop"`
				if policy == "correct" {
					late = `"latePolicy":"correct","allowedLateness":"10m"`
				}
				if carry {
					late += `,"partitionKeyIsGroupingKey":true`
				}
				cfg := fmt.Sprintf(`{"name":"laggedint","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s",%s}`, late)
				run := func(parent, child string) string {
					ctx := context.Background()
					base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
					now := base
					clock := func() time.Time { return now }
					s := &lagStream{now: clock, records: map[string][]lagRecord{}, children: map[string][]string{}}
					if parent != child {
						s.children[parent] = []string{child}
					}
					p, out := pipelineOn(t, cfg, viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(s),
						aggregate.WithShardLister(parentOf{parent, child}, "events"))
					states := map[string]map[string]string{}
					// invoke is an invocation of shard's open interval with a
					// record that happened at event and reached the stream
					// (and the function) at at.
					invoke := func(shard string, seq, event, at int) {
						t.Helper()
						now = base.Add(time.Duration(at) * time.Second)
						s.records[shard] = append(s.records[shard], lagRecord{seq, now})
						ev := events.KinesisTimeWindowEvent{
							KinesisEvent:         kinesisEvent([]record{{shard: shard, seq: seq, env: envelopeAt(seq, "a", base.Add(time.Duration(event)*time.Second), 1)}}),
							TimeWindowProperties: events.TimeWindowProperties{ShardID: shard, State: states[shard]},
						}
						resp, err := p.HandleInterval(ctx, ev)
						if err != nil || len(resp.BatchItemFailures) > 0 {
							t.Fatalf("interval batch on %s: %v %v", shard, resp, err)
						}
						states[shard] = resp.State
					}
					flush := func(shard string, at int) {
						t.Helper()
						now = base.Add(time.Duration(at) * time.Second)
						ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: shard, State: states[shard], IsFinalInvokeForWindow: true}}
						if _, err := p.HandleInterval(ctx, ev); err != nil {
							t.Fatalf("flush of %s: %v", shard, err)
						}
						states[shard] = nil
					}
					tick := func(at int) {
						t.Helper()
						now = base.Add(time.Duration(at) * time.Second)
						if _, err := p.Tick(ctx, now); err != nil {
							t.Fatal(err)
						}
					}
					invoke(parent, 1, 10, 12)
					flush(parent, 12)
					tick(20)
					invoke(child, 2, 50, 110) // a minute behind; carried to the flush
					tick(120)
					flush(child, 130)
					for _, at := range []int{150, 200, 260, 320} {
						tick(at)
					}
					return strings.Join(out.of("a", base), "\n")
				}
				want := run("shardId-000000000000", "shardId-000000000000")
				if want != "final [0s,1m0s) r1 count 2 sum 2" {
					t.Fatalf("on one shard the results of key a are:\n%s\nwant one final result with its 2 records", want)
				}
				if got := run("shardId-000000000000", "shardId-000000000001"); got != want {
					t.Errorf("resharded, the results of key a:\n%s\nwant, as on one shard:\n%s", got, want)
				}
			})
		}
	}
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

// Liveness: a closed parent bounded by its descendants' stored watermarks
// still closes its windows when they go idle: the ticker advances every
// shard with a stored watermark, the children included (a split, a merge,
// and a chain of six generations, past maxGenerations).
func TestAClosedParentStillClosesWhenItsChildrenGoIdle(t *testing.T) {
	cfg := `{"name":"liveness","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`
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
			ctx := context.Background()
			base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
			now := base
			clock := func() time.Time { return now }
			s := &lagStream{now: clock, records: map[string][]lagRecord{}, children: tt.children}
			p, out := pipelineOn(t, cfg, viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(s))
			seq := 0
			deliver := func(shard string, event, at int) {
				t.Helper()
				seq++
				now = base.Add(time.Duration(at) * time.Second)
				s.records[shard] = append(s.records[shard], lagRecord{seq, now})
				// a key of its own per shard: the shard's own watermark closes its window
				ev := kinesisEvent([]record{{shard: shard, seq: seq, env: envelopeAt(seq, shard, base.Add(time.Duration(event)*time.Second), 1)}})
				if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
					t.Fatalf("batch on %s: %v %v", shard, resp, err)
				}
			}
			for i, sh := range tt.parents {
				deliver(sh, 5+i, 10+i)
			}
			for i, sh := range tt.leaves {
				deliver(sh, 20+i, 30+i)
			}
			all := append(append([]string{}, tt.parents...), tt.leaves...)
			for at := 40; at <= 600; at += 20 {
				now = base.Add(time.Duration(at) * time.Second)
				if _, err := p.Tick(ctx, now); err != nil {
					t.Fatal(err)
				}
				closed := 0
				for _, sh := range all {
					got := strings.Join(out.of(sh, base), "\n")
					if got != "" && got != "final [0s,1m0s) r1 count 1 sum 1" {
						t.Fatalf("at %ds, %s: %s", at, sh, got)
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
