package es

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Published is the data of a published event's envelope. The envelope is
// {"id": "<aggregateId>/<version>", "type": <event type>, "key":
// <aggregateId>, "occurredAt" and "sentAt": recordedAt, "receivedAt": when
// the table's stream recorded the change, "data": Published}. Personal data
// is never in it.
type Published struct {
	AggregateType string          `json:"aggregateType"`
	AggregateID   string          `json:"aggregateId"`
	Version       int64           `json:"version"`
	CommandID     string          `json:"commandId,omitempty"`
	RecordedAt    time.Time       `json:"recordedAt"`
	Data          json.RawMessage `json:"data"`
}

// Envelope is e's published record.
func Envelope(e *Event, streamedAt time.Time) (*stream.Envelope, error) {
	data, err := marshal(Published{AggregateType: e.AggregateType, AggregateID: e.AggregateID, Version: e.Version,
		CommandID: e.CommandID, RecordedAt: e.RecordedAt.UTC(), Data: e.Data})
	if err != nil {
		return nil, err
	}
	at := e.RecordedAt.UTC()
	return &stream.Envelope{ID: e.ID(), Type: e.Type, Key: e.AggregateID, OccurredAt: at, SentAt: at, ReceivedAt: streamedAt.UTC(), Data: data}, nil
}

// RecordError is a record that is not a published event; Field names the
// part at fault ("data.version", "type").
type RecordError struct {
	Field  string
	Reason string
}

func (e *RecordError) Error() string { return e.Field + ": " + e.Reason }

// DecodePublished reads a published record back into the event it carries
// (without personal data). The record is read as every consumer reads one
// (stream.CheckStrict: the one strict reader, then the envelope's names
// spelt exactly) and its data as a Published, each key a field of it spelt
// exactly: {"version":2,"version":99} or "Version" would otherwise be read
// one way here and another by the next reader. Its error is a
// *RecordError naming the field ("data.version").
func DecodePublished(data []byte) (Event, error) {
	var env stream.Envelope
	err := stream.CheckStrict(data)
	if err == nil {
		err = stream.Unmarshal(data, &env)
	}
	if err != nil {
		field := ""
		var fe *stream.FieldError
		if errors.As(err, &fe) {
			field = fe.Field
		}
		return Event{}, &RecordError{Field: field, Reason: err.Error()}
	}
	var p Published
	if err := strictjson.Decode(env.Data, &p, strictjson.Options{MaxBytes: max(len(env.Data), 1), Name: "data"}); err != nil {
		field, reason := "data", err.Error()
		var se *strictjson.Error
		if errors.As(err, &se) {
			field, reason = strictjson.JoinPath("data", se.Path), se.Reason
		}
		return Event{}, &RecordError{Field: field, Reason: "is not a published event: " + reason}
	}
	switch {
	case p.AggregateID == "" || p.AggregateID != env.Key:
		return Event{}, &RecordError{Field: "data.aggregateId", Reason: fmt.Sprintf("%q is not the record's key %q", p.AggregateID, env.Key)}
	case p.AggregateType == "":
		return Event{}, &RecordError{Field: "data.aggregateType", Reason: "is required"}
	case p.Version < 1:
		return Event{}, &RecordError{Field: "data.version", Reason: fmt.Sprintf("%d is not a version (a whole number from 1)", p.Version)}
	case len(p.Data) == 0 || !json.Valid(p.Data):
		return Event{}, &RecordError{Field: "data.data", Reason: "is missing or not JSON"}
	}
	return Event{AggregateType: p.AggregateType, AggregateID: p.AggregateID, Version: p.Version, Type: env.Type,
		Data: p.Data, CommandID: p.CommandID, RecordedAt: p.RecordedAt}, nil
}

// recordPutter is the Kinesis call the publisher makes.
type recordPutter interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ recordPutter = (*kinesis.Client)(nil)

