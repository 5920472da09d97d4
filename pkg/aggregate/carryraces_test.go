package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// carryFaults fails the next write of a carry item (pk ~carry#...) once
// when armed: a transient error (throttling, a timeout).
type carryFaults struct {
	*dynamodb.Client
	mu    sync.Mutex
	armed bool
	hook  func(in *dynamodb.UpdateItemInput) // called before a carry write
}

func (w *carryFaults) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "~carry#") {
		w.mu.Lock()
		fail := w.armed
		w.armed = false
		hook := w.hook
		w.mu.Unlock()
		if hook != nil {
			hook(in)
		}
		if fail {
			return nil, errors.New("injected: carry write throttled")
		}
	}
	return w.Client.UpdateItem(ctx, in, opts...)
}

func tumblingCarryConfig(name string) string {
	return fmt.Sprintf(`{"name":%q,"key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m",
	  "partitionKeyIsGroupingKey":true}`, name)
}

// faultyCarry is tumblingCarryConfig(name)'s pipeline whose processing
// time is *clock, writing through carryFaults.
func faultyCarry(t *testing.T, name string, clock *time.Time, opts ...aggregate.Option) (*aggregate.Processor, *outputLog, *carryFaults) {
	t.Helper()
	now := func() time.Time { return *clock }
	faults := &carryFaults{Client: db}
	p, out := pipelineOn(t, tumblingCarryConfig(name), func(cfg *pipeline.Config, table string) *state.Views {
		return state.NewViews(faults, table, cfg.Aggregates, state.WithClock(now))
	}, append([]aggregate.Option{aggregate.WithClock(now)}, opts...)...)
	return p, out, faults
}

func finalInvoke(p *aggregate.Processor, r *feed) error {
	ev := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: r.shardID(), State: r.state, IsFinalInvokeForWindow: true}}
	_, err := p.HandleInterval(context.Background(), ev)
	return err
}

// The ticker stores the carry without the windows it closes (as closing)
// before it writes them. When that write fails (throttled), or a flush
// stores the carry first (the interval's last invocations and its flush
// run just before it), the ticker has written nothing, and the flush,
// which added a record to a window the ticker meant to close, has it
// closed later with both records. (When the ticker wrote the window first
// and its carry write failed or lost the race, every later write of that
// window overlapped the ticker's fence, and every flush failed.)
func TestATickerThatLosesItsCarryWriteLeavesNoShardStuck(t *testing.T) {
	for _, tt := range []struct {
		name string
		// before arranges what happens to the ticker's carry write; r
		// sends the interval's records of key a.
		before func(faults *carryFaults, r *feed)
		after  func(r *feed) // what r sends once the tick is over
	}{
		{"it fails", func(faults *carryFaults, _ *feed) {
			faults.mu.Lock()
			faults.armed = true
			faults.mu.Unlock()
		}, func(r *feed) {
			r.carry(at{"a", 30, 2}) // open for the interval (wm 57 s)
			r.flush()
		}},
		{"a flush stores the carry first", func(faults *carryFaults, r *feed) {
			done := false
			faults.hook = func(*dynamodb.UpdateItemInput) {
				if !done {
					done = true
					r.carry(at{"a", 30, 2})
					r.flush()
				}
			}
		}, func(*feed) {}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			clock := base
			p, out, faults := faultyCarry(t, "hw", &clock)
			ctx := context.Background()
			r := &feed{t: t, p: p, base: base}
			clock = base.Add(10 * time.Second)
			r.carry(at{"a", 10, 1})
			r.flush() // wm 5 s: [0s,1m) of a carried
			clock = base.Add(62 * time.Second)
			r.carry(at{"b", 62, 100}) // next interval: hold at 60 s, its wm 57 s
			clock = base.Add(70 * time.Second)
			if _, err := p.Tick(ctx, clock); err != nil {
				t.Fatal(err)
			}
			clock = base.Add(200 * time.Second)
			tt.before(faults, r)
			_, err := p.Tick(ctx, clock) // idle advance to the hold (60 s): would close a's [0s,1m)
			t.Logf("the tick: %v", err)
			faults.hook = nil
			tt.after(r)
			clock = base.Add(260 * time.Second)
			if _, err := p.Tick(ctx, clock); err != nil {
				t.Fatalf("the next tick: %v", err)
			}
			r.carry(at{"z", 1000, 1})
			if err := finalInvoke(p, r); err != nil {
				t.Fatalf("the last final invocation: %v", err)
			}
			got := out.of("a", base)
			last := ""
			for _, l := range got {
				if strings.Contains(l, "[0s,1m0s)") {
					last = l
				}
			}
			if !strings.Contains(last, "count 2 sum 3") {
				t.Errorf("key a's [0s,1m) ends as %q, want both its records (count 2 sum 3):\n%s", last, strings.Join(got, "\n"))
			}
		})
	}
}

