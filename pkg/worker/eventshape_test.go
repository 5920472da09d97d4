package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// An event its mapping never sends (another source's batch from the
// console's Test tab, a scheduled event, {}) fails the invocation naming
// the field, instead of succeeding as an empty batch or setting records
// without data aside as malformed.
func TestHandleRefusesAnEventOfAnotherShape(t *testing.T) {
	h := New(nil, nil, "results")
	for name, raw := range streamtest.ForeignEvents(stream.SourceSQS) {
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			_, err = h.Handle(context.Background(), ev)
			return err
		}()
		var se *stream.EventShapeError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
	}
}
