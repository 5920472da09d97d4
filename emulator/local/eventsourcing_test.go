package local_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestEventSourcingEndToEnd runs the event-sourcing story with the real
// binaries under aws-lambda-rie (commands behind its function URL, publish
// on the event store's stream, project on the published stream): commands
// accepted, one refused by validation, two at once on one version (one
// conflicts), a retry answered from its record, a move, the seat map
// current at once and the projected views waiting for the version, a
// snapshot, and a rebuild of the views from the log equal to the live ones
// (Demo fails if any of it does not hold).
func TestEventSourcingEndToEnd(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	e, err := stack.FindEventSourcing()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := e.Demo(ctx, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"→ 422 refused: data.seats[0]: seat A2 is already reserved",
		"→ 200 accepted, version 4 · 409 conflict: currentVersion 4",
		"Idempotency-Replayed: true, same body: true",
		"→ 200 accepted, versions 5–6",
		"seat map, minVersion=6",
		"version 6, waited 0 ms",
		"snapshot at version 25",
		"rebuilt = live:",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
