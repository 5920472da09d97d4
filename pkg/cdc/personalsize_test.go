package cdc_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// TestOversizedChangeNamesAnAttributeOfTheRecord: a change too big for
// Kinesis names the attribute that makes it so among those the changelog
// record holds: the item's personal attribute is left out of the record,
// so however big it is, it is not the one to shorten.
func TestOversizedChangeNamesAnAttributeOfTheRecord(t *testing.T) {
	img := `{"userId":{"S":"u-1"},"version":{"N":"2"},"bio":{"S":"` + strings.Repeat("b", 1100_000) + `"},` +
		`"` + setaside.PersonalAttribute + `":{"M":{"email":{"S":"` + strings.Repeat("p", 2000_000) + `"}}}}`
	var rec events.DynamoDBEventRecord
	if err := json.Unmarshal([]byte(`{"eventID":"e","eventName":"MODIFY","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/profiles/stream/x",`+
		`"dynamodb":{"ApproximateCreationDateTime":1795949100,"SequenceNumber":"111","Keys":{"userId":{"S":"u-1"}},"NewImage":`+img+`}}`), &rec); err != nil {
		t.Fatal(err)
	}
	_, _, err := cdc.New(nil, "events").Record(&rec)
	var ce *cdc.ChangeError
	if !errors.As(err, &ce) || ce.Field != "dynamodb.NewImage.bio" || !strings.Contains(ce.Reason, "attribute bio is") || strings.Contains(ce.Reason, setaside.PersonalAttribute) {
		t.Fatalf("Record: %v; want a change error naming dynamodb.NewImage.bio, not the personal attribute", err)
	}
}
