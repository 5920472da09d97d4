package local_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestJoinsEndToEnd runs both joins of the deployed template with the real
// binaries: a profile written to the profiles table reaches enrich through
// cdc and the events stream, and the purchases after each version carry
// that version (Demo fails otherwise); the timeline follows tweets, a
// follow, a deletion and an unfollow (Demo fails if the view does not
// converge to the join after each).
func TestJoinsEndToEnd(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()

	enr, err := stack.FindEnrichment()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := enr.Demo(ctx, stack.URL("ingest"), &out); err != nil {
		t.Fatalf("enrichment: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`enriched purchase-1: profile version 1 {"name":"Ada","plan":"free"`,
		`enriched purchase-2: profile version 2 {"name":"Ada","plan":"pro"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("enrichment output lacks %q:\n%s", want, out.String())
		}
	}

	tl, err := stack.FindTimelines()
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := tl.Demo(ctx, &out); err != nil {
		t.Fatalf("timeline: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "timeline(ada) = "); got != 5 {
		t.Errorf("%d timelines printed, want one per change (5):\n%s", got, out.String())
	}
}
