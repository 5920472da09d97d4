package batch

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// StreamFailures collects the sequence numbers of failed Kinesis or DynamoDB
// stream records. The zero value is ready to use.
type StreamFailures struct {
	seqs []string
}

// Add records seq as failed; duplicates are reported once.
func (f *StreamFailures) Add(seq string) {
	if !slices.Contains(f.seqs, seq) {
		f.seqs = append(f.seqs, seq)
	}
}

// Len is the number of distinct failed sequence numbers.
func (f *StreamFailures) Len() int { return len(f.seqs) }

// Lowest is the lowest failed sequence number (compared as numbers), the one
// Lambda resumes from; "" when nothing failed.
func (f *StreamFailures) Lowest() string {
	s := f.sorted()
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (f *StreamFailures) sorted() []string {
	s := slices.Clone(f.seqs)
	slices.SortFunc(s, stream.CompareSequence)
	return s
}

// Kinesis is the response for a Kinesis batch: the failed sequence numbers,
// lowest first. BatchItemFailures is an empty (not nil) list when nothing
// failed, which Lambda reads as complete success.
func (f *StreamFailures) Kinesis() events.KinesisEventResponse {
	out := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	for _, s := range f.sorted() {
		out.BatchItemFailures = append(out.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: s})
	}
	return out
}

// DynamoDB is the response for a DynamoDB Streams batch, lowest first.
func (f *StreamFailures) DynamoDB() events.DynamoDBEventResponse {
	out := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	for _, s := range f.sorted() {
		out.BatchItemFailures = append(out.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: s})
	}
	return out
}

// InOrder calls fn for records 0..n-1 in order and stops at the first error,
// returning that record's index and the error; it returns n, nil when all
// succeeded. It also stops, with ctx's error, before a record when ctx is
// done (the invoke deadline): that record and the rest are then redelivered.
// Report the record at the returned index as the batch item failure.
func InOrder(ctx context.Context, n int, fn func(ctx context.Context, i int) error) (int, error) {
	for i := range n {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := fn(ctx, i); err != nil {
			return i, err
		}
	}
	return n, nil
}

// KinesisInOrder runs fn over recs with InOrder and answers the failed
// record's sequence number (nothing when all succeeded), with the error.
func KinesisInOrder(ctx context.Context, recs []events.KinesisEventRecord, fn func(ctx context.Context, rec *events.KinesisEventRecord) error) (events.KinesisEventResponse, error) {
	var f StreamFailures
	i, err := InOrder(ctx, len(recs), func(ctx context.Context, i int) error { return fn(ctx, &recs[i]) })
	if i < len(recs) {
		f.Add(recs[i].Kinesis.SequenceNumber)
	}
	return f.Kinesis(), err
}

// DynamoDBInOrder runs fn over recs with InOrder and answers the failed
// record's sequence number (nothing when all succeeded), with the error.
func DynamoDBInOrder(ctx context.Context, recs []events.DynamoDBEventRecord, fn func(ctx context.Context, rec *events.DynamoDBEventRecord) error) (events.DynamoDBEventResponse, error) {
	var f StreamFailures
	i, err := InOrder(ctx, len(recs), func(ctx context.Context, i int) error { return fn(ctx, &recs[i]) })
	if i < len(recs) {
		f.Add(recs[i].Change.SequenceNumber)
	}
	return f.DynamoDB(), err
}

// MessageError is one SQS message that was reported as failed, and why.
type MessageError struct {
	MessageID string
	// Err is fn's error, ErrGroupBlocked when an earlier message of the same
	// FIFO message group failed, or ctx's error when the deadline came first.
	Err error
}

// ErrGroupBlocked is the reason a FIFO message was failed without being
// processed: an earlier message of its message group failed.
var ErrGroupBlocked = errGroupBlocked{}

type errGroupBlocked struct{}

func (errGroupBlocked) Error() string {
	return "not processed: an earlier message of its FIFO message group failed"
}

// SQS calls fn for each message in order and reports the failed ones by
// message id. For messages with a MessageGroupId attribute (FIFO queues),
// after a failure the later messages of that group are failed without
// calling fn, so the group's order holds on redelivery. When ctx is done the
// remaining messages are failed with ctx's error. The second result lists
// every reported message with its reason, for logging.
func SQS(ctx context.Context, msgs []events.SQSMessage, fn func(ctx context.Context, msg *events.SQSMessage) error) (events.SQSEventResponse, []MessageError) {
	out := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var errs []MessageError
	var blocked map[string]bool
	fail := func(id string, err error) {
		out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		errs = append(errs, MessageError{MessageID: id, Err: err})
	}
	for i := range msgs {
		m := &msgs[i]
		group := m.Attributes["MessageGroupId"]
		if group != "" && blocked[group] {
			fail(m.MessageId, ErrGroupBlocked)
			continue
		}
		if err := ctx.Err(); err != nil {
			fail(m.MessageId, err)
			continue
		}
		if err := fn(ctx, m); err != nil {
			fail(m.MessageId, err)
			if group != "" {
				if blocked == nil {
					blocked = map[string]bool{}
				}
				blocked[group] = true
			}
		}
	}
	return out, errs
}

// Reserve returns a context that ends margin before ctx's deadline (the
// invoke deadline), so that a handler which stops when it ends still has
// time to answer with its batch response instead of being cut off by the
// timeout, which would redeliver the whole batch. Without a deadline it is
// ctx with a cancel func.
func Reserve(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-margin))
}
