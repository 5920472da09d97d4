package localdeploy_test

import (
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/localdeploy"
)

// TestNoStackNamesTheFlagAndTheRunningStacks: a -stack the running
// topology lacks is named, quoted and bounded (a value pasted by mistake,
// control characters), with the stacks it has or what to do without any.
func TestNoStackNamesTheFlagAndTheRunningStacks(t *testing.T) {
	for _, tc := range []struct {
		name, stack string
		running     []string
		want        string
	}{
		{"among others", "nope", []string{"Tributary", "Tributary-1765000000"}, `-stack "nope": no stack of that name in the running topology; stacks: Tributary, Tributary-1765000000 (give one, as make local-up prints it)`},
		{"none running", "nope", nil, `-stack "nope": no stack of that name in the running topology, nor any other: start one with make local-up`},
		{"control characters", "a\x1b[2Jb", []string{"Tributary"}, `-stack "a\x1b[2Jb": no stack`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := localdeploy.CheckStack(tc.stack, tc.running)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("CheckStack(%q, %v) = %v; want %q", tc.stack, tc.running, err, tc.want)
			}
		})
	}
	if err := localdeploy.CheckStack(strings.Repeat("s", 10_000), nil); err == nil || len(err.Error()) > 300 {
		t.Errorf("a long -stack is repeated whole: %d bytes", len(err.Error()))
	}
	if err := localdeploy.CheckStack("Tributary", []string{"Tributary"}); err != nil {
		t.Errorf("a running stack: %v", err)
	}
}
