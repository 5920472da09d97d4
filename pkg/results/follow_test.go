package results_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/results"
)

// reshardingStream is a Kinesis stream that splits its shard as AWS does:
// the parent closes (its last read returns no next iterator) and new
// records go to the two children. The stand-in cannot show this (moto keeps
// routing records to the closed parent), so this is the one fake here.
type reshardingStream struct {
	mu     sync.Mutex
	shards []*fakeShard
	// perRead, when above 0, is the most records one read returns; each
	// record left after it puts the reader a minute further behind the tip.
	perRead int
}

type fakeShard struct {
	id     string
	parent string
	recs   []kintypes.Record
	closed bool
}

func (s *reshardingStream) open() []*fakeShard {
	var out []*fakeShard
	for _, sh := range s.shards {
		if !sh.closed {
			out = append(out, sh)
		}
	}
	return out
}

// put appends one record per key, spread over the open shards.
func (s *reshardingStream) put(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := s.open()
	for i, k := range keys {
		sh := open[i%len(open)]
		b, _ := json.Marshal(aggregate.Output{ID: "p/" + k + "/r1", Kind: "final", Pipeline: "p", Key: k, Window: "tumbling:1m0s", Revision: 1,
			Result: agg.Result{Aggregates: agg.Count, Count: 1}})
		sh.recs = append(sh.recs, kintypes.Record{Data: b, PartitionKey: aws.String(k), SequenceNumber: aws.String(fmt.Sprint(len(sh.recs) + 1)),
			ApproximateArrivalTimestamp: aws.Time(time.Now())})
	}
}

func (s *reshardingStream) split() {
	s.mu.Lock()
	defer s.mu.Unlock()
	parent := s.shards[0]
	parent.closed = true
	s.shards = append(s.shards, &fakeShard{id: "shardId-000000000001", parent: parent.id}, &fakeShard{id: "shardId-000000000002", parent: parent.id})
}

func (s *reshardingStream) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &kinesis.ListShardsOutput{}
	for _, sh := range s.shards {
		r := &kintypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}
		if sh.closed {
			r.EndingSequenceNumber = aws.String(fmt.Sprint(len(sh.recs)))
		}
		out.Shards = append(out.Shards, kintypes.Shard{ShardId: aws.String(sh.id), ParentShardId: aws.String(sh.parent), SequenceNumberRange: r})
	}
	return out, nil
}

// Iterators are "<shard>/<next index>".
func (s *reshardingStream) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sh := range s.shards {
		if sh.id != aws.ToString(in.ShardId) {
			continue
		}
		next := 0
		if in.ShardIteratorType == kintypes.ShardIteratorTypeLatest {
			next = len(sh.recs)
		}
		return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%d/%d", i, next))}, nil
	}
	return nil, &kintypes.ResourceNotFoundException{Message: aws.String("no shard")}
}

func (s *reshardingStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var i, next int
	fmt.Sscanf(aws.ToString(in.ShardIterator), "%d/%d", &i, &next)
	sh := s.shards[i]
	end := len(sh.recs)
	if s.perRead > 0 {
		end = min(end, next+s.perRead)
	}
	out := &kinesis.GetRecordsOutput{Records: append([]kintypes.Record(nil), sh.recs[next:end]...),
		MillisBehindLatest: aws.Int64(int64(len(sh.recs)-end) * time.Minute.Milliseconds())}
	if !sh.closed || end < len(sh.recs) {
		out.NextShardIterator = aws.String(fmt.Sprintf("%d/%d", i, end))
	}
	return out, nil
}

