package backlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// ShardReader is the part of the Kinesis client a Stream reads with.
type ShardReader interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Stream reads the backlog of a function on one Kinesis stream.
type Stream struct {
	client ShardReader
	name   string
	now    func() time.Time
}

// New reads the backlog on the stream called name.
func New(client ShardReader, name string) *Stream {
	return &Stream{client: client, name: name, now: time.Now}
}

// emptyPages bounds the GetRecords calls FirstAfter makes when Kinesis
// answers with no record while the shard has more (MillisBehindLatest
// above 0): it can, past a stretch with none.
const emptyPages = 3

// FirstAfter returns when the first record after seq on shard arrived on
// the stream (ApproximateArrivalTimestamp), and found false when there is
// none: the function has processed everything the shard holds. A shard
// the stream no longer has (closed and past its retention) has none. When
// seq is no longer on the stream (past its retention too), the shard's
// oldest record is the first after it. When Kinesis keeps answering with
// empty pages although the shard has more, the first record is taken to
// have arrived as long ago as the last page says it is behind the tip.
func (s *Stream) FirstAfter(ctx context.Context, shard, seq string) (arrived time.Time, found bool, err error) {
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(s.name), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seq)}
	it, err := s.client.GetShardIterator(ctx, in)
	var invalid *types.InvalidArgumentException
	if errors.As(err, &invalid) {
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeTrimHorizon, nil
		it, err = s.client.GetShardIterator(ctx, in)
	}
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("backlog: reading %s %s after %s: %w", s.name, shard, seq, err)
	}
	iter := it.ShardIterator
	var behind int64
	for page := 0; page < emptyPages && iter != nil; page++ {
		out, err := s.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1)})
		if errors.As(err, &notFound) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, fmt.Errorf("backlog: reading %s %s after %s: %w", s.name, shard, seq, err)
		}
		if len(out.Records) > 0 {
			if t := out.Records[0].ApproximateArrivalTimestamp; t != nil {
				return *t, true, nil
			}
			return s.now(), true, nil
		}
		behind = aws.ToInt64(out.MillisBehindLatest)
		if behind == 0 {
			return time.Time{}, false, nil
		}
		iter = out.NextShardIterator
	}
	if behind > 0 {
		return s.now().Add(-time.Duration(behind) * time.Millisecond), true, nil
	}
	return time.Time{}, false, nil // a closed shard read to its end
}
