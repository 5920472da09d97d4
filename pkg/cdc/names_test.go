package cdc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestAnAttributeIsNamedAsAPathStep: a change set aside for one of its
// attributes names it as the strict reader names a key in a path
// (strictjson.KeyPath). The attribute names are whoever wrote the item's
// choice: written raw, an attribute "a.b" would read as attribute b of a
// map a, and one holding ESC would put that escape sequence into the
// set-aside record's field and reason, which operators' terminals show.
func TestAnAttributeIsNamedAsAPathStep(t *testing.T) {
	at := events.SecondsEpochTime{Time: time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)}
	record := func(name string, v events.DynamoDBAttributeValue) *events.DynamoDBEventRecord {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1"), "version": events.NewNumberAttribute("1"), name: v}
		return &events.DynamoDBEventRecord{EventID: "e", EventName: "INSERT",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100000000000000000000002", ApproximateCreationDateTime: at, StreamViewType: "NEW_AND_OLD_IMAGES",
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute("u1")}, NewImage: img}}
	}
	big := events.NewStringAttribute(strings.Repeat("b", 1100_000))
	badNumber := func(key string) events.DynamoDBAttributeValue {
		return events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{key: events.NewNumberAttribute("abc")})
	}
	deep := events.NewStringAttribute("bottom")
	for range 80 {
		deep = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"a": deep})
	}
	for _, tc := range []struct {
		name  string
		rec   *events.DynamoDBEventRecord
		field string
	}{
		{"an oversized attribute with a dot", record("bio.text", big), `dynamodb.NewImage["bio.text"]`},
		{"an oversized attribute holding ESC", record("\x1b]0;PWNED\a", big), `dynamodb.NewImage["\x1b]0;PWNED\a"]`},
		{"a bad number under a key with a dot", record("address", badNumber("zip.code")), `dynamodb.NewImage.address["zip.code"]`},
		{"a bad number in an attribute holding U+202E", record("\u202eevil", badNumber("zip")), `dynamodb.NewImage["\u202eevil"].zip`},
		{"an image nested too deep under a key with a dot", record("x.y", deep), `dynamodb.NewImage["x.y"].a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cdc.New(nil, "events").Record(tc.rec)
			var ce *cdc.ChangeError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, tc.field) {
				t.Fatalf("Record: %v; want a ChangeError naming %s", err, tc.field)
			}
			if u, found := stream.FirstUnprintable(err.Error()); found {
				t.Errorf("reason %q holds %s", err.Error(), u)
			}
		})
	}
}
