package quarantine

import (
	"errors"
	"testing"
)

// FuzzParse: any message on the on-failure queue is a record with its
// batch or a *ParseError; nothing panics (the queue's sender is Lambda, but
// a message sent to it by hand is read the same way).
func FuzzParse(f *testing.F) {
	f.Add([]byte(kinesisSample))
	f.Add([]byte(onFailure("DDBStreamBatchInfo", "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-11-29T10:00:00.000", "shardId-1", "100", "200", 2)))
	f.Add([]byte(`{"version":"1.0","version":"2.0"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, _, info, err := Parse(body)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %T %v, want *ParseError", body, err, err)
			}
			return
		}
		if rec == nil || info == nil {
			t.Fatalf("%q: parsed without its record or batch", body)
		}
	})
}
