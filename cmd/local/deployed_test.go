package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// While a make local-up runs, the commands that read it name resources
// from the template it deployed, not from infra/cdk.out: a synth while it
// ran (make invoke, after a pipeline file changed) rewrote cdk.out, and
// make results then said "states have different aggregates" for a pipeline
// given min, or "no windows" for a pipeline that was never deployed. The
// runner keeps its copy where the Makefile looks for it, per stand-in
// address and stack; once the copy is removed (local-up stopped) they read
// infra/cdk.out again.
func TestMakeTargetsReadTheRunningLocalUpsTemplate(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, dir := emptyCheckout(t)
	targets := []string{"results", "tail", "setaside", "setaside-show", "putback", "logs"}
	makeN := func(t *testing.T, target, addr, stack string) string {
		t.Helper()
		args := append([]string{"-n", "-f", filepath.Join(root, "Makefile"), "-C", dir, target}, operatorArgs[target]...)
		cmd := exec.Command("make", append(args, "STACK="+stack)...)
		cmd.Env = append(os.Environ(), "TRIBUTARY_STANDIN_ADDR="+addr, "TRIBUTARY_ROOT="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%.2000s", target, err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		name, endpoint, addr, stack string
	}{
		{"the first make local-up", "http://127.0.0.1:4566", "127.0.0.1:4566", "Tributary"},
		{"one on its own stand-in, reached as localhost", "http://127.0.0.1:4567", "localhost:4567", "Tributary"},
		{"a second one on the first's stand-in", "http://127.0.0.1:4566", "127.0.0.1:4566", "Tributary-1765000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := localdeploy.DeployedTemplatePath(dir, tc.endpoint, tc.stack)
			remove, err := keepDeployedTemplate([]byte(`{"Resources":{}}`), path)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != `{"Resources":{}}` {
				t.Fatalf("the copy at %s: %q, %v", path, b, err)
			}
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				t.Fatal(err)
			}
			for _, target := range targets {
				if out := makeN(t, target, tc.addr, tc.stack); !strings.Contains(out, " -template "+rel+" ") {
					t.Errorf("make %s STACK=%s with TRIBUTARY_STANDIN_ADDR=%s while local-up runs: does not read its copy %s\n%.2000s", target, tc.stack, tc.addr, rel, out)
				}
			}
			// Another stack, or another stand-in, is not this one's copy.
			if out := makeN(t, "results", tc.addr, tc.stack+"-other"); strings.Contains(out, rel) {
				t.Errorf("make results STACK=%s-other reads %s, the copy of stack %s\n%.2000s", tc.stack, rel, tc.stack, out)
			}
			remove()
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("the copy %s is still there after local-up stopped: %v", path, err)
			}
			for _, target := range targets {
				if out := makeN(t, target, tc.addr, tc.stack); !strings.Contains(out, " -template infra/cdk.out/Tributary.template.json ") {
					t.Errorf("make %s with no local-up running: does not read infra/cdk.out\n%.2000s", target, out)
				}
			}
		})
	}
}
