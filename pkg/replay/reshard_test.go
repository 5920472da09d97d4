package replay_test

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
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// reshardedStream is a Kinesis stream after a split, as AWS serves it: the
// closed parent keeps its records and ends with a nil NextShardIterator;
// the children hold the later records. (The stand-in moves a split shard's
// records into its children, so it cannot show the order.)
type reshardedStream struct {
	records map[string][]string // shard → sequence numbers
	shards  []kintypes.Shard
}

func newResharded() *reshardedStream {
	s := &reshardedStream{records: map[string][]string{
		"shardId-000000000000": {"100", "101", "102", "103"},
		"shardId-000000000001": {"200", "201"},
		"shardId-000000000002": {"300"},
	}}
	s.shards = []kintypes.Shard{
		{ShardId: aws.String("shardId-000000000000"), SequenceNumberRange: &kintypes.SequenceNumberRange{StartingSequenceNumber: aws.String("100"), EndingSequenceNumber: aws.String("103")}},
		{ShardId: aws.String("shardId-000000000001"), ParentShardId: aws.String("shardId-000000000000"), SequenceNumberRange: &kintypes.SequenceNumberRange{StartingSequenceNumber: aws.String("200")}},
		{ShardId: aws.String("shardId-000000000002"), ParentShardId: aws.String("shardId-000000000000"), SequenceNumberRange: &kintypes.SequenceNumberRange{StartingSequenceNumber: aws.String("300")}},
	}
	return s
}

func (s *reshardedStream) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &kintypes.StreamDescriptionSummary{
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/" + aws.ToString(in.StreamName))}}, nil
}

func (s *reshardedStream) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	// Children first: the replay must not rely on the listing's order.
	return &kinesis.ListShardsOutput{Shards: []kintypes.Shard{s.shards[2], s.shards[1], s.shards[0]}}, nil
}

func (s *reshardedStream) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(aws.ToString(in.ShardId) + "|0")}, nil
}

func (s *reshardedStream) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	shard, pos, _ := strings.Cut(aws.ToString(in.ShardIterator), "|")
	var i int
	fmt.Sscan(pos, &i)
	recs := s.records[shard]
	out := &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(0)}
	if i < len(recs) {
		time.Sleep(20 * time.Millisecond) // slow enough that children read early would interleave
		out.Records = []kintypes.Record{{SequenceNumber: aws.String(recs[i]), PartitionKey: aws.String("k"), Data: []byte(`{}`),
			ApproximateArrivalTimestamp: aws.Time(time.Now())}}
		out.MillisBehindLatest = aws.Int64(int64(len(recs)-i-1) * 1000)
		i++
	}
	if shard == "shardId-000000000000" && i >= len(recs) && len(out.Records) == 0 {
		return out, nil // closed and read to its end: no next iterator
	}
	out.NextShardIterator = aws.String(fmt.Sprintf("%s|%d", shard, i))
	return out, nil
}

// recorder is a handler that notes the order records reach it.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) HandleBatch(_ context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range ev.Records {
		r.order = append(r.order, rec.EventID)
	}
	return events.KinesisEventResponse{}, nil
}

