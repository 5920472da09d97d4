package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Changelog record types.
const (
	TypeChanged  = "profile_changed"
	TypeDeleted  = "profile_deleted"
	TypeSnapshot = "profile_snapshot"
)

// DefaultEntityKeyAttribute is the key attribute used when
// ENTITY_KEY_ATTRIBUTE is not set.
const DefaultEntityKeyAttribute = "userId"

// VersionAttribute is the number attribute the table's writer bumps on
// every write of an item.
const VersionAttribute = "version"

// maxPutRecords is Kinesis' limit of records per PutRecords call.
const maxPutRecords = 500

// recordPutter is the Kinesis call the handler makes.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// Data is the data field of a changelog record.
type Data struct {
	// Key is the entity key (the record's partition key).
	Key string `json:"key"`
	// Version is the item's version (see the package doc).
	Version json.Number `json:"version"`
	// Image is the item as plain JSON; nil (null) for a tombstone.
	Image map[string]any `json:"image"`
	// SequenceNumber is the DynamoDB stream record's sequence number; empty
	// in a snapshot record.
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// SnapshotOf is the stream position a snapshot record is tied to; only
	// in snapshot records.
	SnapshotOf *Position `json:"snapshotOf,omitempty"`
}

// Handler is the cdc function: DynamoDB stream batches in, changelog
// records out on the events stream.
type Handler struct {
	kin     recordPutter
	stream  string
	keyAttr string
	metrics *metrics.Logger
	log     *slog.Logger
}

// Option configures a Handler.
type Option func(*Handler)

// WithEntityKeyAttribute names the item attribute holding the entity key.
func WithEntityKeyAttribute(name string) Option { return func(h *Handler) { h.keyAttr = name } }

// WithMetrics emits ChangesIn, ChangelogRecords and Tombstones per batch.
func WithMetrics(m *metrics.Logger) Option { return func(h *Handler) { h.metrics = m } }

// WithLogger logs records that cannot become changelog records.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// EnvOptions reads ENTITY_KEY_ATTRIBUTE (optional; DefaultEntityKeyAttribute).
func EnvOptions(getenv func(string) string) []Option {
	if v := getenv("ENTITY_KEY_ATTRIBUTE"); v != "" {
		return []Option{WithEntityKeyAttribute(v)}
	}
	return nil
}

// New returns a Handler writing to the Kinesis stream named streamName.
func New(kin recordPutter, streamName string, opts ...Option) *Handler {
	h := &Handler{kin: kin, stream: streamName, keyAttr: DefaultEntityKeyAttribute,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle writes one changelog record per stream record, in order. It
// reports the first record it could not write (a record without the entity
// key, or the lowest record Kinesis failed) as the batch item failure, so
// Lambda redelivers it and the records after it.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var failures batch.StreamFailures
	recs := ev.Records
	entries := make([]kintypes.PutRecordsRequestEntry, 0, len(recs))
	tombstones := 0
	stop := len(recs) // first record not converted
	for i := range recs {
		entry, deleted, err := h.Record(&recs[i])
		if err != nil {
			h.log.ErrorContext(ctx, "change cannot become a changelog record", "eventID", recs[i].EventID,
				"sequenceNumber", recs[i].Change.SequenceNumber, "error", err)
			stop = i
			break
		}
		if deleted {
			tombstones++
		}
		entries = append(entries, entry)
	}
	written := 0
	for written < len(entries) {
		n := min(maxPutRecords, len(entries)-written)
		failed, err := h.put(ctx, entries[written:written+n])
		if err != nil {
			h.log.ErrorContext(ctx, "PutRecords failed", "stream", h.stream, "error", err)
			failed = 0
		}
		if err != nil || failed >= 0 {
			stop = written + failed
			break
		}
		written += n
	}
	if stop < len(recs) {
		failures.Add(recs[stop].Change.SequenceNumber)
	}
	h.emit(len(recs), min(stop, len(entries)), tombstones)
	return failures.DynamoDB(), nil
}

// put writes entries with one PutRecords call and returns the index of the
// lowest failed entry, or -1 when all were written.
func (h *Handler) put(ctx context.Context, entries []kintypes.PutRecordsRequestEntry) (int, error) {
	out, err := h.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(h.stream), Records: entries})
	if err != nil {
		return 0, fmt.Errorf("putting %d changelog records on stream %s: %w", len(entries), h.stream, err)
	}
	if aws.ToInt32(out.FailedRecordCount) == 0 {
		return -1, nil
	}
	for i, r := range out.Records {
		if r.ErrorCode != nil {
			h.log.WarnContext(ctx, "changelog record not written", "index", i, "errorCode", aws.ToString(r.ErrorCode),
				"errorMessage", aws.ToString(r.ErrorMessage))
			return i, nil
		}
	}
	return 0, fmt.Errorf("stream %s: PutRecords reported %d failed records but none carries an error code", h.stream, aws.ToInt32(out.FailedRecordCount))
}

func (h *Handler) emit(in, out, tombstones int) {
	if h.metrics == nil {
		return
	}
	h.metrics.Add("ChangesIn", metrics.Count, float64(in))
	h.metrics.Add("ChangelogRecords", metrics.Count, float64(out))
	h.metrics.Add("Tombstones", metrics.Count, float64(tombstones))
	if err := h.metrics.Flush(); err != nil {
		h.log.Warn("flushing metrics", "error", err)
	}
}

