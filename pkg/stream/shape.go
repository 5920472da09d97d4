package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// The eventSource Lambda's event source mappings put on every record.
const (
	SourceKinesis  = "aws:kinesis"
	SourceDynamoDB = "aws:dynamodb"
	SourceSQS      = "aws:sqs"
)

// What each kind of event source mapping sends, as an EventShapeError's
// Want names it.
const (
	EventKinesis  = "a Kinesis event"
	EventDynamoDB = "a DynamoDB stream event"
	EventSQS      = "an SQS event"
	// Not a batch: what a function URL and an EventBridge schedule send.
	EventFunctionURL = "a function URL request"
	EventSchedule    = "an EventBridge scheduled event"
)

// sentBy is what Lambda sends a function that takes want, for an error
// about an event that is not a JSON object.
func sentBy(want string) string {
	switch want {
	case EventFunctionURL:
		return `{"version": "2.0", "rawPath": ..., "headers": ..., "body": ...} for each request to its URL`
	case EventSchedule:
		return `{"source": "aws.events", "detail-type": "Scheduled Event", ...} at each tick of its schedule`
	}
	return `{"Records": [...]} from its event source mapping`
}

// EventShapeError is an invocation whose event is not a batch of the kind
// the function consumes: an SQS event sent to a Kinesis consumer from the
// console's Test tab, a scheduled event sent to a stream consumer, a
// record without the sequence number or message id Lambda always sends.
// aws-lambda-go decodes any JSON object into any event type, so without
// this check such an event would be an empty batch ("succeeded", nothing
// done) or records without data set aside as malformed. Lambda never
// sends one; the function fails the invocation naming the field.
type EventShapeError struct {
	// Want is the event the function reads ("a Kinesis event").
	Want string
	// Record is the index in Records of the record at fault, -1 for the
	// event itself.
	Record int
	// Field is the JSON path at fault ("Records", "eventSource",
	// "kinesis.sequenceNumber").
	Field  string
	Reason string
}

func (e *EventShapeError) Error() string {
	where := e.Field
	if e.Record >= 0 {
		where = "Records[" + strconv.Itoa(e.Record) + "]"
		if e.Field != "" {
			where += "." + e.Field
		}
	}
	if where == "" {
		return "not " + e.Want + ": " + e.Reason
	}
	return "not " + e.Want + ": " + where + ": " + e.Reason
}

// CheckEventObject refuses a payload that is not a JSON object (an array,
// a string, a number, nothing), which no event source mapping sends,
// saying what it is and what the function takes (want: EventKinesis, ...),
// where decoding it would fail with encoding/json's words about the Go
// type it was decoded into. Field is "". null, which encoding/json decodes
// as an empty event, is left to the event's own check (no Records).
func CheckEventObject(raw []byte, want string) error {
	if got := strictjson.TypeOf(raw); got != "an object" && got != "null" {
		return &EventShapeError{Want: want, Record: -1,
			Reason: "the event is " + got + ", not a JSON object: Lambda sends this function " + sentBy(want)}
	}
	return nil
}

// DecodeEvent decodes the event in raw into v (a non-nil pointer) as
// aws-lambda-go does (encoding/json, the first value), but a value of the
// wrong type fails as an *EventShapeError naming its path and what it must
// be ("not a Kinesis event: Records: must be a JSON array, not a string";
// want: EventKinesis, ...), where encoding/json names the Go type it was
// decoded into ("cannot unmarshal string into Go value of type
// []events.KinesisEventRecord"). Other errors (broken JSON) are
// encoding/json's.
func DecodeEvent(raw []byte, v any, want string) error {
	err := json.NewDecoder(bytes.NewReader(raw)).Decode(v)
	if err != nil && want == EventKinesis {
		// Only on failure: the raw batch decoder names the record and
		// member of any refusal ("Records[0].kinesis.data: … base64"),
		// where a base64 or time member's error came back bare or
		// without its index.
		var b KinesisBatch
		var ke *KinesisEventError
		if berr := b.Decode(raw); errors.As(berr, &ke) && ke.Record >= 0 && ke.Field != "" {
			return &EventShapeError{Want: want, Record: ke.Record, Field: ke.Field, Reason: ke.Err.Error()}
		}
	}
	reason, ok := strictjson.TypeReason(err)
	if !ok {
		if i := failingRecord(raw, v); i >= 0 {
			// A member's own decoder refused it ("DynamoDBAttributeValue:
			// map must contain a single type"): which record, at least.
			return &EventShapeError{Want: want, Record: i, Reason: err.Error()}
		}
		return err
	}
	var te *json.UnmarshalTypeError
	errors.As(err, &te)
	field := te.Field // without array indexes: "Records.kinesis.data"
	// Only on failure: the strict walk names the path with its indexes
	// ("Records[2].kinesis.data"). It refuses more than encoding/json (a
	// key twice, invalid UTF-8), so only its type error is taken.
	var se *strictjson.Error
	if errors.As(strictjson.Decode(raw, reflect.New(reflect.TypeOf(v).Elem()).Interface(),
		strictjson.Options{Name: "event", MaxBytes: len(raw) + 1, AllowUnknown: true}), &se) && se.Kind == strictjson.Type {
		field, reason = se.Path, se.Reason
	}
	return &EventShapeError{Want: want, Record: -1, Field: field, Reason: reason}
}