// TestReplayReadsClosedParentsFirst: after a split, every record of the
// closed parent reaches the handler before any record of its children, and
// the replay catches up (and swaps) once the parent is read to its end and
// the children to their tips.
func TestReplayReadsClosedParentsFirst(t *testing.T) {
	f := newFixture(t, 1) // the views table and parameter; the stream is the fake
	rec := &recorder{}
	r := replay.New(newResharded(), f.db, replay.NewRegistry(f.ps, f.param))
	res, err := r.Run(context.Background(), replay.Options{Stream: "resharded", From: time.Now().Add(-time.Hour), Handover: 50 * time.Millisecond, Poll: 10 * time.Millisecond},
		func(string, *setaside.Sink) (replay.BatchHandler, error) { return rec, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Swapped || res.Read != 7 {
		t.Errorf("swapped %v, read %d; want a swap after all 7 records", res.Swapped, res.Read)
	}
	lastParent, firstChild := -1, len(rec.order)
	for i, id := range rec.order {
		if strings.HasPrefix(id, "shardId-000000000000:") {
			lastParent = i
		} else if i < firstChild {
			firstChild = i
		}
	}
	if lastParent > firstChild || len(rec.order) != 7 {
		t.Errorf("records reached the handler in the order %v: want all of shardId-000000000000 (the parent) first", rec.order)
	}
	for _, s := range res.Shards {
		if s.Shard == "shardId-000000000000" && !s.Done {
			t.Errorf("parent %+v: want read to its end", s)
		}
	}
}

// failing reports some records as batch item failures, as the aggregate
// processor reports poison records and failed writes.
type failing struct {
	recorder
	always map[string]bool // sequence numbers that always fail
	once   map[string]bool // sequence numbers that fail the first time
}

func (f *failing) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rec := range ev.Records {
		seq := rec.Kinesis.SequenceNumber
		if f.always[seq] || f.once[seq] {
			delete(f.once, seq)
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: seq}}}, nil
		}
		f.order = append(f.order, seq)
	}
	return events.KinesisEventResponse{}, nil
}

// A record reported failed once is retried and applied; one that keeps
// failing is skipped after MaxAttempts, counted and named in the progress.
func TestReplayRetriesThenSkipsFailedRecords(t *testing.T) {
	f := newFixture(t, 1)
	h := &failing{always: map[string]bool{"101": true}, once: map[string]bool{"200": true}}
	var progress syncbuf.Buffer
	r := replay.New(newResharded(), f.db, replay.NewRegistry(f.ps, f.param))
	res, err := r.Run(context.Background(), replay.Options{Stream: "resharded", From: time.Now().Add(-time.Hour), Handover: 50 * time.Millisecond,
		Poll: 10 * time.Millisecond, MaxAttempts: 3, Progress: &progress},
		func(string, *setaside.Sink) (replay.BatchHandler, error) { return h, nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 7 || res.Applied != 6 || res.Skipped != 1 {
		t.Errorf("read %d applied %d skipped %d, want 7, 6, 1", res.Read, res.Applied, res.Skipped)
	}
	if got := strings.Join(h.order, " "); !strings.Contains(got, "200") || strings.Contains(got, "101") {
		t.Errorf("applied %s: want 200 (failed once) applied and 101 (always failing) not", got)
	}
	if !strings.Contains(progress.String(), "record 101 still failed after 3 attempts: skipped") {
		t.Errorf("progress does not name the skipped record:\n%s", progress.String())
	}
}

// broken fails every batch, as a handler whose table is unreachable does.
type broken struct{}

func (broken) HandleBatch(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	return events.KinesisEventResponse{}, errors.New("table unreachable")
}

// A handler that keeps failing stops the replay with its error, and the
// parameter is not swapped.
func TestReplayStopsWithoutSwapWhenTheHandlerFails(t *testing.T) {
	f := newFixture(t, 1)
	reg := replay.NewRegistry(f.ps, f.param)
	res, err := replay.New(newResharded(), f.db, reg).Run(context.Background(), replay.Options{Stream: "resharded", From: time.Now().Add(-time.Hour), MaxAttempts: 2, Poll: 10 * time.Millisecond},
		func(string, *setaside.Sink) (replay.BatchHandler, error) { return broken{}, nil })
	if err == nil || !strings.Contains(err.Error(), "table unreachable") || errors.Is(err, context.Canceled) {
		t.Errorf("err %v: want the handler's error, not an interruption", err)
	}
	if res == nil || res.Swapped {
		t.Errorf("result %+v: want no swap", res)
	}
	if cur, _, err := reg.Current(context.Background()); err != nil || cur != f.table {
		t.Errorf("parameter names %q (%v), want still %s", cur, err, f.table)
	}
}