func reshardConfig(name string, carried bool, policy string) string {
	late := `"latePolicy":"drop"`
	if policy == "correct" {
		late = `"latePolicy":"correct","allowedLateness":"10m"`
	}
	return fmt.Sprintf(`{"name":%q,"key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s",%s,
	  "partitionKeyIsGroupingKey":%t}`, name, late, carried)
}

// splitStream makes a stream of one shard and splits it: the parent and
// one child.
func splitStream(t *testing.T) (name, parent, child string) {
	ctx := context.Background()
	name = fmt.Sprintf("hcarry-reshard-%d", tableSeq.Add(1))
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil || len(desc.Shards) != 1 {
		t.Fatalf("shards of %s: %v %v", name, desc, err)
	}
	parent = aws.ToString(desc.Shards[0].ShardId)
	if _, err := kin.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(parent),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728")}); err != nil {
		t.Fatal(err)
	}
	all, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all.Shards {
		if aws.ToString(s.ParentShardId) == parent {
			child = aws.ToString(s.ShardId)
		}
	}
	return name, parent, child
}

// After a reshard the child's first flush writes the parent's carried
// windows open and lists them under the child, not the parent: the
// parent, idle for good, is advanced by the clock, and would make them
// final while the child's own records of them wait in its carry (a
// correction later under latePolicy correct, the records dropped under
// drop). The results are those of a pipeline without the carry.
func TestAParentsCarriedWindowsWaitForTheChildsRecords(t *testing.T) {
	streamName, parent, child := splitStream(t)
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, policy := range []string{"correct", "drop"} {
		results := map[bool]string{}
		for _, carried := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/carried=%t", policy, carried), func(t *testing.T) {
				clock := base
				now := func() time.Time { return clock }
				p, out := pipelineOn(t, reshardConfig("hr", carried, policy), viewsAt(now), aggregate.WithClock(now), aggregate.WithShardLister(kin, streamName))
				ctx := context.Background()
				tick := func(sec int) {
					clock = base.Add(time.Duration(sec) * time.Second)
					if _, err := p.Tick(ctx, clock); err != nil {
						t.Fatal(err)
					}
				}
				before := &feed{t: t, p: p, base: base, shard: parent}
				after := &feed{t: t, p: p, base: base, shard: child}
				after.seq = 1000
				clock = base.Add(12 * time.Second)
				before.carry(at{"a", 10, 1})
				before.flush()
				clock = base.Add(42 * time.Second)
				after.carry(at{"a", 40, 4})
				after.flush() // the child's first flush: the parent's carry written out
				tick(50)
				clock = base.Add(52 * time.Second)
				after.carry(at{"a", 50, 8})
				after.flush()
				tick(100) // the parent, idle since 50 s, advances to 65 s
				clock = base.Add(72 * time.Second)
				after.carry(at{"a", 70, 16})
				after.flush()
				tick(200)
				results[carried] = strings.Join(out.of("a", base), "\n")
				t.Logf("results of a:\n%s", results[carried])
			})
		}
		if results[true] != results[false] {
			t.Errorf("latePolicy %s: results with the carry:\n%s\nwithout:\n%s", policy, results[true], results[false])
		}
	}
}

