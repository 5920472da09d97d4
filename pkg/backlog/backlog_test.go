package backlog_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/window"
)

var kin *kinesis.Client

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { kin = kinesis.NewFromConfig(cfg) }))
}

// put puts n records on the stream's only shard and returns their
// sequence numbers.
func put(t *testing.T, name string, n int) []string {
	t.Helper()
	var seqs []string
	for range n {
		out, err := kin.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("k"), Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
	}
	return seqs
}

// The first record after the one a function committed is found with its
// arrival; after the last one there is none; a shard the stream does not
// have holds none.
func TestFirstAfterFindsTheRecordsAFunctionHasNotProcessed(t *testing.T) {
	ctx := context.Background()
	keyedtest.CreateStream(t, kin, "backlog", 1)
	before := time.Now().Add(-time.Minute)
	seqs := put(t, "backlog", 3)
	b := backlog.New(kin, "backlog")
	for _, tt := range []struct {
		name, shard, after string
		found              bool
	}{
		{"records after the first", "shardId-000000000000", seqs[0], true},
		{"one record after the second", "shardId-000000000000", seqs[1], true},
		{"nothing after the last", "shardId-000000000000", seqs[2], false},
		{"from the oldest record, for a shard not processed yet", "shardId-000000000000", "", true},
		{"a shard the stream does not have", "shardId-000000000009", seqs[0], false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next, err := b.FirstAfter(ctx, tt.shard, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			if next.Found != tt.found {
				t.Fatalf("found %v, want %v", next.Found, tt.found)
			}
			if next.Found && (next.Arrived.Before(before) || next.Arrived.After(time.Now().Add(time.Minute))) {
				t.Errorf("arrived %v, want the record's arrival, about now", next.Arrived)
			}
		})
	}
}

// A stream that is not there (a wrong EVENTS_STREAM_NAME) is an error
// naming it, not a shard with nothing to read: the ticker would advance
// every shard by the clock without a word.
func TestFirstAfterOnAStreamThatIsNotThereIsAnError(t *testing.T) {
	b := backlog.New(kin, "no-such-stream")
	next, err := b.FirstAfter(context.Background(), "shardId-000000000000", "49")
	if err == nil || next.Found || !strings.Contains(err.Error(), "no-such-stream") {
		t.Fatalf("%+v, error %v; want an error naming the stream", next, err)
	}
}

// A stream that cannot be read is an error naming the stream and shard,
// not "nothing to read": the ticker must not take the shard for idle.
func TestFirstAfterSaysWhatItCouldNotRead(t *testing.T) {
	b := backlog.New(failing{}, "events")
	next, err := b.FirstAfter(context.Background(), "shardId-000000000001", "49")
	if err == nil || next.Found {
		t.Fatalf("found %v, error %v; want an error", next.Found, err)
	}
	for _, want := range []string{"events", "shardId-000000000001", "throttled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// failing answers as a throttled Kinesis does (what moto cannot show).
type failing struct{}

func (failing) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
}

func (failing) GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return nil, errors.New("not reached")
}

// shards is a Reader answering per shard (a shard it does not name holds
// nothing), counting reads; err fails every read.
type shards struct {
	next  map[string]backlog.Next
	err   error
	reads []string
}

func (f *shards) FirstAfter(_ context.Context, shard, seq string) (backlog.Next, error) {
	f.reads = append(f.reads, shard+"@"+seq)
	return f.next[shard], f.err
}

