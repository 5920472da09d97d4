package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// Every function has a cheap first invocation: a new function without one
// fails the benchmark instead of being left out of it.
func TestEveryFunctionHasAPayload(t *testing.T) {
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := payloads[e.Name()]; e.IsDir() && !ok {
			t.Errorf("functions/%s has no entry in payloads", e.Name())
		}
	}
}