// Publisher is the publish function: the events table's stream in, one
// record per new event out on a Kinesis stream, partition key = aggregate
// id, so an aggregate's events share a shard, in order.
type Publisher struct {
	kin     recordPutter
	stream  string
	sink    *setaside.Sink
	metrics *metrics.Logger
	log     *slog.Logger
}

// PublisherOption configures a Publisher.
type PublisherOption func(*Publisher)

// PublishWithSetAside is where stream records that are not new events go
// (the quarantine table): a change to an event other than an erasure, a
// deletion, an item that is not an event — each without AttrPersonal in
// either image (setaside.FromDynamoDB), so no copy outlives an erasure.
// Without it such a record is reported as the batch item failure, and
// nothing is lost.
func PublishWithSetAside(s *setaside.Sink) PublisherOption { return func(p *Publisher) { p.sink = s } }

// PublishWithMetrics emits EventsIn, EventsPublished, Erasures and
// RecordsSetAside per batch.
func PublishWithMetrics(m *metrics.Logger) PublisherOption {
	return func(p *Publisher) { p.metrics = m }
}

// PublishWithLogger sets the logger (default: discard).
func PublishWithLogger(l *slog.Logger) PublisherOption { return func(p *Publisher) { p.log = l } }

// NewPublisher returns a publisher writing to the Kinesis stream named
// streamName.
func NewPublisher(kin recordPutter, streamName string, opts ...PublisherOption) *Publisher {
	p := &Publisher{kin: kin, stream: streamName, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(p)
	}
	return p
}

// erasureAttrs are the attributes an erasure may change on an event.
var erasureAttrs = []string{AttrPersonal, AttrErasedAt, AttrErasure}

// Handle publishes a batch of the events table's stream, in order. INSERTs
// are published; a MODIFY that only erased personal data is not (the
// published record never had it); anything else is set aside with the field
// at fault and the batch goes on. It reports the first record it could not
// publish (Kinesis failed or throttled it, or it could not be set aside) so
// Lambda redelivers from there; consumers skip what they already applied.
func (p *Publisher) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if err := stream.CheckDynamoDBEvent(&ev); err != nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("publish: %w", err)
	}
	var failures batch.StreamFailures
	recs := ev.Records
	type ready struct {
		rec   int
		entry kintypes.PutRecordsRequestEntry
	}
	var out []ready
	var aside []setaside.Record
	var asideAt []int
	erasures := 0
	for i := range recs {
		entry, publish, err := p.Record(&recs[i])
		if err != nil {
			r := setaside.FromDynamoDB(&recs[i])
			r.Kind, r.Reason = setaside.KindInvalid, err.Error()
			var re *RecordError
			if errors.As(err, &re) {
				r.Field, r.Reason = re.Field, re.Reason
			}
			var tl *limits.TooLargeError
			if errors.As(err, &tl) {
				r.Kind = setaside.KindOutputTooLarge
			}
			aside, asideAt = append(aside, r), append(asideAt, i)
			continue
		}
		if !publish {
			erasures++
			p.log.InfoContext(ctx, "personal data erased from an event; nothing to publish", "eventID", recs[i].EventID)
			continue
		}
		out = append(out, ready{rec: i, entry: entry})
	}
	stop := len(recs)
	if len(aside) > 0 {
		if err := p.sink.SetAside(ctx, aside); err != nil {
			p.log.ErrorContext(ctx, "stream records not set aside; they will be retried", "records", len(aside), "error", err)
			stop = asideAt[0]
		}
	}
	done := out
	for i, r := range out {
		if r.rec >= stop {
			done = out[:i]
			break
		}
	}
	published := 0
	for start := 0; start < len(done); {
		end, size := start, 0
		for end < len(done) && end-start < limits.KinesisPutRecordsEntries {
			n := limits.KinesisRecordSize(done[end].entry.Data, aws.ToString(done[end].entry.PartitionKey))
			if end > start && size+n > limits.KinesisPutRecordsBytes {
				break
			}
			size += n
			end++
		}
		entries := make([]kintypes.PutRecordsRequestEntry, end-start)
		for i := range entries {
			entries[i] = done[start+i].entry
		}
		failed, err := p.put(ctx, entries)
		if err != nil {
			p.log.ErrorContext(ctx, "PutRecords failed; the batch is retried from the first record not published", "stream", p.stream, "error", err)
			failed = 0
		}
		if failed >= 0 {
			stop = min(stop, done[start+failed].rec)
			published += failed
			break
		}
		published += end - start
		start = end
	}
	if stop < len(recs) {
		failures.Add(recs[stop].Change.SequenceNumber)
	}
	if p.metrics != nil {
		p.metrics.Add("EventsIn", metrics.Count, float64(len(recs)))
		p.metrics.Add("EventsPublished", metrics.Count, float64(published))
		p.metrics.Add("Erasures", metrics.Count, float64(erasures))
		p.metrics.Add(setaside.Metric, metrics.Count, 0)
		if err := p.metrics.Flush(); err != nil {
			p.log.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}
	return failures.DynamoDB(), nil
}

