package stream

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func kinesisRecord(seq, data string) events.KinesisEventRecord {
	return events.KinesisEventRecord{Kinesis: events.KinesisRecord{
		SequenceNumber:              seq,
		Data:                        []byte(data),
		ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 30, 0, time.UTC)},
	}}
}

func TestDecodeKinesis(t *testing.T) {
	withReceived := `{"id":"e-1","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","receivedAt":"2026-11-29T10:41:09Z"}`
	withoutReceived := `{"id":"e-1","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`
	tests := []struct {
		name      string
		data      string
		wantField string
		wantErr   bool
		wantEvent time.Time
		// wantReason is in the refusal ("": not checked).
		wantReason string
		// partitionKey is the record's ("": not checked).
		partitionKey string
	}{
		{name: "through ingest", data: withReceived, wantEvent: time.Date(2026, 11, 29, 10, 41, 8, 0, time.UTC)},
		{name: "straight to the stream: arrival time is receivedAt", data: withoutReceived, wantEvent: time.Date(2026, 11, 29, 10, 41, 29, 0, time.UTC)},
		// receivedAt after the arrival (10:41:30): a clock's skew is
		// taken, up to MaxReceivedLead; more is a producer's own clock
		// reading, which would move the shard's watermark past every
		// other key's events.
		{name: "receivedAt 4s after the arrival", data: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z","receivedAt":"2026-11-29T10:41:34Z"}`, wantEvent: time.Date(2026, 11, 29, 10, 41, 34, 0, time.UTC)},
		{name: "receivedAt 5.4s after the arrival", data: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z","receivedAt":"2026-11-29T10:41:35.4Z"}`, wantErr: true, wantField: "receivedAt", wantReason: "is 5.4s after the record reached the service"},
		{name: "receivedAt 6s after the arrival", data: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z","receivedAt":"2026-11-29T10:41:36Z"}`, wantErr: true, wantField: "receivedAt"},
		{name: "receivedAt 50s after the arrival", data: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z","receivedAt":"2026-11-29T10:42:20Z"}`, wantErr: true, wantField: "receivedAt"},
		{name: "not JSON", data: "\x00\x01binary", wantErr: true, wantField: ""},

		// null is no object: unparseable (no field), not an envelope
		// missing its id (invalid, field id).
		{name: "null", data: `null`, wantErr: true, wantField: ""},
		{name: "bad occurredAt", data: `{"id":"e","type":"t","key":"k","occurredAt":"soon","sentAt":"2026-11-29T07:41:08Z"}`, wantErr: true, wantField: "occurredAt"},
		{name: "missing key", data: `{"id":"e","type":"t","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`, wantErr: true, wantField: "key"},
		// Refused by ingest, so by every consumer of a record put past it
		// (its partition key the same).
		{name: "control character in the key", data: `{"id":"e","type":"t","key":"a\u0001b","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`, partitionKey: "a\x01b", wantErr: true, wantField: "key"},
		{name: "control character in the type", data: `{"id":"e","type":"t\u007f","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`, wantErr: true, wantField: "type"},
		// Each time in range, but the event time they give is 1741.
		{name: "sentAt centuries after occurredAt", data: `{"id":"e","type":"t","key":"k","occurredAt":"1970-01-01T00:00:00Z","sentAt":"2199-01-01T00:00:00Z","receivedAt":"1970-01-01T00:00:00Z"}`, wantErr: true, wantField: "sentAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kinesisRecord("49601189658422359378836298521827638475320189012309704722", tt.data)
			rec.Kinesis.PartitionKey = tt.partitionKey
			var e Envelope
			err := DecodeKinesis(&rec, &e)
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if got := e.EventTime(); !got.Equal(tt.wantEvent) {
					t.Errorf("EventTime = %s, want %s", got, tt.wantEvent)
				}
				return
			}
			var pe *PoisonRecordError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *PoisonRecordError", err, err)
			}
			if pe.RecordID != rec.Kinesis.SequenceNumber {
				t.Errorf("RecordID = %q, want the sequence number", pe.RecordID)
			}
			if pe.Field != tt.wantField {
				t.Errorf("Field = %q, want %q (%v)", pe.Field, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantReason) {
				t.Errorf("error %v; want it to say %q", err, tt.wantReason)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("cause is not a *FieldError: %v", err)
			}
		})
	}
}

func TestPoisonRecordErrorMessage(t *testing.T) {
	rec := kinesisRecord("4960", `{"id":"e","type":"t","key":"k","occurredAt":"soon","sentAt":"2026-11-29T07:41:08Z"}`)
	var e Envelope
	err := DecodeKinesis(&rec, &e)
	want := `record 4960: field occurredAt: "soon" is not an RFC 3339 time such as 2026-11-29T10:41:07.250Z`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

// DecodeSQSExact decodes what DecodeSQS does from the bytes it is given,
// and refuses a key DecodeSQS would take case-folded, naming it.
func TestDecodeSQSExact(t *testing.T) {
	const exact = `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","data":{"n":1}}`
	attrs := map[string]string{"SentTimestamp": "1764412869000"}
	for _, tt := range []struct {
		name, body string
		wantField  string // "": decoded, as DecodeSQS decodes it
	}{
		{"exact names", exact, ""},
		{"escaped but exact", strings.Replace(exact, `"key"`, `"\u006bey"`, 1), ""},
		{"another case", strings.Replace(exact, `"id"`, `"ID"`, 1), "ID"},
		{"unknown", strings.Replace(exact, `"data"`, `"payload"`, 1), "payload"},
		{"bad time, exact names", strings.Replace(exact, `"2026-11-29T07:41:08Z"`, `"soon"`, 1), "sentAt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := events.SQSMessage{MessageId: "m-1", Body: tt.body, Attributes: attrs}
			var got Envelope
			err := DecodeSQSExact(&msg, []byte(tt.body), &got)
			if tt.wantField != "" {
				var pe *PoisonRecordError
				if !errors.As(err, &pe) || pe.RecordID != "m-1" || pe.Field != tt.wantField {
					t.Errorf("error = %v, want poison record m-1 field %s", err, tt.wantField)
				}
				return
			}
			var want Envelope
			if err := DecodeSQS(&msg, &want); err != nil {
				t.Fatal(err)
			}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeSQSExact = %+v, %v; DecodeSQS = %+v", got, err, want)
			}
		})
	}
}

func TestDecodeSQS(t *testing.T) {
	tests := []struct {
		name      string
		msg       events.SQSMessage
		wantErr   bool
		wantField string
		wantRecv  time.Time
	}{
		{
			name: "SentTimestamp becomes receivedAt",
			msg: events.SQSMessage{MessageId: "m-1", Body: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`,
				Attributes: map[string]string{"SentTimestamp": "1764412869000"}},
			wantRecv: time.UnixMilli(1764412869000).UTC(),
		},
		{
			name: "receivedAt in the body wins",
			msg: events.SQSMessage{MessageId: "m-1", Body: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","receivedAt":"2026-11-29T10:00:00Z"}`,
				Attributes: map[string]string{"SentTimestamp": "1795948869000"}},
			wantRecv: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		},
		{
			// A producer writing straight to the queue with a receivedAt of
			// its own, an hour after SQS took the message: an event time
			// from the future, which would move the watermark.
			name: "receivedAt after the message reached SQS is refused",
			msg: events.SQSMessage{MessageId: "m-3", Body: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","receivedAt":"2026-11-29T11:41:09Z"}`,
				Attributes: map[string]string{"SentTimestamp": "1795948869000"}},
			wantErr: true, wantField: "receivedAt",
		},
		{
			name:    "bad body",
			msg:     events.SQSMessage{MessageId: "m-2", Body: `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z"}`},
			wantErr: true, wantField: "sentAt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Envelope
			err := DecodeSQS(&tt.msg, &e)
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if !e.ReceivedAt.Equal(tt.wantRecv) {
					t.Errorf("ReceivedAt = %s, want %s", e.ReceivedAt, tt.wantRecv)
				}
				return
			}
			var pe *PoisonRecordError
			if !errors.As(err, &pe) || pe.RecordID != tt.msg.MessageId || pe.Field != tt.wantField {
				t.Errorf("error = %#v, want poison record %s field %s", err, tt.msg.MessageId, tt.wantField)
			}
		})
	}
}

