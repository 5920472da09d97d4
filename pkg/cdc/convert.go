package cdc

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// ImageJSON converts a DynamoDB stream image to plain JSON values (see
// stream.ImageJSON): S → string, N → number (exact digits), BOOL, NULL →
// null, M → object, L → array, SS/NS/BS → arrays, B → base64 string. A nil
// image is nil (JSON null).
func ImageJSON(img map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	return stream.ImageJSON(img)
}
