package quarantine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// Retention is how long a quarantined record is kept (the TTL in expiresAt).
const Retention = 14 * 24 * time.Hour

// MaxDataBytes is how much of a record's data an item keeps. DynamoDB items
// hold at most 400 KB and a Kinesis record can be 1 MiB or more: a bigger
// record is kept truncated, with dataBytes (its full size) and
// dataTruncated set.
const MaxDataBytes = 350 << 10

// itemWriter is what the handler needs of DynamoDB.
type itemWriter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

var _ itemWriter = (*dynamodb.Client)(nil)

// Handler is the quarantine function's handler. Build it with New.
type Handler struct {
	table    string
	kinesis  shardReader
	streams  streamReader
	db       itemWriter
	now      func() time.Time
	maxReads int
	sleep    func(time.Duration)
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

// WithDynamoDBStreams lets the handler fetch DynamoDB Streams batches; without
// it such a batch is kept as one item saying its records were not fetched.
func WithDynamoDBStreams(s streamReader) Option { return func(h *Handler) { h.streams = s } }

// New returns a handler that reads failed batches from Kinesis and writes
// them to the DynamoDB table named table.
func New(kin shardReader, db itemWriter, table string, opts ...Option) *Handler {
	h := &Handler{table: table, kinesis: kin, db: db, now: time.Now, maxReads: 50, sleep: time.Sleep, log: slog.Default()}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Item is one row of the quarantine table: a failed record (Kind "record")
// or a note that some records of a batch could not be read (Kind
// "missing", sequenceNumber "<start>-<end>", no data).
type Item struct {
	Source             string `dynamodbav:"source"`
	SequenceNumber     string `dynamodbav:"sequenceNumber"`
	Kind               string `dynamodbav:"kind"`
	Data               []byte `dynamodbav:"data,omitempty"`
	DataBytes          int    `dynamodbav:"dataBytes,omitempty"`
	DataTruncated      bool   `dynamodbav:"dataTruncated,omitempty"`
	PartitionKey       string `dynamodbav:"partitionKey,omitempty"`
	EventID            string `dynamodbav:"eventID,omitempty"`
	EventName          string `dynamodbav:"eventName,omitempty"`
	ApproximateArrival string `dynamodbav:"approximateArrival,omitempty"`
	Condition          string `dynamodbav:"condition"`
	FunctionError      string `dynamodbav:"functionError,omitempty"` // absent when the function answered with batch item failures
	FunctionArn        string `dynamodbav:"functionArn"`
	RequestID          string `dynamodbav:"requestId"`
	FailedAt           string `dynamodbav:"failedAt"`
	ExpiresAt          int64  `dynamodbav:"expiresAt"`

	// Set on "missing" items.
	Reason                          string `dynamodbav:"reason,omitempty"`
	StartSequenceNumber             string `dynamodbav:"startSequenceNumber,omitempty"`
	EndSequenceNumber               string `dynamodbav:"endSequenceNumber,omitempty"`
	BatchSize                       int    `dynamodbav:"batchSize,omitempty"`
	RecordsFound                    *int   `dynamodbav:"recordsFound,omitempty"`
	ApproximateArrivalOfFirstRecord string `dynamodbav:"approximateArrivalOfFirstRecord,omitempty"`
	ApproximateArrivalOfLastRecord  string `dynamodbav:"approximateArrivalOfLastRecord,omitempty"`
}

// Handle quarantines each on-failure record in the SQS batch; messages that
// cannot be parsed or whose records could not be written are reported as
// batch item failures by message id.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
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
	resp, errs := batch.SQS(ctx, ev.Records, h.handleMessage)
	for _, e := range errs {
		var pe *ParseError
		if errors.As(e.Err, &pe) {
			h.metrics.Add("UnparseableMessages", metrics.Count, 1)
			h.log.Error("unparseable message: left on the queue for its DLQ", "messageId", e.MessageID, "field", pe.Field, "err", e.Err.Error())
			continue
		}
		h.log.Error("message not quarantined; it will be retried", "messageId", e.MessageID, "err", e.Err.Error())
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg *events.SQSMessage) error {
	rec, kind, info, err := Parse([]byte(msg.Body))
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
	items := h.items(rec, info, res)
	if err := h.write(ctx, items); err != nil {
		return fmt.Errorf("message %s: writing %d items for %s: %w", msg.MessageId, len(items), info.Source(), err)
	}
	h.metrics.Add("RecordsQuarantined", metrics.Count, float64(len(res.records)))
	if res.missing != "" {
		h.metrics.Add("RecordsMissing", metrics.Count, float64(max(info.BatchSize-len(res.records), 0)))
		h.log.Warn("failed batch not fully readable", "source", info.Source(), "reason", res.missing)
	}
	h.log.Info("quarantined", "messageId", msg.MessageId, "source", info.Source(), "records", len(res.records),
		"condition", rec.RequestContext.Condition, "functionArn", rec.RequestContext.FunctionArn)
	return nil
}

func (h *Handler) items(rec *OnFailureRecord, info *BatchInfo, res fetchResult) []Item {
	base := Item{
		Source:        info.Source(),
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
		it.Kind = "record"
		it.SequenceNumber = f.seq
		it.Data = f.data
		it.DataBytes = len(f.data)
		if len(f.data) > MaxDataBytes {
			it.Data, it.DataTruncated = f.data[:MaxDataBytes], true
		}
		it.PartitionKey, it.EventID, it.EventName = f.partitionKey, f.eventID, f.eventName
		if !f.arrival.IsZero() {
			it.ApproximateArrival = f.arrival.UTC().Format(time.RFC3339Nano)
		}
		items = append(items, it)
	}
	if res.missing != "" {
		it := base
		found := len(res.records)
		it.Kind = "missing"
		it.SequenceNumber = info.StartSequenceNumber + "-" + info.EndSequenceNumber
		it.Reason = res.missing
		it.StartSequenceNumber, it.EndSequenceNumber = info.StartSequenceNumber, info.EndSequenceNumber
		it.BatchSize, it.RecordsFound = info.BatchSize, &found
		it.ApproximateArrivalOfFirstRecord = info.ApproximateArrivalOfFirstRecord
		it.ApproximateArrivalOfLastRecord = info.ApproximateArrivalOfLastRecord
		items = append(items, it)
	}
	return items
}

// write puts items: one with PutItem, more with BatchWriteItem in chunks of
// 25, retrying unprocessed items a few times.
func (h *Handler) write(ctx context.Context, items []Item) error {
	avs := make([]map[string]types.AttributeValue, len(items))
	for i := range items {
		av, err := attributevalue.MarshalMap(items[i])
		if err != nil {
			return fmt.Errorf("encoding item %s: %w", items[i].SequenceNumber, err)
		}
		avs[i] = av
	}
	if len(avs) == 1 {
		if _, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.table), Item: avs[0]}); err != nil {
			return fmt.Errorf("PutItem into %s: %w", h.table, err)
		}
		return nil
	}
	for start := 0; start < len(avs); start += 25 {
		reqs := make([]types.WriteRequest, 0, 25)
		for _, av := range avs[start:min(start+25, len(avs))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
		}
		pending := map[string][]types.WriteRequest{h.table: reqs}
		for attempt := 0; len(pending[h.table]) > 0; attempt++ {
			if attempt == 5 {
				return fmt.Errorf("BatchWriteItem into %s: %d items still unprocessed after %d attempts", h.table, len(pending[h.table]), attempt)
			}
			if attempt > 0 {
				h.sleep(time.Duration(50<<attempt) * time.Millisecond)
			}
			out, err := h.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("BatchWriteItem into %s: %w", h.table, err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}
