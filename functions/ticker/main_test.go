package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// TestTickEchoIsBounded: the console's Test tab can send the ticker any
// event; a tick's error and log line repeat its resources cut, not whole.
func TestTickEchoIsBounded(t *testing.T) {
	huge := []string{strings.Repeat("arn:aws:events:us-east-1:1:rule/x", 10_000)}
	for _, fails := range []bool{false, true} {
		var logs bytes.Buffer
		tk := &ticker{now: time.Now, log: slog.New(slog.NewJSONHandler(&logs, nil)),
			tick: func(context.Context, time.Time) (aggregate.TickResult, error) {
				if fails {
					return aggregate.TickResult{}, errors.New("store refused")
				}
				return aggregate.TickResult{}, nil
			}}
		_, err := tk.Handle(context.Background(), events.EventBridgeEvent{Resources: huge})
		if fails != (err != nil) {
			t.Fatalf("tick failing %v: error %v", fails, err)
		}
		if err != nil && (len(err.Error()) > 1024 || !strings.Contains(err.Error(), "store refused")) {
			t.Errorf("error of %d bytes: %.200s…", len(err.Error()), err)
		}
		if logs.Len() > 1024 {
			t.Errorf("log line of %d bytes", logs.Len())
		}
	}
}
