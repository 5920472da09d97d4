package localtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// Up builds what the stack needs (make deps-local functions-local
// synth-local, under a lock: test packages run at once, and two cdk synths
// into one cdk.out fail), deploys it onto a stand-in of t's own and returns
// the running stack, the repository root and the stand-in's client
// configuration. The stack stops when t ends.
func Up(t *testing.T) (*local.Stack, string, aws.Config) {
	t.Helper()
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, ".build"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := exec.Command("flock", filepath.Join(root, ".build", "make.lock"), "make", "-s", "-C", root, "deps-local", "functions-local", "synth-local")
	mk.Stdout, mk.Stderr = io.Discard, os.Stderr
	if err := mk.Run(); err != nil {
		t.Fatalf("make deps-local functions-local synth-local: %v", err)
	}
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template:  filepath.Join(root, "infra", "cdk.out", "Tributary.template.json"),
		Functions: filepath.Join(root, ".build", "local"),
		Endpoint:  srv.Endpoint(),
		Progress:  &progress,
	})
	if err != nil {
		t.Fatalf("local.Up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return stack, root, standintest.Config(t, srv)
}
