package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// make invoke without FN or EVENT, or with an EVENT file that is not
// there, says so at once: its prerequisites (the tools, every function, the
// synth) take minutes on a fresh machine, and the runner only said what was
// missing after them. make -n shows whether make would start building.
func TestMakeInvokeChecksItsArgumentsBeforeBuilding(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no FN", []string{"EVENT=events/ingest/function-url-post.json"}, "make invoke needs FN="},
		{"no EVENT", []string{"FN=ingest"}, "make invoke needs FN="},
		{"no such file", []string{"FN=ingest", "EVENT=events/ingest/no-such-sample.json"}, "EVENT=events/ingest/no-such-sample.json: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("make", append([]string{"-n", "-C", root, "invoke"}, tc.args...)...)
			cmd.Env = append(cmd.Environ(), "FN=", "EVENT=")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("make -n invoke %s: %v, want a failure saying %q before any recipe; it printed:\n%.2000s", strings.Join(tc.args, " "), err, tc.want, out)
			}
			if strings.Contains(string(out), "go build") || strings.Contains(string(out), "npm ci") {
				t.Errorf("make -n invoke %s would build first:\n%.2000s", strings.Join(tc.args, " "), out)
			}
		})
	}
}