// Record builds the Kinesis entry of one stream record, and says whether it
// is a tombstone. An error names the record and the field.
func (h *Handler) Record(rec *events.DynamoDBEventRecord) (kintypes.PutRecordsRequestEntry, bool, error) {
	env, err := h.Envelope(rec)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, false, err
	}
	b, err := json.Marshal(env)
	if err != nil {
		return kintypes.PutRecordsRequestEntry{}, false, fmt.Errorf("record %s: encoding the changelog record: %w", rec.EventID, err)
	}
	return kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(env.Key)}, env.Type == TypeDeleted, nil
}

// Envelope is the changelog record of one stream record.
func (h *Handler) Envelope(rec *events.DynamoDBEventRecord) (*stream.Envelope, error) {
	ch := &rec.Change
	var img map[string]events.DynamoDBAttributeValue
	typ := TypeChanged
	switch events.DynamoDBOperationType(rec.EventName) {
	case events.DynamoDBOperationTypeInsert, events.DynamoDBOperationTypeModify:
		img = ch.NewImage
		if img == nil {
			return nil, fmt.Errorf("record %s (%s): dynamodb.NewImage is missing (StreamViewType %s): the table's stream must be NEW_AND_OLD_IMAGES", rec.EventID, rec.EventName, ch.StreamViewType)
		}
	case events.DynamoDBOperationTypeRemove:
		typ = TypeDeleted
	default:
		return nil, fmt.Errorf("record %s: eventName %q is not INSERT, MODIFY or REMOVE", rec.EventID, rec.EventName)
	}
	key, err := h.key(rec)
	if err != nil {
		return nil, err
	}
	version, err := recordVersion(rec)
	if err != nil {
		return nil, err
	}
	image, err := ImageJSON(img)
	if err != nil {
		return nil, fmt.Errorf("record %s: dynamodb.NewImage: %w", rec.EventID, err)
	}
	data, err := json.Marshal(Data{Key: key, Version: version, Image: image, SequenceNumber: ch.SequenceNumber})
	if err != nil {
		return nil, fmt.Errorf("record %s: encoding data: %w", rec.EventID, err)
	}
	at := ch.ApproximateCreationDateTime.Time.UTC()
	if at.IsZero() {
		return nil, fmt.Errorf("record %s: dynamodb.ApproximateCreationDateTime is missing", rec.EventID)
	}
	env := &stream.Envelope{ID: tableName(rec.EventSourceArn) + "/" + key + "/" + version.String(), Type: typ, Key: key,
		OccurredAt: at, SentAt: at, ReceivedAt: at, Data: data}
	if err := env.Validate(); err != nil {
		return nil, fmt.Errorf("record %s: %w", rec.EventID, err)
	}
	return env, nil
}

// key is the entity key: the key attribute from Keys, else from an image.
func (h *Handler) key(rec *events.DynamoDBEventRecord) (string, error) {
	for _, src := range []struct {
		name string
		m    map[string]events.DynamoDBAttributeValue
	}{{"Keys", rec.Change.Keys}, {"NewImage", rec.Change.NewImage}, {"OldImage", rec.Change.OldImage}} {
		av, ok := src.m[h.keyAttr]
		if !ok {
			continue
		}
		switch av.DataType() {
		case events.DataTypeString:
			if av.String() == "" {
				return "", fmt.Errorf("record %s: dynamodb.%s.%s is empty", rec.EventID, src.name, h.keyAttr)
			}
			return av.String(), nil
		case events.DataTypeNumber:
			return av.Number(), nil
		default:
			return "", fmt.Errorf("record %s: dynamodb.%s.%s must be an S or N attribute", rec.EventID, src.name, h.keyAttr)
		}
	}
	return "", fmt.Errorf("record %s: the entity key attribute %q (ENTITY_KEY_ATTRIBUTE) is not in dynamodb.Keys, NewImage or OldImage", rec.EventID, h.keyAttr)
}

// recordVersion is the change's version (see the package doc).
func recordVersion(rec *events.DynamoDBEventRecord) (json.Number, error) {
	ch := &rec.Change
	img, field, bump := ch.NewImage, "NewImage", false
	if events.DynamoDBOperationType(rec.EventName) == events.DynamoDBOperationTypeRemove {
		img, field, bump = ch.OldImage, "OldImage", true
	}
	if av, ok := img[VersionAttribute]; ok {
		v, err := itemVersion(av)
		if err != nil {
			return "", fmt.Errorf("record %s: dynamodb.%s.%s: %w", rec.EventID, field, VersionAttribute, err)
		}
		if bump {
			v.Add(v, big.NewInt(1))
		}
		return json.Number(v.String()), nil
	}
	if ch.SequenceNumber == "" {
		return "", fmt.Errorf("record %s: dynamodb.SequenceNumber is missing and the item has no %s attribute", rec.EventID, VersionAttribute)
	}
	return json.Number(ch.SequenceNumber), nil
}

var errVersion = errors.New("must be an N attribute holding a non-negative integer")

func itemVersion(av events.DynamoDBAttributeValue) (*big.Int, error) {
	if av.DataType() != events.DataTypeNumber {
		return nil, errVersion
	}
	v, ok := new(big.Int).SetString(av.Number(), 10)
	if !ok || v.Sign() < 0 {
		return nil, fmt.Errorf("%w (got %s)", errVersion, av.Number())
	}
	return v, nil
}

// tableName is the table of a stream ARN
// (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL).
func tableName(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return "table"
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
