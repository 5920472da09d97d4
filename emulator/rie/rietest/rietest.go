package rietest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
)

// Build compiles the main package pkg ("." for the test's own) with
// -tags lambda.norpc into a temporary bootstrap, installs aws-lambda-rie,
// and returns the bootstrap's path.
func Build(t *testing.T, pkg string) string {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bootstrap, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	if _, err := rie.Install(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return bootstrap
}

// Function is a bootstrap running under aws-lambda-rie, its output kept.
type Function struct {
	*rie.Function
	mu   sync.Mutex
	logs strings.Builder
}

// Start runs bootstrap as the function name with env; it stops when the
// test ends.
func Start(t *testing.T, name, bootstrap string, env map[string]string) *Function {
	t.Helper()
	f := &Function{}
	fn, err := rie.Start(context.Background(), rie.Config{Name: name, Bootstrap: bootstrap, Env: env, Timeout: 10 * time.Second,
		Logs: func(_, line string) { f.mu.Lock(); f.logs.WriteString(line + "\n"); f.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	f.Function = fn
	t.Cleanup(func() { _ = fn.Stop() })
	return f
}

// Logs is everything the function has written so far.
func (f *Function) Logs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}

// MustInvoke invokes the function with payload and returns its response;
// a handler error fails the test with the error document and the logs.
func (f *Function) MustInvoke(t *testing.T, payload []byte) []byte {
	t.Helper()
	res, err := f.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if res.FunctionError != "" {
		t.Fatalf("function error %s\n%s", res.Payload, f.Logs())
	}
	return res.Payload
}