// put writes entries with one PutRecords call and returns the index of the
// lowest failed entry, or -1 when all were written.
func (p *Publisher) put(ctx context.Context, entries []kintypes.PutRecordsRequestEntry) (int, error) {
	out, err := p.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
	if err != nil {
		return 0, fmt.Errorf("es: publishing %d events on stream %s: %w", len(entries), p.stream, err)
	}
	if aws.ToInt32(out.FailedRecordCount) == 0 {
		return -1, nil
	}
	for i, r := range out.Records {
		if r.ErrorCode != nil {
			p.log.WarnContext(ctx, "event not published", "index", i, "errorCode", aws.ToString(r.ErrorCode), "errorMessage", aws.ToString(r.ErrorMessage))
			return i, nil
		}
	}
	return 0, fmt.Errorf("es: stream %s: PutRecords reported %d failed records but none carries an error code", p.stream, aws.ToInt32(out.FailedRecordCount))
}

// Record is the Kinesis entry publishing one stream record of the events
// table; publish is false for an erasure (nothing to publish). Its errors
// are *RecordError (or wrap a *limits.TooLargeError): the record can never
// be published as it is.
func (p *Publisher) Record(rec *events.DynamoDBEventRecord) (entry kintypes.PutRecordsRequestEntry, publish bool, err error) {
	ch := &rec.Change
	switch events.DynamoDBOperationType(rec.EventName) {
	case events.DynamoDBOperationTypeInsert:
	case events.DynamoDBOperationTypeModify:
		// Without both images an erasure cannot be told from tampering.
		for _, img := range []struct {
			field string
			image map[string]events.DynamoDBAttributeValue
		}{{"dynamodb.OldImage", ch.OldImage}, {"dynamodb.NewImage", ch.NewImage}} {
			if img.image == nil {
				return entry, false, &RecordError{Field: img.field, Reason: fmt.Sprintf(
					"is missing (StreamViewType %s) from the MODIFY of event %s: the events table's stream must be NEW_AND_OLD_IMAGES to tell an erasure from another change", ch.StreamViewType, eventName(ch.Keys))}
			}
		}
		if attr, erasure := changed(ch.OldImage, ch.NewImage); !erasure {
			return entry, false, &RecordError{Field: strictjson.KeyPath("dynamodb.NewImage", attr), Reason: fmt.Sprintf(
				"events are immutable: a MODIFY of event %s changed attribute %s; only an erasure (es.Erase) may change an event, and only its personal data",
				eventName(ch.Keys), strictjson.KeyPath("", attr))}
		}
		return entry, false, nil
	case events.DynamoDBOperationTypeRemove:
		return entry, false, &RecordError{Field: "eventName", Reason: fmt.Sprintf(
			"events are immutable: event %s was deleted from the event store (REMOVE); restore it from a backup (point-in-time recovery)", eventName(ch.Keys))}
	default:
		return entry, false, &RecordError{Field: "eventName", Reason: fmt.Sprintf("%q is not INSERT, MODIFY or REMOVE", rec.EventName)}
	}
	if ch.NewImage == nil {
		return entry, false, &RecordError{Field: "dynamodb.NewImage", Reason: fmt.Sprintf("is missing (StreamViewType %s): the events table's stream must be NEW_AND_OLD_IMAGES", ch.StreamViewType)}
	}
	item, err := sdkItem(ch.NewImage)
	if err != nil {
		return entry, false, err
	}
	e, err := EventFromItem(item)
	if err != nil {
		var ie *ItemError
		if errors.As(err, &ie) {
			return entry, false, &RecordError{Field: "dynamodb.NewImage." + ie.Attr, Reason: fmt.Sprintf(
				"%s: no command writes that, so event %s was written by hand; it stays in the log, where the next command to its aggregate fails naming the repair "+
					"(put the item back as it was from the events table's point-in-time recovery, or delete it); do not put it back (make putback): it would be set aside again",
				ie.Reason, eventName(ch.Keys))}
		}
		return entry, false, err
	}
	env, err := Envelope(&e, ch.ApproximateCreationDateTime.Time)
	if err != nil {
		return entry, false, &RecordError{Field: "dynamodb.NewImage." + AttrData, Reason: err.Error()}
	}
	if err := env.Validate(); err != nil {
		return entry, false, &RecordError{Field: "dynamodb.NewImage", Reason: "as a published record: " + err.Error()}
	}
	b, err := marshal(env)
	if err != nil {
		return entry, false, &RecordError{Field: "dynamodb.NewImage", Reason: err.Error()}
	}
	if n := limits.KinesisRecordSize(b, env.Key); n > limits.KinesisRecordBytes {
		return entry, false, &RecordError{Field: "dynamodb.NewImage." + AttrData, Reason: fmt.Sprintf(
			"the published record would be %d bytes (data and partition key), over Kinesis' limit of %d", n, limits.KinesisRecordBytes)}
	}
	return kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(env.Key)}, true, nil
}

