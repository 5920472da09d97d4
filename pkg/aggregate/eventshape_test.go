package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// An event aggregate's mapping never sends — another source's batch from
// the console's Test tab, the ticker's scheduled event, {} — fails the
// invocation naming the field, where it used to succeed as an empty batch
// (or fail on a missing sequence number without saying what was sent).
func TestInvokeRefusesAnEventOfAnotherShape(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"shape","windows":[{"kind":"tumbling","size":"1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	p := aggregate.New(cfg, state.NewViews(mem, "views", cfg.Aggregates), nil, "", aggregate.WithLogger(quiet))
	for name, raw := range streamtest.ForeignEvents(stream.SourceKinesis) {
		var se *stream.EventShapeError
		if _, err := p.Invoke(context.Background(), raw); !errors.As(err, &se) {
			t.Errorf("Invoke, %s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
		var ev events.KinesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			_, err = p.HandleBatch(context.Background(), ev)
			return err
		}()
		if !errors.As(err, &se) {
			t.Errorf("HandleBatch, %s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
	}
	// A tumbling window's last invocation may have no records: still a batch.
	if _, err := p.Invoke(context.Background(), []byte(`{"Records":[]}`)); err != nil {
		t.Errorf("an empty Records array: %v", err)
	}
}
