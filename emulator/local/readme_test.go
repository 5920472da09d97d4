package local_test

import (
	"context"
	"github.com/tributary-dev/tributary/internal/testtools"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeLocalCurl runs the first curl of docs/events.md ("Sending your
// own events", moved there from the README) as written against a local
// topology, with its URL pointed at this test's ingest: the answer is the
// one the page shows, and the event is on the events stream once.
func TestReadmeLocalCurl(t *testing.T) {
	t.Parallel()
	testtools.Need(t, "docs/events.md's example needs it", "curl")
	root, _, _ := paths(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	const documented = "http://127.0.0.1:9000/"
	block := recipeBlock(t, "docs/events.md", string(doc), "<!-- tested by emulator/local TestReadmeLocalCurl")
	if !strings.Contains(block, documented) {
		t.Fatalf("docs/events.md's example does not post to %s, the default ingest URL of make local-up:\n%s", documented, block)
	}
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.ReplaceAll(block, documented, stack.URL("ingest")))
	answer, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(answer)) != `{"events":1,"accepted":1}` {
		t.Fatalf("docs/events.md's curl: %v, answer %s; want {\"events\":1,\"accepted\":1}", err, answer)
	}
	n := 0
	for _, e := range readEvents(t, ctx, stack.Config(), env(t, stack, "ingest", "EVENTS_STREAM_NAME")) {
		if e.ID == "evt-1" && e.Key == "user-42" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the events stream holds evt-1 %d times, want once", n)
	}
}
