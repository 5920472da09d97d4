package aggregate_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// The state Lambda carries for a shard of the stack's own pipeline
// (tumbling 1m, hopping 5m/1m, session) holds thousands of keys: at 1,000
// events a second over 10,000 keys a shard meets 5,000 keys an interval,
// and past 1 MB Lambda ends the interval early, a flush each time. The
// first format took some 570 bytes a key and pane (tumbling and hopping
// partials of 240 bytes each, a session's points); this one holds 2,000
// keys of a pane in a fifth of that, on the records as Lambda hands them
// over (56-digit sequence numbers).
func TestIntervalStateOfTheStacksPipelineIsSmallPerKey(t *testing.T) {
	cfg, err := os.ReadFile("../../pipelines/pageviews.json")
	if err != nil {
		t.Fatal(err)
	}
	p, out := pipelineOn(t, string(cfg), inProcessViews)
	const keys = 2000
	// Two records a key in the minute from 10:41 (15 ms apart), sent as
	// invocations of 500 as the stack's mapping cuts them.
	start := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	var state map[string]string
	for first := 0; first < 2*keys; first += 500 {
		raw := streamtest.KinesisEvent{Records: 500, First: first, Keys: keys, Start: start, Spacing: 15 * time.Millisecond,
			Window: true, WindowStart: start, WindowEnd: start.Add(2 * time.Minute), State: state}.JSON()
		var ev events.KinesisTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		resp, err := p.HandleInterval(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("invocation from record %d: %v %v", first, resp.BatchItemFailures, err)
		}
		state = resp.State
	}
	size := limits.WindowStateSize(state)
	t.Logf("window state: %d bytes for %d keys (%d a key)", size, keys, size/keys)
	if perKey := size / keys; perKey > 120 {
		t.Errorf("the window state takes %d bytes a key, want at most 120", perKey)
	}
	// The flush writes what the state held: every key's tumbling window
	// counts its two records.
	raw := streamtest.KinesisEvent{Window: true, Final: true, WindowStart: start, WindowEnd: start.Add(2 * time.Minute), State: state}.JSON()
	var final events.KinesisTimeWindowEvent
	if err := json.Unmarshal(raw, &final); err != nil {
		t.Fatal(err)
	}
	if _, err := p.HandleInterval(context.Background(), final); err != nil {
		t.Fatal(err)
	}
	_ = out
}
