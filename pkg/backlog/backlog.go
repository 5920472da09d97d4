package backlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/window"
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

// Reader is what IdleHold asks: a *Stream, or a stand-in in tests.
type Reader interface {
	FirstAfter(ctx context.Context, shard, seq string) (arrived time.Time, found bool, err error)
}

// IdleHold is how far a ticker may advance shard's watermark wm as idle at
// now: no further than hold (zero: no bound of the caller's), and, when
// the stream holds records after through (the last record the function
// committed with the watermark), no further than idleTimeout +
// outOfOrderness before the first of them arrived — the advance assumes a
// record reaches the stream within idleTimeout of happening, and those
// records have yet to be applied. waiting reports that such a record
// bounds it. It reads the stream only when the advance would move wm, and
// not at all without r or through. When the stream cannot be read it
// returns the error, naming the shard, and the caller must not advance the
// shard at all: the bound it returns then, wm's current value, is zero for
// a watermark that has seen no event time, which AdvanceIdleHeld takes for
// no bound.
func IdleHold(ctx context.Context, r Reader, shard, through string, wm *window.Watermark, idleTimeout time.Duration, hold, now time.Time) (bound time.Time, waiting bool, err error) {
	if r == nil || through == "" {
		return hold, false, nil // no position stored yet: the clock decides
	}
	if trial := *wm; !trial.AdvanceIdleHeld(now, idleTimeout, hold) {
		return hold, false, nil // it would not move: nothing to ask
	}
	arrived, found, err := r.FirstAfter(ctx, shard, through)
	if err != nil {
		return wm.Current(), false, fmt.Errorf("shard %s not advanced as idle: %w", shard, err)
	}
	if !found {
		return hold, false, nil
	}
	bound = arrived.Add(-idleTimeout - wm.OutOfOrderness)
	if hold.IsZero() || bound.Before(hold) {
		return bound, true, nil
	}
	return hold, true, nil
}
