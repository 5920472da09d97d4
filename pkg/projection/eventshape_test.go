package projection_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/shapetest"
)

// An event its mapping never sends (another source's batch from the
// console's Test tab, a scheduled event, {}) fails the invocation naming
// the field, instead of succeeding as an empty batch or setting records
// without data aside as malformed.
func TestHandleRefusesAnEventOfAnotherShape(t *testing.T) {
	h := projection.New(nil, nil, projection.FixedTable("views"), projection.Views{})
	shapetest.RefusesForeignEvents(t, stream.SourceKinesis, func(ctx context.Context, ev events.KinesisEvent) error {
		_, err := h.Handle(ctx, ev)
		return err
	})
}
