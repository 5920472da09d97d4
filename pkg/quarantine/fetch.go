package quarantine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// shardReader is what the handler needs of Kinesis.
type shardReader interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ shardReader = (*kinesis.Client)(nil)

// streamReader is what the handler needs of DynamoDB Streams.
type streamReader interface {
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ streamReader = (*dynamodbstreams.Client)(nil)

// fetched is one failed record read back from its stream.
type fetched struct {
	seq          string
	data         []byte
	partitionKey string    // Kinesis
	eventID      string    // DynamoDB Streams
	eventName    string    // DynamoDB Streams
	redacted     []string  // DynamoDB Streams: fields removed as personal data
	arrival      time.Time // approximate arrival (Kinesis) or creation (DynamoDB)
}

// fetchResult is what could be read of a batch. missing is "" when every
// record of the batch was found, else why not.
type fetchResult struct {
	records []fetched
	missing string
}

// maxEmptyReads ends a read of a shard that keeps answering nothing.
const maxEmptyReads = 3

// The most records one GetRecords call returns: Kinesis's and DynamoDB
// Streams' Limit bounds.
const (
	maxKinesisRecordsPerRead = 10000
	maxStreamsRecordsPerRead = 1000
)

// MaxCopyBytes bounds the records one message copies (their data, keys
// and sequence numbers, as held in memory): a failed range holds every
// record between its first and last sequence numbers, many MB when a
// filter let few of them into the batch. It is setaside.MaxDataBytes, so
// that the largest record kept whole is always copied, and with one
// GetRecords response (at most 10 MiB) it fits the function's memory. A
// read stops before the record that would pass it; the marker item names
// the range left (see Handler).
const MaxCopyBytes = setaside.MaxDataBytes

// errGone marks errors meaning the records cannot be read any more.
var errGone = errors.New("records are no longer readable")

// errCutShort marks a read that stopped at its limit of calls or bytes.
var errCutShort = errors.New("stopped reading")

// goneError wraps err with errGone when it says the stream, shard or
// position does not exist (any more).
func goneError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ResourceNotFoundException", "InvalidArgumentException", "TrimmedDataAccessException", "ValidationException":
			return fmt.Errorf("%w: %w", errGone, err)
		}
	}
	return err
}

// collect keeps the records of page within [start, end] and says whether the
// end of the batch was passed.
type collector struct {
	info  *BatchInfo
	out   []fetched
	done  bool
	empty int
	// maxBytes bounds bytes, what out holds; full is set, and next is the
	// first record not copied, when a record would have passed it.
	maxBytes, bytes int
	full            bool
	next            string
	// stalled is set when the read stopped on empty answers short of the
	// shard's tip (Kinesis's MillisBehindLatest above 0): the rest may
	// still be there.
	stalled bool
}

func (c *collector) add(f fetched) {
	if stream.CompareSequence(f.seq, c.info.EndSequenceNumber) > 0 {
		c.done = true
		return
	}
	if stream.CompareSequence(f.seq, c.info.StartSequenceNumber) >= 0 {
		size := len(f.seq) + len(f.data) + len(f.partitionKey) + len(f.eventID) + len(f.eventName)
		for _, r := range f.redacted {
			size += len(r)
		}
		// The first record is always kept, so that a read moves on
		// (none is over the bound: see MaxCopyBytes).
		if len(c.out) > 0 && c.bytes+size > c.maxBytes {
			c.full, c.next, c.done = true, f.seq, true
			return
		}
		c.bytes += size
		c.out = append(c.out, f)
	}
	if f.seq == c.info.EndSequenceNumber {
		c.done = true
	}
}

func (c *collector) last() string {
	if len(c.out) == 0 {
		return ""
	}
	return c.out[len(c.out)-1].seq
}

func (c *collector) result(readErr error) fetchResult {
	r := fetchResult{records: c.out}
	complete := len(c.out) > 0 && c.out[0].seq == c.info.StartSequenceNumber && c.last() == c.info.EndSequenceNumber
	if !complete {
		rest := "the others are no longer in the stream"
		if errors.Is(readErr, errCutShort) {
			rest = "the others were not read"
		}
		// The range can hold more records than the batch: with filter
		// criteria the mapping delivered only those that matched.
		r.missing = fmt.Sprintf("copied %d records of the range from sequence number %s to %s (that of a batch of %d; with filter criteria the range holds more records than the batch); %s",
			len(c.out), c.info.StartSequenceNumber, c.info.EndSequenceNumber, c.info.BatchSize, rest)
		if readErr != nil {
			r.missing += " (" + readErr.Error() + ")"
		}
	}
	return r
}

