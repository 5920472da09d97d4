package emit

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Putter is the Kinesis call Put makes.
type Putter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ Putter = (*kinesis.Client)(nil)

// Record is one record to put.
type Record struct {
	Data         []byte
	PartitionKey string
}

// Attempts bounds the PutRecords attempts for entries Kinesis failed.
const Attempts = 5

// Backoff is the default wait before attempt+1.
func Backoff(attempt int) time.Duration { return time.Duration(25<<min(attempt, 6)) * time.Millisecond }

// TooLargeError is a record over Kinesis' 1 MiB: it can never be put.
type TooLargeError struct {
	Index, Bytes int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("record %d is %d bytes with its partition key; Kinesis accepts at most %d", e.Index, e.Bytes, limits.KinesisRecordBytes)
}

// Put writes recs to stream, in order per call, retrying the entries Kinesis
// refused (throttling) up to Attempts times. A retried entry can land after
// later ones: consumers order by the records' own fields, not by position.
// backoff nil means Backoff.
func Put(ctx context.Context, kin Putter, stream string, recs []Record, backoff func(int) time.Duration) error {
	if len(recs) == 0 {
		return nil
	}
	if backoff == nil {
		backoff = Backoff
	}
	for i, r := range recs {
		if n := limits.KinesisRecordSize(r.Data, r.PartitionKey); n > limits.KinesisRecordBytes {
			return &TooLargeError{Index: i, Bytes: n}
		}
	}
	start, size := 0, 0
	for i := 0; i <= len(recs); i++ {
		n := 0
		if i < len(recs) {
			n = limits.KinesisRecordSize(recs[i].Data, recs[i].PartitionKey)
		}
		if i == len(recs) || (i > start && (i-start == limits.KinesisPutRecordsEntries || size+n > limits.KinesisPutRecordsBytes)) {
			if err := putChunk(ctx, kin, stream, recs[start:i], backoff); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += n
	}
	return nil
}

func putChunk(ctx context.Context, kin Putter, stream string, recs []Record, backoff func(int) time.Duration) error {
	pending := make([]kintypes.PutRecordsRequestEntry, len(recs))
	for i, r := range recs {
		pending[i] = kintypes.PutRecordsRequestEntry{Data: r.Data, PartitionKey: aws.String(r.PartitionKey)}
	}
	for attempt := 1; ; attempt++ {
		out, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: pending})
		if err != nil {
			return fmt.Errorf("emit: putting %d records on stream %s: %w", len(pending), stream, err)
		}
		if aws.ToInt32(out.FailedRecordCount) == 0 {
			return nil
		}
		var failed []kintypes.PutRecordsRequestEntry
		last := ""
		for i, r := range out.Records {
			if r.ErrorCode != nil && i < len(pending) {
				failed = append(failed, pending[i])
				last = aws.ToString(r.ErrorCode) + ": " + aws.ToString(r.ErrorMessage)
			}
		}
		if len(failed) == 0 {
			return fmt.Errorf("emit: stream %s reported %d failed records but none carries an error code", stream, aws.ToInt32(out.FailedRecordCount))
		}
		if attempt == Attempts {
			return fmt.Errorf("emit: stream %s: %d records still failed after %d attempts (last error %s)", stream, len(failed), attempt, last)
		}
		pending = failed
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff(attempt)):
		}
	}
}
