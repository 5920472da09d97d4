package stream_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// A consumer's check passes its own source's batch and an empty Records
// array, and refuses every other event a user may send it by hand,
// naming the field — decoded as aws-lambda-go decodes it (encoding/json).
func TestEventShapeChecks(t *testing.T) {
	checks := []struct {
		source string
		check  func(raw []byte) error
	}{
		{stream.SourceKinesis, func(raw []byte) error {
			var ev events.KinesisEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return err
			}
			return stream.CheckKinesisEvent(&ev)
		}},
		{"aws:kinesis (raw batch)", func(raw []byte) error {
			var b stream.KinesisBatch
			if err := b.Decode(raw); err != nil {
				return err
			}
			return stream.CheckKinesisBatch(&b, raw)
		}},
		{stream.SourceDynamoDB, func(raw []byte) error {
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return err
			}
			return stream.CheckDynamoDBEvent(&ev)
		}},
		{stream.SourceSQS, func(raw []byte) error {
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return err
			}
			return stream.CheckSQSEvent(&ev)
		}},
	}
	for _, c := range checks {
		source, _, _ := strings.Cut(c.source, " ")
		t.Run(c.source, func(t *testing.T) {
			if err := c.check(streamtest.SampleEvent(source)); err != nil {
				t.Errorf("its own batch: %v", err)
			}
			if err := c.check([]byte(`{"Records":[]}`)); err != nil {
				t.Errorf("an empty Records array: %v", err)
			}
			for name, raw := range streamtest.ForeignEvents(source) {
				err := c.check(raw)
				var se *stream.EventShapeError
				switch {
				case !errors.As(err, &se):
					t.Errorf("%s: %v, want an *EventShapeError", name, err)
				case name == "scheduled" || name == "empty object":
					if se.Field != "Records" || !strings.Contains(err.Error(), "Records: is missing") {
						t.Errorf("%s: %q, want Records is missing", name, err)
					}
				case se.Record != 0 || se.Field != "eventSource" || !strings.Contains(err.Error(), `"`+name+`" is not "`+source+`"`):
					t.Errorf("%s: %q, want Records[0].eventSource naming both sources", name, err)
				}
			}
		})
	}
}

// A record without its source's id (a hand-made event) is refused naming
// the member; a long eventSource is repeated cut.
func TestEventShapeNamesTheField(t *testing.T) {
	err := stream.CheckKinesisEvent(&events.KinesisEvent{Records: []events.KinesisEventRecord{{EventSource: "aws:kinesis"}}})
	if err == nil || err.Error() != "not a Kinesis event: Records[0].kinesis.sequenceNumber: is missing: Lambda sends every record's" {
		t.Errorf("no sequence number: %v", err)
	}
	err = stream.CheckSQSEvent(&events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", EventSource: strings.Repeat("x", 5000)}}})
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("a 5,000-byte eventSource: %d bytes of error", len(err.Error()))
	}
}

// A tumbling window's invocation without records (its last, or one for an
// idle window) is a batch even with no Records member.
func TestEventShapeTumblingWindowWithoutRecords(t *testing.T) {
	raw := []byte(`{"window":{"start":"2026-11-29T10:40:00Z","end":"2026-11-29T10:42:00Z"},"state":{},"shardId":"shardId-000000000000",` +
		`"eventSourceARN":"` + streamtest.StreamARN + `","isFinalInvokeForWindow":true,"isWindowTerminatedEarly":false}`)
	var b stream.KinesisBatch
	if err := b.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if err := stream.CheckKinesisBatch(&b, raw); err != nil {
		t.Errorf("a window's final invocation without Records: %v", err)
	}
}

