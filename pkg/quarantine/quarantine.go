package quarantine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Retention is how long a quarantined record is kept (the TTL in expiresAt).
const Retention = setaside.Retention

// itemWriter is what the handler needs of DynamoDB: the quarantine table is
// written through a setaside.Sink (PutItem, BatchWriteItem, and UpdateItem
// for the messages it sets aside: package setaside keeps each function's
// entry of a record).
type itemWriter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ itemWriter = (*dynamodb.Client)(nil)

// Handler is the quarantine function's handler. Build it with New.
type Handler struct {
	kinesis  shardReader
	streams  streamReader
	sink     *setaside.Sink
	function string
	now      func() time.Time
	maxReads int
	maxBytes int
	metrics  *metrics.Logger
	log      *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithClock sets the clock for expiresAt.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithMetrics sets where EMF metrics go (nil: nowhere).
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithFunction names the function (its AWS_LAMBDA_FUNCTION_NAME) in the
// items of the messages it sets aside ("" keeps "quarantine").
func WithFunction(name string) Option {
	return func(h *Handler) {
		if name != "" {
			h.function = name
		}
	}
}

// WithDynamoDBStreams lets the handler fetch DynamoDB Streams batches; without
// it such a batch is kept as one item saying its records were not fetched.
func WithDynamoDBStreams(s streamReader) Option { return func(h *Handler) { h.streams = s } }

// New returns a handler that reads failed batches from Kinesis and writes
// them to the DynamoDB table named table.
func New(kin shardReader, db itemWriter, table string, opts ...Option) *Handler {
	h := &Handler{kinesis: kin, function: "quarantine", now: time.Now, maxReads: 50, maxBytes: MaxCopyBytes, log: slog.Default()}
	for _, o := range opts {
		o(h)
	}
	h.sink = setaside.New(db, table, setaside.WithFunction(h.function), setaside.WithMetrics(h.metrics),
		setaside.WithLogger(h.log), setaside.WithClock(h.now))
	return h
}

// Item is one row of the quarantine table (package setaside describes its
// kinds).
type Item = setaside.Item

// Handle quarantines each on-failure record in the SQS batch. A message
// that is not an on-failure record — malformed, a key twice, a field over
// its bound (Parse) — can never succeed: it is set aside (its body kept in
// the quarantine table with the field at fault, counted in
// UnparseableMessages and setaside.Metric) and reported processed, never
// sent back to the queue. A message whose records could not be read or written
// (throttling, timeouts) is reported as a batch item failure by message id
// and comes back after its visibility timeout.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if err := stream.CheckSQSEvent(&ev); err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("quarantine: %w", err)
	}
	defer func() {
		if err := h.metrics.Flush(); err != nil {
			h.log.Error("metrics flush", "err", err)
		}
	}()
	// Stop half a second before the invoke deadline: the messages not done
	// by then are reported as failed and come back after their visibility
	// timeout, and the answer gets out.
	ctx, cancel := batch.Reserve(ctx, 500*time.Millisecond)
	defer cancel()
	h.metrics.Add("MessagesIn", metrics.Count, float64(len(ev.Records)))
	h.metrics.Add("RecordsQuarantined", metrics.Count, 0)
	h.metrics.Add("RecordsMissing", metrics.Count, 0)
	h.metrics.Add("UnparseableMessages", metrics.Count, 0)
	h.metrics.Add(setaside.Metric, metrics.Count, 0)
	resp, errs := batch.SQS(ctx, ev.Records, h.handleMessage)
	for _, e := range errs {
		h.log.Error("message not quarantined; it will be retried", "messageId", e.MessageID, "err", e.Err.Error())
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg *events.SQSMessage) error {
	rec, kind, info, err := Parse([]byte(msg.Body))
	var pe *ParseError
	if errors.As(err, &pe) {
		// It can never succeed: keep its body (chunked and bounded as every
		// set-aside record's) with the field at fault, counted in
		// UnparseableMessages and setaside.Metric. Only a failure to write
		// it (throttling, a timeout) brings the message back.
		h.metrics.Add("UnparseableMessages", metrics.Count, 1)
		r := setaside.FromSQS(msg)
		r.Field, r.Kind, r.Reason = pe.Field, setaside.KindUnparseable, pe.Error()
		if err := h.sink.SetAside(ctx, []setaside.Record{r}); err != nil {
			return fmt.Errorf("message %s: %w; setting it aside: %w", msg.MessageId, pe, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("message %s: %w", msg.MessageId, err)
	}
	var res fetchResult
	switch kind {
	case Kinesis:
		res, err = h.fetchKinesis(ctx, info)
	case DynamoDBStreams:
		res, err = h.fetchDynamoDB(ctx, info)
	}
	if err != nil {
		return fmt.Errorf("message %s: reading %s: %w", msg.MessageId, info.Source(), err)
	}
	items := h.items(rec, kind, info, res)
	if err := h.sink.Keep(ctx, items); err != nil {
		// Parse bounds every field, so the items always fit (no
		// setaside.ErrUnwritable): what is left is transient.
		return fmt.Errorf("message %s: writing %d items for %s: %w", msg.MessageId, len(items), info.Source(), err)
	}
	h.metrics.Add("RecordsQuarantined", metrics.Count, float64(len(res.records)))
	if res.missing != "" {
		// At least 1, so that the alarm fires: a filtered batch's range
		// holds more records than its batchSize, and a read cut short does
		// not know how many it left.
		h.metrics.Add("RecordsMissing", metrics.Count, float64(max(info.BatchSize-len(res.records), 1)))
		h.log.Warn("failed batch not fully readable", "source", info.Source(), "reason", res.missing)
	}
	h.log.Info("quarantined", "messageId", msg.MessageId, "source", info.Source(), "records", len(res.records),
		"condition", rec.RequestContext.Condition, "functionArn", rec.RequestContext.FunctionArn)
	return nil
}

// items are the quarantine items of a failed batch: its records, and a
// marker when some could not be copied. Their source is the one a function
// setting the record aside gives it, so that a record set aside keeps its
// own item (Keep never replaces it) and a query finds both in one place:
// "<stream ARN>/<shard>" for Kinesis, the stream ARN alone for DynamoDB
// Streams (whose Lambda events name no shard; its sequence numbers are
// unique in the stream), the marker's reason naming the shard.
func (h *Handler) items(rec *OnFailureRecord, kind Kind, info *BatchInfo, res fetchResult) []Item {
	source := info.Source()
	if kind == DynamoDBStreams {
		source = info.StreamArn
	}
	base := Item{
		Source:        source,
		Condition:     rec.RequestContext.Condition,
		FunctionError: rec.ResponseContext.FunctionError,
		FunctionArn:   rec.RequestContext.FunctionArn,
		RequestID:     rec.RequestContext.RequestID,
		FailedAt:      rec.Timestamp,
		ExpiresAt:     h.now().Add(Retention).Unix(),
	}
	var items []Item
	for _, f := range res.records {
		it := base
		it.Kind = setaside.ItemRecord
		it.SequenceNumber = f.seq
		it.Data = f.data
		it.Reason = RangeReason(rec)
		it.PartitionKey, it.EventID, it.EventName, it.Redacted = f.partitionKey, f.eventID, f.eventName, f.redacted
		if !f.arrival.IsZero() {
			it.ApproximateArrival = f.arrival.UTC().Format(time.RFC3339Nano)
		}
		items = append(items, it)
	}
	if res.missing != "" {
		it := base
		found := len(res.records)
		it.Kind = setaside.ItemMissing
		it.SequenceNumber = info.StartSequenceNumber + "-" + info.EndSequenceNumber
		it.Reason = res.missing
		if kind == DynamoDBStreams {
			it.Reason = "shard " + info.ShardID + ": " + res.missing
		}
		it.StartSequenceNumber, it.EndSequenceNumber = info.StartSequenceNumber, info.EndSequenceNumber
		it.BatchSize, it.RecordsFound = info.BatchSize, &found
		it.ApproximateArrivalOfFirstRecord = info.ApproximateArrivalOfFirstRecord
		it.ApproximateArrivalOfLastRecord = info.ApproximateArrivalOfLastRecord
		items = append(items, it)
	}
	return items
}

// RangeReason is the reason of each record quarantine copies from a range
// Lambda gave up on. Functions set aside the records that can never
// succeed themselves, so what reaches the on-failure destination is a batch
// whose transient errors outlasted the mapping's retries or record age —
// and the range is the whole batch of the last attempt, so any of its
// records may have been applied before the failure.
func RangeReason(rec *OnFailureRecord) string {
	cond := rec.RequestContext.Condition
	if cond == "" {
		cond = "no condition given"
	}
	why := "batch retries exhausted"
	// Lambda's own word for it is RecordAgeExceeded (LocalStack and this
	// project's emulator send that); some emulators say
	// MaximumRecordAgeExceeded.
	if cond == "RecordAgeExceeded" || cond == "MaximumRecordAgeExceeded" {
		why = "records older than the mapping's MaximumRecordAgeInSeconds while their batch was retried"
	}
	fe := "the function reported batch item failures"
	if rec.ResponseContext.FunctionError != "" {
		fe = "function error " + rec.ResponseContext.FunctionError
	}
	return fmt.Sprintf("%s (%s; %s): a transient error (throttling, a timeout, a 5xx) outlasted the retries. "+
		"A record that can never succeed is set aside by its function with its own reason (kind %s), so this one was not found bad. "+
		"It may have been applied already: the range is the whole batch of the last attempt, records processed before the failure included. "+
		"Consumers fence a redelivery of the same sequence number, but a record put back on the stream gets a new one: "+
		"check the consumer's state before putting it back.", why, cond, fe, setaside.ItemSetAside)
}
