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

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The end-to-end test deploys the real synthesized template (infra/cdk.out)
// and runs the real function binaries under aws-lambda-rie against moto.
// `make test` builds both first; run alone, the test asks make for them,
// and for the other templates a test names (more: make test-synths's).
func paths(t *testing.T, more ...string) (root, tpl, bin string) {
	t.Helper()
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl = filepath.Join(root, "infra", "cdk.out", "Tributary.template.json")
	bin = filepath.Join(root, ".build", "local")
	// flock: test packages run at once, and two cdk synths into one cdk.out fail.
	if err := os.MkdirAll(filepath.Join(root, ".build"), 0o755); err != nil {
		t.Fatal(err)
	}
	targets := append([]string{"deps-local", "functions-local", "synth-local"}, more...)
	cmd := exec.Command("flock", append([]string{filepath.Join(root, ".build", "make.lock"), "make", "-s", "-C", root}, targets...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v", strings.Join(targets, " "), err)
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

func TestPipelineAppliesEveryEventOnceClosesWindowsAndQuarantinesPoison(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cfg := stack.Config()
	url := stack.URL("ingest")
	if url == "" {
		t.Fatal("no function URL for ingest")
	}
	quarantine := env(t, stack, "quarantine", "QUARANTINE_TABLE_NAME")
	streamName := env(t, stack, "ingest", "EVENTS_STREAM_NAME")
	w, err := stack.FindPipeline("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	from, to := now.Truncate(time.Minute).Add(-5*time.Minute), now.Add(time.Hour)

	traffic := local.Traffic{Keys: 5, Minutes: 2, Max: 12, Seed: 7, Now: now, Skew: -5 * time.Hour}
	evs, want := traffic.Generate()
	if n, err := local.Send(ctx, url, evs, 50, io.Discard); err != nil || n != len(evs) {
		t.Fatalf("Send: accepted %d of %d: %v", n, len(evs), err)
	}
	vs, err := w.Wait(ctx, want, from, to, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	assertWindows(t, w, want, vs)

	// The producer resends some of them (the same bytes, new records on the
	// stream): no window changes.
	resend := evs[:6]
	if res, err := w.ResendAndCheck(ctx, stack.Stats(), url, resend, want, from, to); err != nil {
		t.Fatal(err)
	} else if res.Delivered < len(resend) {
		t.Fatalf("aggregate received %d records of the %d resent", res.Delivered, len(resend))
	}

	// A malformed record and valid ones after it in one batch: the
	// functions set the malformed one aside at once, with its data and the
	// field at fault, and apply the rest in the same batch — no retry.
	followers := local.FollowerEvents(now, 4)
	for _, e := range followers {
		want[local.WindowKey{Key: e.Key, Window: e.OccurredAt.Truncate(time.Minute).Format(time.RFC3339)}]++
	}
	before := stack.Stats().Of(w.Function)
	seq, err := local.PutPoisonAndFollowers(ctx, cfg, streamName, followers)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := local.WaitQuarantined(ctx, cfg, quarantine, seq)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.SequenceNumber == seq && (r.Kind != "set-aside" || r.Field != "occurredAt" || !bytes.Contains(r.Data, []byte("yesterday"))) {
			t.Errorf("quarantined %s: kind %q field %q data %q; want set aside naming occurredAt, with its data", seq, r.Kind, r.Field, r.Data)
		}
	}
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		t.Fatalf("the valid records after the malformed one: %v", err)
	}
	if st := stack.Stats().Of(w.Function); st.ItemFailures != before.ItemFailures || st.Retries != before.Retries || st.OnFailure != before.OnFailure {
		t.Errorf("aggregate mapping stats %+v (before %+v): the malformed record held the shard back", st, before)
	}

	// A late event for a window made final by later events: a correction.
	late := local.LateEvent(traffic, now)
	want[local.WindowKey{Key: late.Key, Window: late.OccurredAt.Truncate(time.Minute).Format(time.RFC3339)}]++
	if _, err := local.Send(ctx, url, []stream.Envelope{late}, 1, io.Discard); err != nil {
		t.Fatal(err)
	}
	vs, err = w.Wait(ctx, want, from, to, func(vs []state.View) bool {
		for _, v := range vs {
			if v.Key == late.Key && v.Window.Start.Equal(late.OccurredAt.Truncate(time.Minute)) {
				return v.Final && v.Revision >= 2
			}
		}
		return false
	}, io.Discard)
	if err != nil {
		t.Fatalf("late event did not correct its final window: %v", err)
	}
	assertWindows(t, w, want, vs)
	outs, err := w.ReadOutputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var finals, corrections int
	for _, o := range outs {
		switch {
		case strings.Contains(o, `"type":"correction"`) && strings.Contains(o, `"previous"`) && strings.Contains(o, `"window":"`+w.Kind()+`"`):
			corrections++
		case strings.Contains(o, `"type":"final"`):
			finals++
		}
	}
	if finals == 0 || corrections != 1 {
		t.Fatalf("output stream has %d final results and %d corrections, want some and 1 for the late event's %s window:\n%s", finals, corrections, w.Kind(), strings.Join(outs, "\n"))
	}
}

func assertWindows(t *testing.T, w *local.Windows, want local.Counts, vs []state.View) {
	t.Helper()
	var buf bytes.Buffer
	if bad := local.PrintWindows(&buf, w.Kind(), want, vs); bad > 0 {
		t.Fatalf("%d windows differ from what was sent:\n%s", bad, buf.String())
	}
}

// ingestRejectsBadEnvelopesNamingTheField: the ingest URL answers an
// envelope it cannot take with a 400 whose JSON body names the field. It
// runs on another test's topology (a whole one is some 20 functions under
// aws-lambda-rie, each mapping polling moto: seconds of CPU for three
// requests that store nothing).
func ingestRejectsBadEnvelopesNamingTheField(t *testing.T, url string) {
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
