package stream

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestUnknownTopLevelKeyIsNamedAsAPath: a record written straight to the
// stream or a queue with a top-level key that is no envelope field is
// refused naming the key as the strict reader names a key in a path
// (strictjson.KeyPath): a key that is no identifier quoted in brackets.
// Named raw, a top-level key "data.amount" would read as the path of
// another place, inside data, and a key holding ESC or U+202E would put
// that character into the set-aside record's field and reason, which
// operators' terminals and log viewers show.
func TestUnknownTopLevelKeyIsNamedAsAPath(t *testing.T) {
	const head = `"id":"a","type":"t","key":"k","occurredAt":"2026-11-29T09:00:00Z","sentAt":"2026-11-29T09:00:00Z"`
	for _, tc := range []struct {
		name string
		key  string // as written in the record's JSON
		want string // the field named
	}{
		{"an identifier", `extra`, `extra`},
		{"a key that reads as a path into data", `data.amount`, `["data.amount"]`},
		{"an escape sequence", `\u001b]0;PWNED\u0007\u001b[2J`, `["\x1b]0;PWNED\a\x1b[2J"]`},
		{"a bidirectional override", `\u202eevil`, `["\u202eevil"]`},
		{"a line break", `a\nb`, `["a\nb"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := `{` + head + `,"` + tc.key + `":1}`
			check := func(how string, err error) {
				t.Helper()
				var pe *PoisonRecordError
				if !errors.As(err, &pe) {
					t.Fatalf("%s = %v, want a *PoisonRecordError", how, err)
				}
				if pe.Field != tc.want {
					t.Errorf("%s: field %q, want %q", how, pe.Field, tc.want)
				}
				if u, found := FirstUnprintable(pe.Error()); found {
					t.Errorf("%s: reason %q holds %s", how, pe.Error(), u)
				}
			}
			var e Envelope
			rec := kinesisRecord("4960", data)
			check("DecodeKinesis", DecodeKinesis(&rec, &e))

			var b KinesisBatch
			ev := fmt.Sprintf(`{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"k","sequenceNumber":"4960","data":%q,"approximateArrivalTimestamp":1795948872.4},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"shardId-000000000000:4960","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/r","awsRegion":"us-east-1","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s"}]}`,
				base64.StdEncoding.EncodeToString([]byte(data)))
			if err := b.Decode([]byte(ev)); err != nil {
				t.Fatal(err)
			}
			check("DecodeEnvelope", b.Records[0].DecodeEnvelope(&e))

			msg := events.SQSMessage{MessageId: "m-1", Body: data}
			check("DecodeSQSExact", DecodeSQSExact(&msg, []byte(data), &e))
		})
	}
}