// IdleHold bounds an idle advance by the first unprocessed record's
// arrival — on the shard, or, the shard closed by a reshard and read to
// its end, on the shards that took its keys — and a closed shard's by
// those shards' stored watermarks, keeps a caller's lower hold, asks
// nothing when the advance would not move or no position is known, and
// stops the advance when the stream cannot be read.
func TestIdleHold(t *testing.T) {
	base := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	const idle = 30 * time.Second
	// A watermark whose event time stopped at base, its idle clock
	// started then: at base+5m an advance would take it to base+4m25s.
	wm := func() *window.Watermark {
		w := window.NewWatermark(5 * time.Second)
		w.Observe(base)
		w.AdvanceIdle(base, idle)
		return w
	}
	const parent, c1, c2 = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"
	now := base.Add(5 * time.Minute)
	waits := func(d time.Duration) backlog.Next { return backlog.Next{Found: true, Arrived: base.Add(d)} }
	split := backlog.Next{Children: []string{c1, c2}}
	for _, tt := range []struct {
		name        string
		r           *shards
		positions   map[string]string        // shards with a watermark, and their positions ("": none stored)
		seen        map[string]time.Duration // a shard's newest event time after base, when not base; -1: none
		holds       map[string]time.Time     // shards' stored holds
		hold        time.Time
		wantBound   time.Time
		wantWaiting bool
		wantErr     bool
		wantReads   []string
	}{
		{"nothing unread: the caller's hold", &shards{}, map[string]string{parent: "7"}, nil, nil, time.Time{}, time.Time{}, false, false, []string{parent + "@7"}},
		{"a record waits: idle + out-of-orderness before it arrived", &shards{next: map[string]backlog.Next{parent: waits(time.Minute)}},
			map[string]string{parent: "7"}, nil, nil, time.Time{}, base.Add(time.Minute - 35*time.Second), true, false, []string{parent + "@7"}},
		{"a lower hold of the caller stays", &shards{next: map[string]backlog.Next{parent: waits(time.Minute)}},
			map[string]string{parent: "7"}, nil, nil, base.Add(10 * time.Second), base.Add(10 * time.Second), true, false, []string{parent + "@7"}},
		{"no position stored: no read", &shards{next: map[string]backlog.Next{parent: waits(0)}}, map[string]string{parent: ""}, nil, nil, time.Time{}, time.Time{}, false, false, nil},
		{"the stream cannot be read: no advance", &shards{err: errors.New("throttled")}, map[string]string{parent: "7"}, nil, nil, time.Time{}, base.Add(-5 * time.Second), false, true, []string{parent + "@7"}},
		{"resharded: a child not processed yet holds the parent back from its oldest record",
			&shards{next: map[string]backlog.Next{parent: split, c1: waits(2 * time.Minute)}},
			map[string]string{parent: "7"}, nil, nil, time.Time{}, base.Add(2*time.Minute - 35*time.Second), true, false, []string{parent + "@7", c1 + "@", c2 + "@"}},
		{"resharded: the earliest of the children's waiting records",
			&shards{next: map[string]backlog.Next{parent: split, c1: waits(3 * time.Minute), c2: waits(2 * time.Minute)}},
			map[string]string{parent: "7", c1: "9", c2: "11"}, map[string]time.Duration{c1: 4 * time.Minute, c2: 4 * time.Minute}, nil, time.Time{}, base.Add(2*time.Minute - 35*time.Second), true, false,
			[]string{parent + "@7", c1 + "@9", c2 + "@11"}},
		{"resharded, the children caught up: no further than the lower of their watermarks", &shards{next: map[string]backlog.Next{parent: split}},
			map[string]string{parent: "7", c1: "9", c2: "11"}, map[string]time.Duration{c1: 3 * time.Minute, c2: 2 * time.Minute}, nil, time.Time{}, base.Add(2*time.Minute - 5*time.Second), false, false,
			[]string{parent + "@7", c1 + "@9", c2 + "@11"}},
		{"resharded: a child's watermark below its waiting record's bound bounds the parent", &shards{next: map[string]backlog.Next{parent: split, c1: waits(3 * time.Minute)}},
			map[string]string{parent: "7", c1: "9", c2: "11"}, map[string]time.Duration{c1: time.Minute, c2: 4 * time.Minute}, nil, time.Time{}, base.Add(time.Minute - 5*time.Second), true, false,
			[]string{parent + "@7", c1 + "@9", c2 + "@11"}},
		{"resharded, a child with no event time yet bounds nothing", &shards{next: map[string]backlog.Next{parent: split}},
			map[string]string{parent: "7", c1: "9", c2: "11"}, map[string]time.Duration{c1: -1, c2: 4 * time.Minute}, nil, time.Time{}, base.Add(4*time.Minute - 5*time.Second), false, false,
			[]string{parent + "@7", c1 + "@9", c2 + "@11"}},
		{"resharded, no child stored a watermark: the clock decides", &shards{next: map[string]backlog.Next{parent: split}},
			map[string]string{parent: "7"}, nil, nil, time.Time{}, time.Time{}, false, false, []string{parent + "@7", c1 + "@", c2 + "@"}},
		{"resharded, a child's watermark stored before positions were: not read, its watermark still bounds", &shards{next: map[string]backlog.Next{parent: split, c1: waits(0)}},
			map[string]string{parent: "7", c1: "", c2: "11"}, map[string]time.Duration{c1: time.Minute, c2: 4 * time.Minute}, nil, time.Time{}, base.Add(time.Minute - 5*time.Second), false, false, []string{parent + "@7", c2 + "@11"}},
		{"resharded, a child holding records for its flush: no further than its hold", &shards{next: map[string]backlog.Next{parent: split}},
			map[string]string{parent: "7", c1: "9", c2: "11"}, map[string]time.Duration{c1: 4 * time.Minute, c2: 4 * time.Minute}, map[string]time.Time{c2: base.Add(time.Minute)}, time.Time{}, base.Add(time.Minute), false, false,
			[]string{parent + "@7", c1 + "@9", c2 + "@11"}},
		{"resharded, a child with only a hold (before its first flush) bounds the parent", &shards{next: map[string]backlog.Next{parent: split}},
			map[string]string{parent: "7"}, nil, map[string]time.Time{c1: base.Add(time.Minute)}, time.Time{}, base.Add(time.Minute), false, false,
			[]string{parent + "@7", c1 + "@", c2 + "@"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			marks := map[string]*window.Watermark{}
			for s := range tt.positions {
				marks[s] = wm()
				if d, ok := tt.seen[s]; ok {
					marks[s] = window.NewWatermark(5 * time.Second)
					if d >= 0 {
						marks[s].Observe(base.Add(d))
					}
				}
			}
			bound, waiting, err := backlog.IdleHold(context.Background(), tt.r, parent, backlog.Stored(tt.positions, marks, tt.holds), wm(), idle, tt.hold, now)
			if (err != nil) != tt.wantErr || !bound.Equal(tt.wantBound) || waiting != tt.wantWaiting || !slices.Equal(tt.r.reads, tt.wantReads) {
				t.Errorf("bound %v waiting %v error %v after reads %v; want %v %v error %v after %v",
					bound, waiting, err, tt.r.reads, tt.wantBound, tt.wantWaiting, tt.wantErr, tt.wantReads)
			}
		})
	}
	t.Run("an advance that would not move asks nothing", func(t *testing.T) {
		r := &shards{next: map[string]backlog.Next{parent: waits(0)}}
		if _, _, err := backlog.IdleHold(context.Background(), r, parent, backlog.Stored(map[string]string{parent: "7"}, nil, nil), wm(), idle, time.Time{}, base.Add(10*time.Second)); err != nil || len(r.reads) != 0 {
			t.Errorf("reads %v, error %v; want none", r.reads, err)
		}
	})
}

// A shard a reshard closed, read to its end, names the shards that took
// its keys (Kinesis' ChildShards, which moto does not return).
func TestFirstAfterNamesAClosedShardsChildren(t *testing.T) {
	b := backlog.New(closed{}, "events")
	next, err := b.FirstAfter(context.Background(), "shardId-000000000000", "49")
	if err != nil || next.Found || !slices.Equal(next.Children, []string{"shardId-000000000001", "shardId-000000000002"}) {
		t.Fatalf("%+v %v; want the two children, no record", next, err)
	}
}

// closed answers as Kinesis does at the end of a closed shard.
type closed struct{}

func (closed) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("it")}, nil
}

func (closed) GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(0), ChildShards: []types.ChildShard{
		{ShardId: aws.String("shardId-000000000001")}, {ShardId: aws.String("shardId-000000000002")}}}, nil
}
