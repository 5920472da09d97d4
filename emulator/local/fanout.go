package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// FanOut is, for one stream, the records on it and what every event source
// mapping subscribed to it delivered: with fan-out, each subscriber gets
// every record (compare Work, where each task goes to one worker).
type FanOut struct {
	Stream      string
	Records     int // records on the stream
	Subscribers []Subscriber
}

// Subscriber is one mapping's share of a FanOut.
type Subscriber struct {
	Function, Mapping string
	// Consumer is the enhanced fan-out consumer ARN, or "" for a mapping
	// sharing the shards' read throughput.
	Consumer string
	// Received is how many of the stream's records the function was
	// invoked with; Deliveries counts redeliveries too; Filtered is what
	// its filter criteria dropped; Missing = Records − Received − Filtered.
	Received, Deliveries, Filtered, Missing int
}

// Complete reports whether every subscriber got every record (or filtered it).
func (f FanOut) Complete() bool {
	for _, s := range f.Subscribers {
		if s.Missing > 0 {
			return false
		}
	}
	return len(f.Subscribers) > 0
}

// Print writes one line per subscriber.
func (f FanOut) Print(w io.Writer) {
	parts := make([]string, 0, len(f.Subscribers))
	for _, s := range f.Subscribers {
		via := "shared throughput"
		if s.Consumer != "" {
			via = "EFO consumer " + shortARN(s.Consumer)
		}
		p := fmt.Sprintf("%s %d/%d (%s", s.Function, s.Received, f.Records, via)
		if s.Deliveries > s.Received {
			p += fmt.Sprintf(", %d redelivered", s.Deliveries-s.Received)
		}
		if s.Filtered > 0 {
			p += fmt.Sprintf(", %d filtered", s.Filtered)
		}
		parts = append(parts, p+")")
	}
	noun := "subscribers"
	if len(f.Subscribers) == 1 {
		noun = "subscriber"
	}
	verdict := "each got every record its filter passes"
	if !f.Complete() {
		verdict = "NOT every subscriber got every record"
	}
	fmt.Fprintf(w, "fan-out: %d records on stream %s to %d %s, %s: %s\n", f.Records, f.Stream, len(f.Subscribers), noun, verdict, strings.Join(parts, " · "))
}

// FanOut reads every record on the stream named streamName and waits, up to
// wait, until each mapping subscribed to it has delivered them all; it then
// returns what each delivered. Which records a mapping delivered comes from
// the runner's observation of its batches.
func (s *Stack) FanOut(ctx context.Context, streamName string, wait time.Duration) (FanOut, error) {
	var arn string
	for _, st := range s.deployment.Streams() {
		if st.Name == streamName || st.ARN == streamName {
			arn, streamName = st.ARN, st.Name
		}
	}
	if arn == "" {
		return FanOut{}, fmt.Errorf("local: no stream %s in the deployment", streamName)
	}
	seqs, err := streamRecords(ctx, kinesis.NewFromConfig(s.cfg), streamName)
	if err != nil {
		return FanOut{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		f := FanOut{Stream: streamName, Records: len(seqs)}
		for _, d := range s.stats.Deliveries(arn) {
			sub := Subscriber{Function: d.Function, Mapping: d.Mapping, Consumer: d.Consumer, Deliveries: d.Records, Filtered: d.Filtered}
			for _, seq := range seqs {
				if _, ok := d.IDs[seq]; ok {
					sub.Received++
				}
			}
			sub.Missing = max(0, f.Records-sub.Received-sub.Filtered)
			if d.Capped {
				sub.Missing = 0 // too many records to tell; counts are lower bounds
			}
			f.Subscribers = append(f.Subscribers, sub)
		}
		if f.Complete() || !time.Now().Before(deadline) {
			return f, nil
		}
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recordReader is what streamRecords needs of Kinesis.
type recordReader interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ recordReader = (*kinesis.Client)(nil)

// streamRecords returns every record on the stream as "<shard id>/<sequence
// number>", as Stats keeps them.
func streamRecords(ctx context.Context, c recordReader, stream string) ([]string, error) {
	var seqs []string
	var next *string
	for {
		in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
		if next != nil {
			in = &kinesis.ListShardsInput{NextToken: next}
		}
		out, err := c.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the shards of %s: %w", stream, err)
		}
		for _, sh := range out.Shards {
			it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return nil, fmt.Errorf("reading shard %s of %s: %w", aws.ToString(sh.ShardId), stream, err)
			}
			iter := it.ShardIterator
			for iter != nil {
				recs, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					return nil, fmt.Errorf("reading shard %s of %s: %w", aws.ToString(sh.ShardId), stream, err)
				}
				for _, r := range recs.Records {
					seqs = append(seqs, aws.ToString(sh.ShardId)+"/"+aws.ToString(r.SequenceNumber))
				}
				if len(recs.Records) == 0 || aws.ToInt64(recs.MillisBehindLatest) == 0 && len(recs.Records) < 10000 {
					break
				}
				iter = recs.NextShardIterator
			}
		}
		if next = out.NextToken; next == nil {
			return seqs, nil
		}
	}
}

// WrittenEvents returns, for each of ids, the event time of every record
// on the stream whose JSON data has that "id" (an event envelope's id),
// reading every shard from its start: how many times each event was
// written, whatever a function's mapping delivered or retried, and the time
// a pipeline windows it by (stream.Envelope.EventTime: occurredAt moved by
// receivedAt − sentAt, which ingest stamps; occurredAt alone put an event
// sent as a minute ended in the minute before the one its window is).
func WrittenEvents(ctx context.Context, cfg aws.Config, streamName string, ids []string) (map[string][]time.Time, error) {
	c := kinesis.NewFromConfig(cfg)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	written := map[string][]time.Time{}
	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(streamName)})
	if err != nil {
		return nil, fmt.Errorf("listing the shards of %s: %w", streamName, err)
	}
	for _, sh := range shards.Shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(streamName), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, fmt.Errorf("reading shard %s of %s: %w", aws.ToString(sh.ShardId), streamName, err)
		}
		for iter := it.ShardIterator; iter != nil; {
			recs, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				return nil, fmt.Errorf("reading shard %s of %s: %w", aws.ToString(sh.ShardId), streamName, err)
			}
			for _, r := range recs.Records {
				var ev stream.Envelope
				if json.Unmarshal(r.Data, &ev) == nil && want[ev.ID] {
					written[ev.ID] = append(written[ev.ID], ev.EventTime())
				}
			}
			if len(recs.Records) == 0 || aws.ToInt64(recs.MillisBehindLatest) == 0 && len(recs.Records) < 10000 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	return written, nil
}
