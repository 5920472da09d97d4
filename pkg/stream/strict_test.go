package stream

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestConsumersReadRecordsStrictly: a producer may write to the events
// stream (or a queue) directly, past ingest's checks. A record whose JSON
// could mean two things — a key twice, in the envelope or in its data; a
// field in another case; a field the envelope does not have; text that is
// not UTF-8; nesting past strictjson.MaxDepth — is refused by both of the
// consumers' decoders (DecodeKinesis, used by enrich; the batch's
// DecodeEnvelope, used by aggregate and the keyed runner), naming the
// place, so it is set aside rather than read as one of its meanings.
func TestConsumersReadRecordsStrictly(t *testing.T) {
	const head = `"id":"e-1","type":"t","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"`
	tests := []struct {
		name, data, field string
	}{
		{"key twice", `{` + head + `,"key":"u1","key":"u2"}`, "key"},
		{"data field twice", `{` + head + `,"key":"u1","data":{"version":1,"version":99}}`, "data.version"},
		{"nested twice", `{` + head + `,"key":"u1","data":{"image":{"a":1,"a":2}}}`, "data.image.a"},
		{"field in another case", `{` + head + `,"Key":"u1"}`, "Key"},
		{"unknown field", `{` + head + `,"key":"u1","extra":true}`, "extra"},
		{"not UTF-8 in data", `{` + head + `,"key":"u1","data":{"name":"` + "\xff" + `"}}`, "data.name"},
		{"too deep", `{` + head + `,"key":"u1","data":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "data" + strings.Repeat("[0]", 63)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				var pe *PoisonRecordError
				if !errors.As(err, &pe) {
					t.Fatalf("%s accepted %s (or failed otherwise: %v)", how, tt.data, err)
				}
				if pe.Field != tt.field {
					t.Errorf("%s: field %q, want %q (%v)", how, pe.Field, tt.field, err)
				}
			}
			rec := kinesisRecord("4960", tt.data)
			var e Envelope
			check("DecodeKinesis", DecodeKinesis(&rec, &e))

			var b KinesisBatch
			ev := fmt.Sprintf(`{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"u1","sequenceNumber":"4960","data":%q,"approximateArrivalTimestamp":1795948872.4},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"shardId-000000000000:4960","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/r","awsRegion":"us-east-1","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}]}`,
				base64.StdEncoding.EncodeToString([]byte(tt.data)))
			if err := b.Decode([]byte(ev)); err != nil {
				t.Fatal(err)
			}
			check("DecodeEnvelope", b.Records[0].DecodeEnvelope(&e))
		})
	}
	// The same envelope with each key once is read.
	rec := kinesisRecord("4960", `{`+head+`,"key":"u1","data":{"version":1,"image":{"a":1}}}`)
	var e Envelope
	if err := DecodeKinesis(&rec, &e); err != nil || e.Key != "u1" {
		t.Errorf("a plain record: %v, key %q", err, e.Key)
	}
}

// TestConsumersCallInvalidUTF8ByItsName: a record whose data is not UTF-8
// — bytes FF FE, or a valid start then a stray byte outside any string —
// is refused by every consumer's decoder saying so and where, not with
// encoding/json's "invalid character 'ÿ'", which names neither the
// encoding nor a place a producer can look for.
func TestConsumersCallInvalidUTF8ByItsName(t *testing.T) {
	for _, tt := range []struct{ name, data, reason string }{
		{"bytes FF FE", "\xff\xfe", "invalid UTF-8 at byte 0 of the record (byte 0xff)"},
		{"a UTF-16 byte order mark", "\xff\xfe{\x00}\x00", "invalid UTF-8 at byte 0 of the record (byte 0xff)"},
		{"a stray byte after a field", `{"id":"e-1",` + "\xc3" + `}`, "invalid UTF-8 at byte 12 of the record (byte 0xc3)"},
		{"Latin-1 in a string", `{"id":"caf` + "\xe9" + `","type":"t","key":"k"}`, "invalid UTF-8 at byte 10 of the record (byte 0xe9)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				var pe *PoisonRecordError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.reason) {
					t.Errorf("%s: %v; want a *PoisonRecordError saying %q", how, err, tt.reason)
				}
			}
			rec := kinesisRecord("4960", tt.data)
			var e Envelope
			check("DecodeKinesis", DecodeKinesis(&rec, &e))

			var b KinesisBatch
			ev := fmt.Sprintf(`{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"u1","sequenceNumber":"4960","data":%q,"approximateArrivalTimestamp":1795948872.4},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"shardId-000000000000:4960","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/r","awsRegion":"us-east-1","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}]}`,
				base64.StdEncoding.EncodeToString([]byte(tt.data)))
			if err := b.Decode([]byte(ev)); err != nil {
				t.Fatal(err)
			}
			check("DecodeEnvelope", b.Records[0].DecodeEnvelope(&e))

			msg := events.SQSMessage{MessageId: "m-1", Body: tt.data}
			check("DecodeSQS", DecodeSQS(&msg, &e))
			check("DecodeSQSExact", DecodeSQSExact(&msg, []byte(tt.data), &e))
		})
	}
}
