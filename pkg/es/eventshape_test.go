package es_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/shapetest"
)

// An event its mapping never sends (another source's batch from the
// console's Test tab, a scheduled event, {}) fails the invocation naming
// the field, instead of succeeding as an empty batch or setting records
// without data aside as malformed.
func TestHandleRefusesAnEventOfAnotherShape(t *testing.T) {
	h := es.NewPublisher(nil, "published")
	shapetest.RefusesForeignEvents(t, stream.SourceDynamoDB, func(ctx context.Context, ev events.DynamoDBEvent) error {
		_, err := h.Handle(ctx, ev)
		return err
	})
}
