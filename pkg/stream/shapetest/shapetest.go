package shapetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// RefusesForeignEvents sends handle each of streamtest.ForeignEvents(source), decoded
// as the consumer's event type E, and fails t for each not refused with a
// *stream.EventShapeError (a panic counts as not refused).
func RefusesForeignEvents[E any](t testing.TB, source string, handle func(context.Context, E) error) {
	t.Helper()
	for name, raw := range streamtest.ForeignEvents(source) {
		var ev E
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			return handle(context.Background(), ev)
		}()
		var se *stream.EventShapeError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
	}
}
