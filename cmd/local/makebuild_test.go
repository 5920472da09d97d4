package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// Ctrl-C while make builds the functions leaves no scratch directory
// behind: each build links into .build/<set>-XXXXXX and moves the binaries
// out at its end, and an interrupted one left the directory (with whatever
// binaries it had linked) in .build, one more at each Ctrl-C. A checkout of
// one function, and a go that waits to be interrupted, stand in for the
// repository and the compiler.
func TestInterruptedFunctionBuildLeavesNoScratch(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make", "bash")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{".build/local/.built", ".build/lambda/.built"} {
		t.Run(target, func(t *testing.T) {
			dir := t.TempDir()
			for path, text := range map[string]string{
				"go.mod":              "module example.com/x\n",
				"go.sum":              "",
				"infra/go.mod":        "module example.com/x/infra\n",
				"functions/f/main.go": "package main\n\nfunc main() {}\n",
			} {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, path), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			started := filepath.Join(dir, "go-started")
			fakeGo := filepath.Join(dir, "fake-go")
			// The CDK app's build beside the functions' returns at once;
			// the functions' build waits to be interrupted.
			script := "#!/bin/sh\ncase \"$*\" in *./tributary/*) exit 0;; esac\ntouch " + started + "\nexec sleep 60\n"
			if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("make", "-f", filepath.Join(root, "Makefile"), "-C", dir, "GO="+fakeGo, target)
			cmd.Env = append(os.Environ(), "TRIBUTARY_ROOT="+dir, "TRIBUTARY_MAKE_STARTED=")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			deadline := time.After(30 * time.Second)
			for waiting := true; waiting; {
				if _, err := os.Stat(started); err == nil {
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("make %s ended (%v) before its go build started:\n%s", target, err, out.String())
				case <-deadline:
					t.Fatalf("make %s: its go build did not start within 30s:\n%s", target, out.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
			// Ctrl-C: the terminal sends SIGINT to the whole foreground group.
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err == nil {
					t.Fatalf("make %s succeeded after Ctrl-C:\n%s", target, out.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("make %s still runs 30s after Ctrl-C:\n%s", target, out.String())
			}
			scratch, _ := filepath.Glob(filepath.Join(dir, ".build", "*-*"))
			if len(scratch) > 0 {
				t.Errorf("Ctrl-C during make %s left %v in .build; make said:\n%s", target, scratch, out.String())
			}
		})
	}
}