// page is one GetRecords answer, in the terms readRange needs.
type page struct {
	records []fetched
	next    *string // nil: the shard is closed
	// atTip: the answer says nothing more is in the shard (Kinesis's
	// MillisBehindLatest 0).
	atTip bool
}

// errExpired marks a read whose shard iterator expired: readRange asks for
// another where the read stopped.
var errExpired = errors.New("shard iterator expired")

// shardSource is one service's shard as readRange reads it.
type shardSource struct {
	// iterator asks for an iterator at seq, or just after it.
	iterator func(ctx context.Context, after bool, seq string) (*string, error)
	// read makes one GetRecords call (errExpired for an expired iterator).
	read func(ctx context.Context, it *string) (page, error)
	// emptyMayHideMore: empty answers short of the tip do not mean the
	// shard holds nothing further (Kinesis may answer nothing for a while
	// before a part of the shard that holds records).
	emptyMayHideMore bool
}

// readRange reads the batch's range from src. It returns an error only for
// failures worth retrying (throttling, network); a stream, shard or
// position that no longer exists is a fetchResult with missing set.
func (h *Handler) readRange(ctx context.Context, info *BatchInfo, src shardSource) (fetchResult, error) {
	c := &collector{info: info, maxBytes: h.maxBytes}
	it, err := src.iterator(ctx, false, info.StartSequenceNumber)
	if errors.Is(err, errGone) {
		return c.result(err), nil
	} else if err != nil {
		return fetchResult{}, err
	}
	calls := 0
	for ; it != nil && !c.done && calls < h.maxReads; calls++ {
		p, err := src.read(ctx, it)
		if errors.Is(err, errExpired) {
			if last := c.last(); last != "" {
				it, err = src.iterator(ctx, true, last)
			} else {
				it, err = src.iterator(ctx, false, info.StartSequenceNumber)
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			err = goneError(err)
			if errors.Is(err, errGone) {
				return c.result(err), nil
			}
			return fetchResult{}, fmt.Errorf("GetRecords: %w", err)
		}
		for _, f := range p.records {
			c.add(f)
			if c.done {
				break
			}
		}
		if len(p.records) == 0 {
			c.empty++
			if p.atTip {
				break // the rest is not there
			}
			if c.empty >= maxEmptyReads {
				// Not gone, not read, where the service may still hold it.
				c.stalled = src.emptyMayHideMore
				break
			}
		} else {
			c.empty = 0
		}
		it = p.next // nil: the shard is closed
	}
	return c.result(h.cutShort(calls, c)), nil
}

// fetchKinesis reads the batch's records from its Kinesis shard.
func (h *Handler) fetchKinesis(ctx context.Context, info *BatchInfo) (fetchResult, error) {
	iterator := func(ctx context.Context, after bool, seq string) (*string, error) {
		typ := kinesistypes.ShardIteratorTypeAtSequenceNumber
		if after {
			typ = kinesistypes.ShardIteratorTypeAfterSequenceNumber
		}
		out, err := h.kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamARN:              aws.String(info.StreamArn),
			ShardId:                aws.String(info.ShardID),
			ShardIteratorType:      typ,
			StartingSequenceNumber: aws.String(seq),
		})
		if err != nil {
			return nil, goneError(fmt.Errorf("GetShardIterator %s %s: %w", typ, seq, err))
		}
		return out.ShardIterator, nil
	}
	read := func(ctx context.Context, it *string) (page, error) {
		// Each read asks for the most GetRecords returns, not batchSize: a
		// mapping with filter criteria delivers only the records that
		// match, so the batch's range in the shard may hold many more
		// records than the batch did. Those past the end are dropped
		// (collector). StreamARN is optional here for Kinesis, but moto
		// needs it when the iterator was asked for by ARN.
		out, err := h.kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it,
			Limit: aws.Int32(maxKinesisRecordsPerRead), StreamARN: aws.String(info.StreamArn)})
		if err != nil {
			var expired *kinesistypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				return page{}, fmt.Errorf("%w: %w", errExpired, err)
			}
			return page{}, err
		}
		p := page{next: out.NextShardIterator, atTip: aws.ToInt64(out.MillisBehindLatest) == 0}
		for _, r := range out.Records {
			p.records = append(p.records, fetched{seq: aws.ToString(r.SequenceNumber), data: r.Data,
				partitionKey: aws.ToString(r.PartitionKey), arrival: aws.ToTime(r.ApproximateArrivalTimestamp)})
		}
		return p, nil
	}
	return h.readRange(ctx, info, shardSource{iterator: iterator, read: read, emptyMayHideMore: true})
}

