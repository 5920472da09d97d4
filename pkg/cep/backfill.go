package cep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Running a rule over the past. A rule added now reads events that arrive
// from its activeFrom on; Backfill runs it over the events stream from an
// earlier time up to then, with the offline engine (the same matching and
// the same match ids), and puts the matches on the matches stream:
//
//   - matches that begin with an event that arrived before activeFrom are
//     the backfill's (it reads on past activeFrom to complete them, without
//     starting any match there), matches that begin later are the live
//     function's: the two never emit the same match;
//   - what the stream holds when it runs is all it sees: a match still open
//     at its end (an absence whose time is not over yet) is left out and
//     counted; running it again later adds it, and the matches emitted
//     before come again with their ids;
//   - a count or sum threshold counts events arriving before activeFrom
//     only, so a window straddling that moment is seen by neither;
//   - matches are put as each page of records is read, and keys with
//     nothing open are forgotten, so memory follows the partial matches
//     open, not the length of the stream; a backfill that fails partway
//     has put what it matched so far (a rerun puts it again, same ids);
//   - each shard is read on its own (its watermark as the function keeps
//     it); a child shard after a resharding starts without its parent's
//     partial matches.
//
// This is package replay's path (read each shard from a timestamp, run the
// same logic) without a new table: the matches stream is the output, and
// ids make a rerun harmless.

// ErrNothingToBackfill is a backfill that would start where the rule
// already applies.
var ErrNothingToBackfill = errors.New("cep: nothing to backfill")

// backfillKinesis is what Backfill needs of Kinesis.
type backfillKinesis interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ backfillKinesis = (*kinesis.Client)(nil)

// BackfillOptions say what to read and where matches go.
type BackfillOptions struct {
	// Stream is the events stream.
	Stream string
	// Matches is the matches stream; "" only counts the matches.
	Matches string
	// From is the arrival time to start at.
	From time.Time
	// OutOfOrderness and IdleTimeout are the CEP function's: at the end of
	// a shard that has not reached the end of the rule's time, the
	// watermark moves on as the tick would move an idle shard's.
	OutOfOrderness time.Duration
	IdleTimeout    time.Duration
	// Progress gets a line per shard; nil discards.
	Progress io.Writer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// BackfillResult is what a backfill did.
type BackfillResult struct {
	Shards, Records int
	// Matches counts the matches made (and put on the matches stream,
	// when one is given): they are put as each page of a shard is read,
	// not held, so a backfill's memory follows a page, not the matches.
	Matches int
	// Open counts keys whose partial matches were still open at the end
	// of the stream: run again after the rule's time has passed.
	Open int
}

// Backfill runs sr over the events stream from opts.From to sr's first
// activeFrom.
func Backfill(ctx context.Context, kin backfillKinesis, sr *StoredRule, opts BackfillOptions) (*BackfillResult, error) {
	if len(sr.Intervals) == 0 {
		return nil, fmt.Errorf("cep: rule %q has never been active", sr.Rule.ID)
	}
	if opts.OutOfOrderness < 0 || opts.IdleTimeout <= 0 {
		// A watermark moved past now would close partial matches that may
		// still complete: false absence matches on the matches stream.
		return nil, fmt.Errorf("cep: backfill: outOfOrderness %s and idleTimeout %s: want outOfOrderness 0 or more and idleTimeout above zero, as the detect function's CEP_CONFIG takes them", opts.OutOfOrderness, opts.IdleTimeout)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	activeFrom := sr.Intervals[0].From
	if !opts.From.Before(activeFrom) {
		return nil, fmt.Errorf("%w: %s is not before %s, when the rule began to apply (the live function covers it)", ErrNothingToBackfill, opts.From.Format(time.RFC3339), activeFrom.Format(time.RFC3339))
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	past := &StoredRule{Rule: sr.Rule, Status: StatusActive, Intervals: []Interval{{From: opts.From}}}
	// Read on until every match begun before activeFrom is over.
	stopAt := activeFrom.Add(sr.Rule.Within + opts.OutOfOrderness + time.Minute)
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(opts.Stream)})
	if err != nil {
		return nil, fmt.Errorf("cep: listing the shards of %s: %w", opts.Stream, err)
	}
	res := &BackfillResult{}
	// flush puts the matches off made so far and forgets them, and the
	// keys left with nothing open: what a shard's backfill holds is its
	// open partial matches and a page, however long the stream.
	reported := 0
	flush := func(off *Offline, read int) error {
		if len(off.matches) > 0 && opts.Matches != "" {
			recs := make([]emit.Record, len(off.matches))
			for i, m := range off.matches {
				recs[i] = emit.Record{Data: m.Record, PartitionKey: m.Key}
			}
			if err := emit.Put(ctx, kin, opts.Matches, recs, nil); err != nil {
				return fmt.Errorf("cep: putting backfill matches on %s: %w", opts.Matches, err)
			}
		}
		res.Matches += len(off.matches)
		off.matches = nil
		off.forgetIdle()
		if read-reported >= backfillProgressEvery {
			reported = read
			fmt.Fprintf(progress, "  ... %d records read, %d matches so far\n", res.Records+read, res.Matches)
		}
		return nil
	}
	for _, sh := range shards.Shards {
		off := NewOfflineStored([]*StoredRule{past}, opts.OutOfOrderness, now())
		off.beginBefore = activeFrom
		reported = 0
		n, complete, err := readShard(ctx, kin, opts.Stream, aws.ToString(sh.ShardId), opts.From, stopAt, off, flush)
		res.Records += n
		if err != nil {
			return res, err
		}
		res.Shards++
		// Past the rule's time everything is known; short of it, close only
		// what the watermark (moved on as for an idle shard) passed: a match
		// still open may yet complete.
		wm := now().Add(-opts.IdleTimeout - opts.OutOfOrderness).UnixMilli()
		if off.seen && off.wm > wm {
			wm = off.wm
		}
		if complete {
			wm = 1 << 60
		}
		for _, key := range off.order {
			ks := off.keys[key]
			ks.Advance(time.UnixMilli(wm))
			if err := off.collect(ks); err != nil {
				return nil, err
			}
			if len(ks.st.partials) > 0 || len(ks.st.pending) > 0 {
				res.Open++
			}
		}
		if err := flush(off, 0); err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "  %s: %d records, %d matches so far\n", aws.ToString(sh.ShardId), n, res.Matches)
	}
	return res, nil
}