func TestDecodeDynamoDB(t *testing.T) {
	s := events.NewStringAttribute
	base := func() map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{
			"id": s("e-1"), "type": s("profile_changed"), "key": s("user-42"),
			"occurredAt": s("2026-11-29T07:41:07Z"), "sentAt": s("2026-11-29T07:41:08Z"),
		}
	}
	created := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 9, 0, time.UTC)}
	tests := []struct {
		name      string
		image     func() map[string]events.DynamoDBAttributeValue
		wantErr   bool
		wantField string
		wantData  string
	}{
		{name: "no data", image: base},
		{name: "data as JSON text", image: func() map[string]events.DynamoDBAttributeValue {
			m := base()
			m["data"] = s(`{"plan":"pro"}`)
			return m
		}, wantData: `{"plan":"pro"}`},
		{name: "data as a map", image: func() map[string]events.DynamoDBAttributeValue {
			m := base()
			m["data"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
				"plan":  s("pro"),
				"seats": events.NewNumberAttribute("12"),
				"tags":  events.NewListAttribute([]events.DynamoDBAttributeValue{s("a"), events.NewBooleanAttribute(true), events.NewNullAttribute()}),
			})
			return m
		}, wantData: `{"plan":"pro","seats":12,"tags":["a",true,null]}`},
		{name: "data S not JSON", image: func() map[string]events.DynamoDBAttributeValue {
			m := base()
			m["data"] = s(`plan=pro`)
			return m
		}, wantErr: true, wantField: "dynamodb.NewImage.data"},
		{name: "key is a number", image: func() map[string]events.DynamoDBAttributeValue {
			m := base()
			m["key"] = events.NewNumberAttribute("42")
			return m
		}, wantErr: true, wantField: "dynamodb.NewImage.key"},
		{name: "sentAt missing", image: func() map[string]events.DynamoDBAttributeValue {
			m := base()
			delete(m, "sentAt")
			return m
		}, wantErr: true, wantField: "dynamodb.NewImage.sentAt"},
		{name: "no new image", image: func() map[string]events.DynamoDBAttributeValue { return nil }, wantErr: true, wantField: "dynamodb.NewImage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.DynamoDBEventRecord{EventID: "c81e728d9d4c2f636f067f89cc14862c", EventName: "INSERT",
				Change: events.DynamoDBStreamRecord{NewImage: tt.image(), ApproximateCreationDateTime: created, SequenceNumber: "111"}}
			var e Envelope
			err := DecodeDynamoDB(&rec, &e)
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if e.Key != "user-42" || !e.ReceivedAt.Equal(created.Time) {
					t.Errorf("got %+v", e)
				}
				if string(e.Data) != tt.wantData {
					t.Errorf("data = %s, want %s", e.Data, tt.wantData)
				}
				return
			}
			var pe *PoisonRecordError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PoisonRecordError", err)
			}
			if pe.RecordID != rec.EventID || pe.Field != tt.wantField {
				t.Errorf("got record %q field %q, want %q %q (%v)", pe.RecordID, pe.Field, rec.EventID, tt.wantField, err)
			}
		})
	}
}

