package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestIngestSamplesAggregate: every envelope in an ingest sample of a type
// the stack's pipeline aggregates has the value the pipeline reads
// (data.ms), so a sample sent from the console is counted by aggregate
// rather than set aside (which a deployed stack alarms on).
func TestIngestSamplesAggregate(t *testing.T) {
	cfg := stackPipeline(t)
	files, err := filepath.Glob(filepath.Join("ingest", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ingest samples: %v", err)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var req lambdaevents.LambdaFunctionURLRequest
		decode(t, raw, &req)
		body := bytes.TrimSpace([]byte(req.Body))
		var envs []json.RawMessage
		if len(body) > 0 && body[0] == '[' {
			decode(t, body, &envs)
		} else {
			envs = []json.RawMessage{body}
		}
		for i, e := range envs {
			var env stream.Envelope
			if err := json.Unmarshal(e, &env); err != nil {
				continue // refused by ingest itself (function-url-invalid.json's second), never on the stream
			}
			if !cfg.Matches(env.Type) {
				continue
			}
			checked++
			if _, _, _, err := cfg.Extract(&env); err != nil {
				t.Errorf("%s: envelope %d (id %q): aggregate would set it aside: %v", f, i, env.ID, err)
			}
		}
	}
	if checked == 0 {
		t.Errorf("no ingest sample has an envelope of the types %s aggregates", cfg.Name)
	}
}