// A follow started on one shard keeps up across a split: the parent is
// read to its end and the children, found when the shards are listed
// again, from their start, so every record put before and after the split
// is delivered once.
func TestFollowAcrossASplit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := &reshardingStream{shards: []*fakeShard{{id: "shardId-000000000000"}}}
	f := results.NewFollower(st, "wr").WithPoll(20*time.Millisecond, 50*time.Millisecond)
	ready := make(chan struct{})
	f.OnStart = func(shards int, from string) {
		if shards != 1 || from != "now (LATEST)" {
			t.Errorf("started on %d shards from %s, want 1 from now (LATEST)", shards, from)
		}
		close(ready)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	shards := map[string]bool{}
	done := make(chan error, 1)
	go func() {
		done <- f.Follow(ctx, time.Time{}, func(r results.Record) error {
			mu.Lock()
			defer mu.Unlock()
			seen[r.Output.Key]++
			shards[r.Shard] = true
			return nil
		})
	}()
	<-ready
	var before, after []string
	for i := range 10 {
		before = append(before, fmt.Sprint("before-", i))
		after = append(after, fmt.Sprint("after-", i))
	}
	st.put(before...)
	st.split()
	st.put(after...)
	want := append(before, after...)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(want) {
			break
		}
		select {
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("saw %d of %d keys: %v", len(seen), len(want), seen)
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(300 * time.Millisecond) // anything delivered twice would arrive by now
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range want {
		if seen[k] != 1 {
			t.Errorf("%s delivered %d times, want once", k, seen[k])
		}
	}
	var ids []string
	for s := range shards {
		ids = append(ids, s)
	}
	sort.Strings(ids)
	if fmt.Sprint(ids) != "[shardId-000000000000 shardId-000000000001 shardId-000000000002]" {
		t.Errorf("records came from shards %v, want the parent and both children", ids)
	}
}

// A follow from a time before a split reads the closed parent to its end
// before the children: a key's results move to a child at the split, and a
// correction there must not be printed before the final result it corrects,
// which the parent holds.
func TestFollowReadsParentBeforeChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := &reshardingStream{shards: []*fakeShard{{id: "shardId-000000000000"}}}
	var before []string
	for i := range 200 {
		before = append(before, fmt.Sprint("before-", i))
	}
	st.put(append(before, "k")...) // k's final, revision 1, last on the parent
	st.split()
	st.mu.Lock()
	b, _ := json.Marshal(aggregate.Output{ID: "p/k/r2", Kind: "correction", Pipeline: "p", Key: "k", Window: "tumbling:1m0s", Revision: 2,
		Result: agg.Result{Aggregates: agg.Count, Count: 2}})
	child := st.shards[1]
	child.recs = append(child.recs, kintypes.Record{Data: b, PartitionKey: aws.String("k"), SequenceNumber: aws.String("1"), ApproximateArrivalTimestamp: aws.Time(time.Now())})
	st.mu.Unlock()

	f := results.NewFollower(st, "wr").WithPoll(20*time.Millisecond, 50*time.Millisecond)
	var revs []int
	n := 0
	err := f.Follow(ctx, time.Now().Add(-time.Hour), func(r results.Record) error {
		if n++; r.Output.Key == "k" {
			revs = append(revs, r.Output.Revision)
		}
		if n == len(before)+2 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(revs) != "[1 2]" {
		t.Errorf("k's results came as revisions %v, want [1 2]: the child's correction before the parent's final", revs)
	}
}

// A follow from long ago says, while it catches up, how many records it
// read and how far behind the stream's tip its furthest shard is, and stops
// saying so once it has caught up.
func TestFollowSaysHowFarItGotWhileCatchingUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := &reshardingStream{shards: []*fakeShard{{id: "shardId-000000000000"}}, perRead: 1}
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprint("k-", i))
	}
	st.put(keys...)
	f := results.NewFollower(st, "wr").WithPoll(time.Millisecond, time.Minute)
	f.ProgressEvery = 5 * time.Millisecond
	var said []results.Progress
	f.OnProgress = func(p results.Progress) { said = append(said, p) }
	n, saidBeforeEnd := 0, 0
	err := f.Follow(ctx, time.Now().Add(-time.Hour), func(r results.Record) error {
		time.Sleep(2 * time.Millisecond) // a reader slower than the ticker
		if n++; n == len(keys) {
			saidBeforeEnd = len(said)
			go func() { time.Sleep(50 * time.Millisecond); cancel() }()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(keys) {
		t.Fatalf("read %d records, want %d", n, len(keys))
	}
	// The last record's read was 0 behind: caught up, nothing more said.
	if len(said) > saidBeforeEnd+1 {
		t.Errorf("progress said %d more times after the last record, caught up", len(said)-saidBeforeEnd)
	}
	if len(said) == 0 {
		t.Fatal("no progress said while 40 records were read a record a read, 40 minutes behind the tip")
	}
	for i, p := range said {
		if p.Shard != "shardId-000000000000" || p.Behind <= 0 || p.Read < 0 || p.Read > len(keys) || i > 0 && p.Read < said[i-1].Read {
			t.Errorf("progress %d: %+v; want the shard, a lag above 0 and a growing count of at most %d", i, p, len(keys))
		}
	}
	if last := said[len(said)-1]; last.Behind > 40*time.Minute {
		t.Errorf("last progress %+v: behind more than the 40 records put", last)
	}
}
