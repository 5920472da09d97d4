package local_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// docLatePrefix starts docs/windows.md's late-event example.
const docLatePrefix = `curl -sS http://127.0.0.1:9000/ -H 'content-type: application/json' --data-binary '[ {"id":"pv-now"`

// TestLateExampleIsLateWhenPasted: docs/windows.md's late-event example
// computes its times when pasted: an event stamped now, then one that
// occurred 12 minutes ago, both sent now. It carried fixed timestamps, so
// pasted a day later both were a day old, the first as late as the
// second, and dropped instead of corrected. The command runs as the page
// gives it, with a curl that prints the body it would send.
func TestLateExampleIsLateWhenPasted(t *testing.T) {
	testtools.Need(t, "docs/windows.md's example runs under bash, with date", "bash", "date")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "windows.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd docCommand
	for _, c := range documentedCommandsOf(t, "docs/windows.md", string(raw)) {
		if strings.HasPrefix(c.text, docLatePrefix) {
			cmd = c
		}
	}
	if cmd.text == "" {
		t.Fatalf("docs/windows.md has no command starting %q", docLatePrefix)
	}
	before := time.Now().UTC().Truncate(time.Second)
	out := bash(t, root, nil, `curl() { printf '%s' "${@: -1}"; }; `+cmd.text)
	after := time.Now().UTC()
	var events []struct {
		ID                 string
		OccurredAt, SentAt time.Time
	}
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatalf("%s: the body %q: %v", cmd, out, err)
	}
	if len(events) != 2 {
		t.Fatalf("%s: %d events, want pv-now and pv-old", cmd, len(events))
	}
	for _, e := range events {
		if e.SentAt.Before(before) || e.SentAt.After(after) {
			t.Errorf("%s: %s is sent at %s, not now (%s)", cmd, e.ID, e.SentAt, before)
		}
	}
	if now := events[0]; now.OccurredAt.Before(before) || now.OccurredAt.After(after) {
		t.Errorf("%s: %s occurred at %s, not now (%s)", cmd, now.ID, now.OccurredAt, before)
	}
	if old := events[1]; old.SentAt.Sub(old.OccurredAt) < 11*time.Minute || old.SentAt.Sub(old.OccurredAt) > 13*time.Minute {
		t.Errorf("%s: %s occurred %s before it is sent, want the 12 minutes the page says", cmd, old.ID, old.SentAt.Sub(old.OccurredAt))
	}
}