// TestDeepNestingIsNamedAtItsPlace: data nested 10,000 deep is refused by
// encoding/json ("exceeded max depth") before the strict reader looks, and
// the record was set aside as unparseable with no field; the strict reader's
// refusal names the place, as for nesting 65 deep.
func TestDeepNestingIsNamedAtItsPlace(t *testing.T) {
	for _, depth := range []int{65, 10_000, 100_000} {
		data := `{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:07Z","sentAt":"2026-11-29T10:41:08Z","data":` +
			strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		rec := kinesisRecord("49601189658422359378836298521827638475320189012309704722", data)
		var e Envelope
		err := DecodeKinesis(&rec, &e)
		var pe *PoisonRecordError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, "data[0][0]") || !strings.Contains(err.Error(), "64") {
			t.Errorf("depth %d: %v (field %q); want the place named, data[0][0]…, and the 64 levels", depth, err, fieldOf(pe))
		}
	}
}

func fieldOf(pe *PoisonRecordError) string {
	if pe == nil {
		return ""
	}
	return pe.Field
}

// TestArrivalNoServiceGivesChecksNothing: an arrival outside 1970–2200 (a
// hand-made event's approximateArrivalTimestamp of 1e20) is no service's
// reading; receivedAt is not compared with it (which said receivedAt was
// 2562047h after an arrival it preceded) nor stamped from it.
func TestArrivalNoServiceGivesChecksNothing(t *testing.T) {
	for _, arrival := range []time.Time{time.Unix(1e11, 0), time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)} {
		for _, data := range []string{
			`{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z","receivedAt":"2026-11-29T10:41:31Z"}`,
			`{"id":"e","type":"t","key":"k","occurredAt":"2026-11-29T10:41:30Z","sentAt":"2026-11-29T10:41:30Z"}`,
		} {
			rec := kinesisRecord("4960", data)
			rec.Kinesis.ApproximateArrivalTimestamp.Time = arrival
			var e Envelope
			if err := DecodeKinesis(&rec, &e); err != nil {
				t.Errorf("arrival %s, %s: %v", arrival, data, err)
				continue
			}
			if e.ReceivedAt.Equal(arrival) {
				t.Errorf("arrival %s stamped as receivedAt", arrival)
			}
		}
	}
}
