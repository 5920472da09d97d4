package setaside

import (
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// PersonalAttribute is the item attribute that holds personal data, by the
// stack's convention: the events table keeps an event's personal data in
// it (es.AttrPersonal is this name), apart from everything else, so that
// erasure is removing one attribute. A DynamoDB stream record kept in the
// quarantine table — set aside by a function (FromDynamoDB) or copied by
// quarantine from a failed range (DynamoDBData) — never keeps it: such a
// copy would outlive the erasure of the item it came from by Retention.
// The copy keeps the record's keys (dynamodb.Keys), which name the item
// where the personal data stays until it is erased, and says what was
// removed (Item.Redacted, and the reason).
const PersonalAttribute = "personal"

// Redact is rec without personal data: a copy whose images lack
// PersonalAttribute, and the fields removed ("dynamodb.OldImage.personal",
// "dynamodb.NewImage.personal"), nil when there was none. rec itself is not
// changed.
func Redact(rec *events.DynamoDBEventRecord) (events.DynamoDBEventRecord, []string) {
	out := *rec
	var removed []string
	strip := func(img map[string]events.DynamoDBAttributeValue, field string) map[string]events.DynamoDBAttributeValue {
		if _, ok := img[PersonalAttribute]; !ok {
			return img
		}
		kept := make(map[string]events.DynamoDBAttributeValue, len(img)-1)
		for k, v := range img {
			if k != PersonalAttribute {
				kept[k] = v
			}
		}
		removed = append(removed, field+"."+PersonalAttribute)
		return kept
	}
	out.Change.OldImage = strip(rec.Change.OldImage, "dynamodb.OldImage")
	out.Change.NewImage = strip(rec.Change.NewImage, "dynamodb.NewImage")
	return out, removed
}

// DynamoDBData is the data kept of a DynamoDB stream record: the record
// without personal data (Redact) as JSON, in the shape Lambda delivers it
// (so it can be replayed into its function), without HTML escaping; and
// the fields removed.
func DynamoDBData(rec *events.DynamoDBEventRecord) ([]byte, []string, error) {
	kept, removed := Redact(rec)
	data, err := MarshalJSON(&kept)
	return data, removed, err
}

// redactionNote is what a reason says of the fields removed from a copy.
func redactionNote(removed []string) string {
	return "Personal data removed from this copy (" + strings.Join(removed, ", ") +
		"): it stays only in the item with these keys (dynamodb.Keys) of the source table, where erasure reaches it."
}
