package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/local"
	"github.com/tributary-dev/tributary/pkg/standin"
	"github.com/tributary-dev/tributary/pkg/standin/standintest"
)

// The end-to-end test deploys the real synthesized template (infra/cdk.out)
// and runs the real function binaries under aws-lambda-rie against moto.
// `make test` builds both first; run alone, the test asks make for them.
func paths(t *testing.T) (root, tpl, bin string) {
	t.Helper()
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl = filepath.Join(root, "infra", "cdk.out", "Tributary.template.json")
	bin = filepath.Join(root, ".build", "local")
	cmd := exec.Command("make", "-s", "-C", root, "deps", "functions-local", "synth")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("make deps functions-local synth: %v", err)
	}
	return root, tpl, bin
}

func startTopology(t *testing.T) (*local.Stack, string) {
	t.Helper()
	_, tpl, bin := paths(t)
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template: tpl, Functions: bin, Endpoint: srv.Endpoint(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("local.Up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return stack, srv.Endpoint()
}

func env(t *testing.T, s *local.Stack, binary, name string) string {
	t.Helper()
	specs, err := s.Deployment().Functions()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range specs {
		if f.Binary == binary {
			if v := f.Env[name]; v != "" {
				return v
			}
		}
	}
	t.Fatalf("function %s has no %s in the template", binary, name)
	return ""
}

func TestPipelineCountsEveryEventAndQuarantinesPoison(t *testing.T) {
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := stack.Config()
	url := stack.URL("ingest")
	if url == "" {
		t.Fatal("no function URL for ingest")
	}
	counts := env(t, stack, "aggregate", "COUNTS_TABLE_NAME")
	quarantine := env(t, stack, "quarantine", "QUARANTINE_TABLE_NAME")
	streamName := env(t, stack, "ingest", "EVENTS_STREAM_NAME")

	evs, want := local.Traffic{Keys: 5, Minutes: 2, Max: 12, Seed: 7, Now: time.Now(), Skew: -5 * time.Hour}.Generate()
	if n, err := local.Send(ctx, url, evs, 50, io.Discard); err != nil || n != len(evs) {
		t.Fatalf("Send: accepted %d of %d: %v", n, len(evs), err)
	}
	got, err := local.WaitCounts(ctx, cfg, counts, want, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	assertCounts(t, want, got)

	poison := []byte(`{"id":"bad","key":"user-00","occurredAt":"not a time"}`)
	seq, err := local.PutRaw(ctx, cfg, streamName, "user-00", poison)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := local.WaitQuarantined(ctx, cfg, quarantine, seq)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.SequenceNumber == seq {
			found = true
			if !bytes.Equal(r.Data, poison) {
				t.Errorf("quarantined data = %q, want %q", r.Data, poison)
			}
			if r.Condition != "RetryAttemptsExhausted" {
				t.Errorf("quarantined condition = %q, want RetryAttemptsExhausted", r.Condition)
			}
		}
	}
	if !found {
		t.Fatalf("record %s not in quarantine", seq)
	}

	// The shard moved on past the poison record: later events are counted.
	evs2, want2 := local.Traffic{Keys: 5, Minutes: 2, Max: 3, Seed: 8, Now: time.Now(), Skew: 2 * time.Hour}.Generate()
	for k, v := range want2 {
		want[k] += v
	}
	if _, err := local.Send(ctx, url, evs2, 50, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err = local.WaitCounts(ctx, cfg, counts, want, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	assertCounts(t, want, got)
}

func assertCounts(t *testing.T, want, got local.Counts) {
	t.Helper()
	var buf bytes.Buffer
	if bad := local.PrintCounts(&buf, want, got); bad > 0 {
		t.Fatalf("%d (key, minute) counts differ from what was sent:\n%s", bad, buf.String())
	}
}

func TestIngestURLRejectsBadEnvelopeNamingTheField(t *testing.T) {
	stack, _ := startTopology(t)
	url := stack.URL("ingest")
	tests := []struct {
		name, body, field string
	}{
		{"missing key", `{"id":"e1","type":"t","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:01Z","data":{}}`, "key"},
		{"bad occurredAt", `{"id":"e2","type":"t","key":"k","occurredAt":"yesterday","sentAt":"2026-11-29T10:00:01Z","data":{}}`, "occurredAt"},
		{"not json", `{"id":`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", resp.StatusCode, body)
			}
			if !json.Valid(body) {
				t.Errorf("error body is not JSON: %s", body)
			}
			if tc.field != "" && !strings.Contains(string(body), tc.field) {
				t.Errorf("error %s does not name field %q", body, tc.field)
			}
		})
	}
}