// fetchDynamoDB reads the batch's records from its DynamoDB stream shard.
// Each record's data is the JSON of the record as Lambda delivers it
// (events.DynamoDBEventRecord), so it can be replayed into the consumer,
// without personal data (setaside.DynamoDBData: the images lose the
// attribute setaside.PersonalAttribute).
func (h *Handler) fetchDynamoDB(ctx context.Context, info *BatchInfo) (fetchResult, error) {
	if h.streams == nil {
		return fetchResult{missing: "records not fetched: the function has no DynamoDB Streams client"}, nil
	}
	iterator := func(ctx context.Context, after bool, seq string) (*string, error) {
		typ := streamtypes.ShardIteratorTypeAtSequenceNumber
		if after {
			typ = streamtypes.ShardIteratorTypeAfterSequenceNumber
		}
		out, err := h.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn:         aws.String(info.StreamArn),
			ShardId:           aws.String(info.ShardID),
			ShardIteratorType: typ,
			SequenceNumber:    aws.String(seq),
		})
		if err != nil {
			return nil, goneError(fmt.Errorf("GetShardIterator %s %s: %w", typ, seq, err))
		}
		return out.ShardIterator, nil
	}
	read := func(ctx context.Context, it *string) (page, error) {
		out, err := h.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it,
			Limit: aws.Int32(maxStreamsRecordsPerRead)}) // as for Kinesis: not batchSize
		if err != nil {
			var expired *streamtypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				return page{}, fmt.Errorf("%w: %w", errExpired, err)
			}
			return page{}, err
		}
		p := page{next: out.NextShardIterator}
		for _, r := range out.Records {
			if r.Dynamodb == nil {
				continue
			}
			rec := stream.FromStreamsRecord(&r, info.StreamArn)
			data, redacted, err := setaside.DynamoDBData(&rec)
			if err != nil {
				return page{}, fmt.Errorf("encoding stream record %s: %w", aws.ToString(r.EventID), err)
			}
			p.records = append(p.records, fetched{seq: aws.ToString(r.Dynamodb.SequenceNumber), data: data, eventID: aws.ToString(r.EventID),
				eventName: string(r.EventName), redacted: redacted, arrival: aws.ToTime(r.Dynamodb.ApproximateCreationDateTime)})
		}
		return p, nil
	}
	return h.readRange(ctx, info, shardSource{iterator: iterator, read: read})
}

// cutShort is why a read that made calls GetRecords calls stopped before
// the batch's end: nil unless it reached its bound of bytes or ran out of
// calls, so that the marker does not say of records still in the stream
// that they are gone. It names the range not copied by its sequence
// numbers.
func (h *Handler) cutShort(calls int, c *collector) error {
	if c.full {
		return fmt.Errorf("%w at %d bytes, the most one message copies (%d): the records from sequence number %s to %s were not copied and may still be in the stream",
			errCutShort, c.bytes, c.maxBytes, c.next, c.info.EndSequenceNumber)
	}
	if c.done || (calls < h.maxReads && !c.stalled) {
		return nil
	}
	left := "from sequence number " + c.info.StartSequenceNumber
	if last := c.last(); last != "" {
		left = "after sequence number " + last
	}
	after := fmt.Sprintf("after %d GetRecords calls", calls)
	if c.stalled {
		after = fmt.Sprintf("after %d empty GetRecords answers short of the shard's tip", c.empty)
	}
	return fmt.Errorf("%w %s: the records %s to %s were not copied and may still be in the stream", errCutShort, after, left, c.info.EndSequenceNumber)
}