// changed compares an event's old and new images: the first attribute (by
// name) that differs other than the erasure's, and whether the change is an
// erasure (only erasure attributes changed, the personal data is gone and
// erasedAt is set).
func changed(old, new map[string]events.DynamoDBAttributeValue) (string, bool) {
	names := map[string]bool{}
	for k := range old {
		names[k] = true
	}
	for k := range new {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		if slices.Contains(erasureAttrs, k) {
			continue
		}
		o, ok1 := old[k]
		n, ok2 := new[k]
		if ok1 != ok2 || !sameAttribute(o, n) {
			return k, false
		}
	}
	if _, ok := new[AttrPersonal]; ok {
		return AttrPersonal, false
	}
	if _, ok := new[AttrErasedAt]; !ok {
		return AttrErasedAt, false
	}
	return "", true
}

func sameAttribute(a, b events.DynamoDBAttributeValue) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// eventName is "<aggregateId>/<version>" from a stream record's keys.
func eventName(keys map[string]events.DynamoDBAttributeValue) string {
	id, v := "?", "?"
	if a, ok := keys[AttrAggregateID]; ok && a.DataType() == events.DataTypeString {
		id = a.String()
	}
	if a, ok := keys[AttrVersion]; ok && a.DataType() == events.DataTypeNumber {
		v = a.Number()
	}
	return id + "/" + v
}

// sdkItem converts a stream image to SDK attribute values (an event holds
// strings and numbers only).
func sdkItem(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		switch v.DataType() {
		case events.DataTypeString:
			out[k] = &types.AttributeValueMemberS{Value: v.String()}
		case events.DataTypeNumber:
			out[k] = &types.AttributeValueMemberN{Value: v.Number()}
		default:
			return nil, &RecordError{Field: strictjson.KeyPath("dynamodb.NewImage", k), Reason: "an event's attributes are strings (S) and numbers (N)"}
		}
	}
	return out, nil
}
