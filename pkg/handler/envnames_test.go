package handler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/handler"
)

// A table or stream name an operator mistyped in the console (a space
// after it, the stream's ARN) fails FromEnv and TasksFromEnv naming the
// variable, where the function used to start and fail every batch.
func TestFromEnvRefusesNamesTheServiceCannotTake(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	for _, c := range []struct{ state, out, quarantine, want string }{
		{"state ", "out", "quarantine", `STATE_TABLE_NAME: "state " is not a DynamoDB table name`},
		{"state", "arn:aws:kinesis:us-east-1:123456789012:stream/out", "quarantine", "OUTPUT_STREAM_NAME: " + `"arn:aws:kinesis:us-east-1:123456789012:stream/out" is not a Kinesis stream name`},
		{"state", "out", "q", `QUARANTINE_TABLE_NAME: "q" is not a DynamoDB table name`},
	} {
		t.Setenv(handler.EnvStateTable, c.state)
		t.Setenv(handler.EnvOutputStream, c.out)
		t.Setenv(handler.EnvQuarantineTable, c.quarantine)
		if _, err := handler.FromEnv("statuscodes"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromEnv: %v; want %q", err, c.want)
		}
	}
	// The stream the tick reads before it takes a shard for idle.
	t.Setenv(handler.EnvStateTable, "state")
	t.Setenv(handler.EnvOutputStream, "out")
	t.Setenv(handler.EnvQuarantineTable, "quarantine")
	t.Setenv(handler.EnvEventsStream, "events ")
	if _, err := handler.FromEnv("statuscodes"); err == nil || !strings.Contains(err.Error(), `EVENTS_STREAM_NAME: "events " is not a Kinesis stream name`) {
		t.Errorf("FromEnv with a mistyped EVENTS_STREAM_NAME: %v", err)
	}
	t.Setenv(handler.EnvEventsStream, "events")
	if cfg, err := handler.FromEnv("statuscodes"); err != nil || cfg.Backlog == nil {
		t.Errorf("FromEnv with EVENTS_STREAM_NAME: backlog %v, %v; want the stream's", cfg.Backlog, err)
	}
	t.Setenv(handler.EnvEventsStream, "")
	if cfg, err := handler.FromEnv("statuscodes"); err != nil || cfg.Backlog != nil {
		t.Errorf("FromEnv without EVENTS_STREAM_NAME: backlog %v, %v; want none (the clock alone)", cfg.Backlog, err)
	}
	t.Setenv(handler.EnvIdempotencyTable, "idempotency\n")
	_, err := handler.TasksFromEnv("orders", func(context.Context, *handler.Event) ([]byte, error) { return nil, nil })
	if want := `IDEMPOTENCY_TABLE_NAME: "idempotency\n" is not a DynamoDB table name`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("TasksFromEnv: %v; want %q", err, want)
	}
}