// failingRecord is the index of the first record of raw that does not
// decode alone into an element of v's Records (v: a pointer to an event
// struct), or -1 (no Records, or each decodes). Only on failure.
func failingRecord(raw []byte, v any) int {
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return -1
	}
	f, ok := t.Elem().FieldByName("Records")
	if !ok || f.Type.Kind() != reflect.Slice {
		return -1
	}
	var probe struct{ Records []json.RawMessage }
	if json.Unmarshal(raw, &probe) != nil {
		return -1
	}
	for i, r := range probe.Records {
		if json.Unmarshal(r, reflect.New(f.Type.Elem()).Interface()) != nil {
			return i
		}
	}
	return -1
}

// maxSourceEcho bounds what an EventShapeError repeats of an eventSource.
const maxSourceEcho = 64

// checkShape checks n records, each with source and id (the member Lambda
// always sends; idField is its path), for want: records present (present:
// the event had a Records member), each of source wantSource or without
// one, each with an id.
func checkShape(want, wantSource, idField string, present bool, n int, at func(i int) (source, id string)) error {
	if !present {
		return &EventShapeError{Want: want, Record: -1, Field: "Records",
			Reason: "is missing: Lambda sends this function {\"Records\": [...]} from its " + wantSource + " event source mapping"}
	}
	for i := range n {
		source, id := at(i)
		if source != "" && source != wantSource {
			return &EventShapeError{Want: want, Record: i, Field: "eventSource",
				Reason: strictjson.QuoteCut(source, maxSourceEcho) + " is not " + strconv.Quote(wantSource) + ": this function takes " + want}
		}
		if id == "" {
			return &EventShapeError{Want: want, Record: i, Field: idField,
				Reason: "is missing: Lambda sends every record's"}
		}
	}
	return nil
}

// CheckKinesisEvent refuses an event that is not a Kinesis batch (see
// EventShapeError): no Records member, a record whose eventSource is not
// aws:kinesis, or one without kinesis.sequenceNumber. An empty Records
// array (a tumbling window's last invocation) is a batch.
func CheckKinesisEvent(ev *events.KinesisEvent) error {
	if err := checkShape(EventKinesis, SourceKinesis, "kinesis.sequenceNumber", ev.Records != nil, len(ev.Records), func(i int) (string, string) {
		return ev.Records[i].EventSource, ev.Records[i].Kinesis.SequenceNumber
	}); err != nil {
		return err
	}
	return checkKinesisPlaces(len(ev.Records), func(i int) string { return ev.Records[i].EventID })
}

// checkKinesisPlaces refuses a record without an eventID naming its shard
// ("shardId-000000000000:4959…"), which Lambda always sends: the
// watermark, fences and positions are the shard's. Only a hand-made event
// lacks it; each consumer failed its own way (join and detect with a
// DynamoDB ValidationException for an empty key).
func checkKinesisPlaces(n int, eventID func(i int) string) error {
	for i := range n {
		id := eventID(i)
		if shard, _, found := strings.Cut(id, ":"); !found || shard == "" {
			return &EventShapeError{Want: EventKinesis, Record: i, Field: "eventID",
				Reason: strictjson.QuoteCut(id, 80) + ` does not name the shard: want "<shard id>:<sequence number>", as Lambda sends it`}
		}
	}
	return nil
}

// CheckDynamoDBEvent is CheckKinesisEvent for a DynamoDB stream's batch:
// eventSource aws:dynamodb, dynamodb.SequenceNumber.
func CheckDynamoDBEvent(ev *events.DynamoDBEvent) error {
	return checkShape(EventDynamoDB, SourceDynamoDB, "dynamodb.SequenceNumber", ev.Records != nil, len(ev.Records), func(i int) (string, string) {
		return ev.Records[i].EventSource, ev.Records[i].Change.SequenceNumber
	})
}

// CheckSQSEvent is CheckKinesisEvent for an SQS batch: eventSource
// aws:sqs, messageId.
func CheckSQSEvent(ev *events.SQSEvent) error {
	return checkShape(EventSQS, SourceSQS, "messageId", ev.Records != nil, len(ev.Records), func(i int) (string, string) {
		return ev.Records[i].EventSource, ev.Records[i].MessageId
	})
}

// CheckKinesisBatch is CheckKinesisEvent for a batch Decode read from raw
// (raw is read again only when the batch has no records, to tell an empty
// Records array from none). A tumbling window's event is a batch whatever
// its Records: its window says where it came from.
func CheckKinesisBatch(b *KinesisBatch, raw []byte) error {
	present := len(b.Records) > 0 || b.TimeWindow
	if !present {
		var probe struct {
			Records json.RawMessage
		}
		present = json.Unmarshal(raw, &probe) == nil && len(probe.Records) > 0 && string(probe.Records) != "null"
	}
	if err := checkShape(EventKinesis, SourceKinesis, "kinesis.sequenceNumber", present, len(b.Records), func(i int) (string, string) {
		return b.Records[i].EventSource, b.Records[i].SequenceNumber
	}); err != nil {
		return err
	}
	return checkKinesisPlaces(len(b.Records), func(i int) string { return b.Records[i].EventID })
}