// An event that is not a JSON object (an array, a string, a number, a
// boolean, nothing) is refused saying what it is and what the function
// takes, not with encoding/json's words about the Go type it was decoded
// into ("cannot unmarshal array into Go value of type struct { Window
// json.RawMessage …"). null decodes as an empty event, as encoding/json
// decodes it, and is refused for its missing Records.
func TestNonObjectEventIsRefusedSayingWhatItIs(t *testing.T) {
	for _, tc := range []struct{ raw, is string }{
		{`[1]`, "an array"},
		{` ["Records"]`, "an array"},
		{`"{\"Records\":[]}"`, "a string"},
		{`1`, "a number"},
		{`true`, "a boolean"},
		{``, "nothing"},
	} {
		want := "not a Kinesis event: the event is " + tc.is + `, not a JSON object: Lambda sends this function {"Records": [...]} from its event source mapping`
		var b stream.KinesisBatch
		err := b.Decode([]byte(tc.raw))
		var se *stream.EventShapeError
		if !errors.As(err, &se) || err.Error() != want {
			t.Errorf("Decode(%s): %v; want an *EventShapeError %q", tc.raw, err, want)
		}
		if err := stream.CheckEventObject([]byte(tc.raw), stream.EventSQS); err == nil || !strings.HasPrefix(err.Error(), "not an SQS event: the event is "+tc.is+", not a JSON object") {
			t.Errorf("CheckEventObject(%s, SQS): %v; want it to name the SQS event and %s", tc.raw, err, tc.is)
		}
		// A function URL and a schedule are told what they are sent, not
		// a batch's Records.
		for want, says := range map[string]string{stream.EventFunctionURL: `"rawPath"`, stream.EventSchedule: `"detail-type"`} {
			if err := stream.CheckEventObject([]byte(tc.raw), want); err == nil || !strings.HasPrefix(err.Error(), "not "+want+": the event is "+tc.is) ||
				!strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "Records") {
				t.Errorf("CheckEventObject(%s, %s): %v; want it to name %s and say it is sent %s", tc.raw, want, err, want, says)
			}
		}
	}
	var b stream.KinesisBatch
	err := b.Decode([]byte(`null`))
	if err == nil {
		err = stream.CheckKinesisBatch(&b, []byte(`null`))
	}
	var se *stream.EventShapeError
	if !errors.As(err, &se) || se.Field != "Records" {
		t.Errorf("null: %v; want Records is missing", err)
	}
}

// A Kinesis record without an eventID naming its shard (a hand-made event)
// is refused naming the member, by both the raw batch's check and
// aws-lambda-go's event's: join and detect failed with DynamoDB's
// ValidationException for an empty key.
func TestKinesisRecordWithoutItsPlaceIsRefused(t *testing.T) {
	const arn = `"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events"`
	for _, tc := range []struct{ record, want string }{
		{`{"eventSource":"aws:kinesis",` + arn + `,"kinesis":{"sequenceNumber":"1"}}`, `Records[0].eventID: "" does not name the shard`},
		{`{"eventSource":"aws:kinesis","eventID":"4959",` + arn + `,"kinesis":{"sequenceNumber":"1"}}`, `Records[0].eventID: "4959" does not name the shard`},
		{`{"eventSource":"aws:kinesis","eventID":":1",` + arn + `,"kinesis":{"sequenceNumber":"1"}}`, `Records[0].eventID: ":1" does not name the shard`},
	} {
		raw := []byte(`{"Records":[` + tc.record + `]}`)
		var ev events.KinesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		var b stream.KinesisBatch
		if err := b.Decode(raw); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{"event": stream.CheckKinesisEvent(&ev), "batch": stream.CheckKinesisBatch(&b, raw)} {
			var se *stream.EventShapeError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s: %v; want an *EventShapeError saying %s", name, tc.record, err, tc.want)
			}
		}
	}
}

// A Kinesis event decoded into aws-lambda-go's types (enrich, archive,
// projection) names the record and member of a bad base64 or time member,
// as the raw batch decoder does for aggregate, join and detect: it was
// "illegal base64 data at input byte 3", or a path without its index.
func TestKinesisEventDecodeNamesTheRecord(t *testing.T) {
	for raw, want := range map[string]string{
		`{"Records":[{"kinesis":{"data":"AAAA"}},{"kinesis":{"data":"!!!x"}}]}`:  "Records[1].kinesis.data",
		`{"Records":[{"kinesis":{"approximateArrivalTimestamp":"1795948872"}}]}`: "Records[0].kinesis.approximateArrivalTimestamp",
	} {
		var ev events.KinesisEvent
		if err := stream.DecodeEvent([]byte(raw), &ev, stream.EventKinesis); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to name %s", raw, err, want)
		}
	}
}

// A record a member's own decoder refuses (aws-lambda-go's attribute
// values: cdc, timeline, publish; an SQS record) is named by its index, where
// the error came back bare ("DynamoDBAttributeValue: map must contain a
// single type").
func TestEventDecodeNamesTheRecordAMemberRefused(t *testing.T) {
	raw := []byte(`{"Records":[{"eventSource":"aws:dynamodb","dynamodb":{"Keys":{"k":{"S":"a"}}}},{"eventSource":"aws:dynamodb","dynamodb":{"Keys":{"k":{}}}}]}`)
	var ev events.DynamoDBEvent
	err := stream.DecodeEvent(raw, &ev, stream.EventDynamoDB)
	var se *stream.EventShapeError
	if !errors.As(err, &se) || se.Record != 1 || !strings.Contains(err.Error(), "Records[1]: ") {
		t.Errorf("%v; want an *EventShapeError naming Records[1]", err)
	}
	if err := stream.DecodeEvent([]byte(`{"Records":[`), &ev, stream.EventDynamoDB); errors.As(err, &se) {
		t.Errorf("broken JSON: %v; want encoding/json's error", err)
	}
}