// backfillProgressEvery is how many records of a shard a backfill reads
// between two progress lines.
const backfillProgressEvery = 100_000

// readShard feeds one shard's records from from (arrival) to stopAt (or
// the end of the stream) to off, calling flush after each page read
// with the records read so far;
// complete reports that it reached stopAt.
func readShard(ctx context.Context, kin backfillKinesis, streamName, shard string, from, stopAt time.Time, off *Offline, flush func(off *Offline, read int) error) (n int, complete bool, err error) {
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(streamName), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(from)})
	if err != nil {
		return 0, false, fmt.Errorf("cep: reading %s from %s: %w", shard, from.Format(time.RFC3339), err)
	}
	iter := it.ShardIterator
	for iter != nil {
		page, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
		if err != nil {
			var te *kintypes.ProvisionedThroughputExceededException
			if errors.As(err, &te) {
				select {
				case <-ctx.Done():
					return n, false, ctx.Err()
				case <-time.After(time.Second):
				}
				continue
			}
			return n, false, fmt.Errorf("cep: reading %s: %w", shard, err)
		}
		for _, r := range page.Records {
			arrival := aws.ToTime(r.ApproximateArrivalTimestamp)
			if !arrival.Before(stopAt) {
				return n, true, flush(off, n)
			}
			// Decoded as the detect function decodes it (keyed), so what it
			// sets aside — a receivedAt far past the arrival too, which
			// would move the watermark hours ahead — moves no watermark
			// here either; an envelope without receivedAt gets the arrival.
			kr := stream.KinesisRecord{SequenceNumber: aws.ToString(r.SequenceNumber), PartitionKey: aws.ToString(r.PartitionKey),
				ApproximateArrivalTimestamp: arrival, Data: r.Data}
			var env stream.Envelope
			if kr.DecodeEnvelope(&env) != nil {
				continue // not an event: the function sets it aside
			}
			if err := off.Add(&env, arrival); err != nil {
				return n, false, err
			}
			n++
		}
		if err := flush(off, n); err != nil {
			return n, false, err
		}
		if len(page.Records) == 0 && aws.ToInt64(page.MillisBehindLatest) == 0 {
			return n, false, nil
		}
		iter = page.NextShardIterator
	}
	return n, true, nil // a closed shard, read to its end
}
