package envvar

import (
	"strings"
	"testing"
)

// A table, stream, index or bucket variable an operator edited in the
// console fails the cold start naming the variable and what it wants when
// the service could never take it (a space around it, a stream's ARN where
// its name goes, a name too long), not at the first batch with a
// ValidationException on every record.
func TestName(t *testing.T) {
	const tableARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-Quarantine"
	for _, c := range []struct {
		kind    Kind
		value   string
		set     bool
		wantErr string // "" : accepted
	}{
		{Table, "Tributary-QuarantineTable1A2B-XYZ", true, ""},
		{Table, "a.b_c-1", true, ""},
		{Table, tableARN, true, ""},
		{Table, "", false, "is not set (where it goes)"},
		{Table, "", true, "is not set (where it goes)"},
		{Table, "   ", true, `"   " is not a DynamoDB table name`},
		{Table, "Tributary-Quarantine ", true, `"Tributary-Quarantine " is not a DynamoDB table name (3 to 255 letters, digits, '_', '-' and '.') or table ARN (where it goes)`},
		{Table, "ab", true, "is not a DynamoDB table name"},
		{Table, strings.Repeat("t", 256), true, "is not a DynamoDB table name"},
		{Table, "arn:aws:kinesis:us-east-1:123456789012:stream/events", true, "is not a DynamoDB table name"},
		{Stream, "Tributary-EventsStream1B2C3D4E-xQ7pZk9LmN2a", true, ""},
		{Stream, "arn:aws:kinesis:us-east-1:123456789012:stream/events", true, `is not a Kinesis stream name (1 to 128 letters, digits, '_', '-' and '.'; its name, not its ARN)`},
		{Stream, strings.Repeat("s", 129), true, "is not a Kinesis stream name"},
		{Stream, "events\n", true, `"events\n" is not a Kinesis stream name`},
		{Index, "followers", true, ""},
		{Index, "by followee", true, "is not a DynamoDB index name"},
		{Bucket, "tributary-archive-123456789012", true, ""},
		{Bucket, "Tributary-Archive", true, "is not an S3 bucket name"},
		{Bucket, "arn:aws:s3:::tributary-archive", true, "is not an S3 bucket name"},
		{Attribute, "userId", true, ""},
		{Attribute, "user id", true, ""},
		{Attribute, "é" + strings.Repeat("k", 254), true, ""}, // 255 characters, 256 bytes
		{Attribute, "userId ", true, `"userId " is not a DynamoDB key attribute name`},
		{Attribute, " userId", true, "is not a DynamoDB key attribute name"},
		{Attribute, "   ", true, "is not a DynamoDB key attribute name"},
		{Attribute, "user\nId", true, "is not a DynamoDB key attribute name"},
		{Attribute, "user\xffId", true, "is not a DynamoDB key attribute name"},
		{Attribute, strings.Repeat("k", 256), true, "is not a DynamoDB key attribute name (1 to 255 characters"},
	} {
		lookup := func(k string) (string, bool) {
			if k == "VAR" && c.set {
				return c.value, true
			}
			return "", false
		}
		got, err := Name(lookup, "VAR", "where it goes", c.kind)
		switch {
		case c.wantErr == "" && (err != nil || got != c.value):
			t.Errorf("%s %q: %q, %v; want it accepted", c.kind, c.value, got, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), "environment variable VAR") || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %q: %v; want an error naming VAR with %q", c.kind, c.value, err, c.wantErr)
		}
	}
	// What it repeats of a hostile value is bounded.
	if _, err := Name(func(string) (string, bool) { return strings.Repeat("x y", 2000), true }, "VAR", "w", Table); err == nil || len(err.Error()) > 400 {
		t.Errorf("a 6,000-byte value: %d bytes of error", len(err.Error()))
	}
}
