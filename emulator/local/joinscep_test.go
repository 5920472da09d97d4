package local_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestJoinsAndRulesEndToEnd runs the stream–stream join and CEP of the
// deployed template with the real binaries under aws-lambda-rie: a search
// with a click is joined, a search without one is unmatched once a later
// search moves the watermark past the bound, both sessions' click-through
// rate for the minute arrives; two rules added through the rules
// function's URL while detect runs apply from their activation time, the
// sequence rule's first match arrives, and once it is deleted only the
// filter rule matches the same pattern (DemoJoin and DemoRules fail
// otherwise).
func TestJoinsAndRulesEndToEnd(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	j, err := stack.FindJoinsAndRules()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := j.DemoJoin(ctx, stack.URL("ingest"), &out); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	for _, want := range []string{"      joined    search-a1-", "      unmatched search-b1-", "1/1 (100%)", "0/1 (0%)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("join output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := j.DemoRules(ctx, stack.URL("ingest"), &out); err != nil {
		t.Fatalf("rules: %v\n%s", err, out.String())
	}
	for _, want := range []string{"→ first match fail-then", "fail=pay-failed-", "big=pay-", "huge-payment matches (p=pay-", "fail-then-big, deleted, does not"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rules output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
