package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// refused runs call, turning a panic into an error, and reports whether it
// failed with a *stream.EventShapeError.
func refused(call func() error) (error, bool) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		err = call()
	}()
	var se *stream.EventShapeError
	return err, errors.As(err, &se)
}

// An event a mapping never sends (another source's batch from the
// console's Test tab, {}) fails the invocation naming the field, instead
// of succeeding as an empty batch or setting records without data aside.
// A windowed handler's schedule sends it scheduled events: those are its
// tick, not refused.
func TestHandlersRefuseAnEventOfAnotherShape(t *testing.T) {
	quiet := handler.WithLogger(slog.New(slog.DiscardHandler))
	// Nowhere: a refused event makes no request.
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")})
	tasks, err := handler.NewTasks(handler.TasksConfig{Name: "orders", IdempotencyTable: "idem", DynamoDB: db},
		func(context.Context, *handler.Event) ([]byte, error) { return nil, nil }, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range streamtest.ForeignEvents(stream.SourceSQS) {
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if err, ok := refused(func() error { _, err := tasks.Handle(context.Background(), ev); return err }); !ok {
			t.Errorf("tasks, %s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
	}

	win, err := handler.NewWindowed[Tally](handler.Config{Name: "latency", StateTable: "state", DynamoDB: db}, selectLatency, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range streamtest.ForeignEvents(stream.SourceKinesis) {
		if name == "scheduled" {
			continue
		}
		if err, ok := refused(func() error { _, err := win.Invoke(context.Background(), raw); return err }); !ok {
			t.Errorf("windowed Invoke, %s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
		var ev events.KinesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if err, ok := refused(func() error { _, err := win.HandleBatch(context.Background(), ev); return err }); !ok {
			t.Errorf("windowed HandleBatch, %s: %v, want it refused (*stream.EventShapeError)", name, err)
		}
	}
}