// expireItems deletes what DynamoDB's TTL would have by now: the items of
// table whose expiresAt is before now.
func expireItems(t *testing.T, table string, now time.Time) (deleted []string) {
	ctx := context.Background()
	pg := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			n, ok := it["expiresAt"].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			var x int64
			fmt.Sscan(n.Value, &x)
			if x < now.Unix() {
				pk, sk := it["pk"].(*types.AttributeValueMemberS).Value, it["sk"].(*types.AttributeValueMemberS).Value
				deleted = append(deleted, pk+" "+sk)
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return deleted
}

// A carry is kept until the last window it holds has ended and its
// retention passed, not only a week after its last write: a shard that
// goes idle holding a window longer than a week (windows may be a year
// long) is written by nobody until the window ends, and the carry is the
// only copy of its records.
func TestACarryOutlivesTheWindowsItHolds(t *testing.T) {
	size := 240 * time.Hour
	ms := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMilli()
	base := time.UnixMilli(ms - ms%size.Milliseconds() + size.Milliseconds()).UTC() // a window's start
	results := map[bool]string{}
	for _, carried := range []bool{false, true} {
		t.Run(fmt.Sprintf("carried=%t", carried), func(t *testing.T) {
			clock := base
			now := func() time.Time { return clock }
			var table string
			p, out := pipelineOn(t, fmt.Sprintf(`{"name":"ht","key":"key","value":"data.v",
			  "windows":[{"kind":"tumbling","size":"240h"}],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"1h",
			  "partitionKeyIsGroupingKey":%t}`, carried), func(cfg *pipeline.Config, tbl string) *state.Views {
				table = tbl
				return state.NewViews(db, tbl, cfg.Aggregates, state.WithClock(now))
			}, aggregate.WithClock(now))
			ctx := context.Background()
			r := &feed{t: t, p: p, base: base}
			clock = base.Add(time.Minute)
			r.carry(at{"a", 60, 5})
			r.flush()
			for _, d := range []time.Duration{time.Hour, 24 * time.Hour, 3 * 24 * time.Hour, 8 * 24 * time.Hour} {
				clock = base.Add(d)
				if _, err := p.Tick(ctx, clock); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("expired by day 9: %v", expireItems(t, table, base.Add(9*24*time.Hour)))
			for _, d := range []time.Duration{size + time.Hour, size + 2*time.Hour} {
				clock = base.Add(d)
				if _, err := p.Tick(ctx, clock); err != nil {
					t.Fatal(err)
				}
			}
			results[carried] = strings.Join(out.of("a", base), "\n")
			t.Logf("results: %s", results[carried])
		})
	}
	if results[true] != results[false] {
		t.Errorf("results with the carry:\n%s\nwithout:\n%s", results[true], results[false])
	}
}

// A pipeline's hopping window changed in place (same name, a new size):
// the shard's carry holds partials of the old window, which the new
// processor reads as that window's (its size and advance are in its id)
// and closes, rather than refusing the carry in every flush and tick.
func TestACarryOfAWindowChangedInPlaceIsWrittenOut(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	p, _, table := carriedOn(t, "hc")
	r := &feed{t: t, p: p, base: base}
	r.carry(at{"a", 10, 1})
	r.flush()
	cfg, err := pipeline.Parse([]byte(strings.Replace(carryConfig("hc", true), `"size":"3m"`, `"size":"2m"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p2 := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), &outputLog{}, "results", aggregate.WithLogger(quiet))
	r2 := &feed{t: t, p: p2, base: base, seq: r.seq}
	r2.carry(at{"a", 20, 2})
	if err := finalInvoke(p2, r2); err != nil {
		t.Errorf("flush after the change: %v", err)
	}
	if _, err := p2.Tick(context.Background(), base.Add(time.Hour)); err != nil {
		t.Errorf("tick after the change: %v", err)
	}
}

// A pipeline that stops keeping carries (partitionKeyIsGroupingKey
// dropped, or the mapping moved to the per-batch path) writes out what its
// shards carried before: those windows' records are not lost.
func TestACarryLeftBehindIsWrittenOut(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, path := range []string{perInterval, perBatch} {
		t.Run(path, func(t *testing.T) {
			p, _, table := carriedOn(t, "hl")
			r := &feed{t: t, p: p, base: base}
			r.carry(at{"a", 10, 1}, at{"a", 20, 2})
			r.flush() // all carried
			cfg, err := pipeline.Parse([]byte(carryConfig("hl", false)))
			if err != nil {
				t.Fatal(err)
			}
			out := &outputLog{}
			p2 := aggregate.New(cfg, state.NewViews(db, table, cfg.Aggregates), out, "results", aggregate.WithLogger(quiet))
			r2 := &feed{t: t, p: p2, base: base, seq: r.seq, path: path}
			r2.batch(at{"a", 40, 4})
			r2.batch(at{"z", 1000, 1})
			got := strings.Join(out.of("a", base), "\n")
			if !strings.Contains(got, "final [0s,1m0s) r1 count 3 sum 7") {
				t.Errorf("key a's results after the change:\n%s\nwant [0s,1m) with its three records", got)
			}
		})
	}
}
