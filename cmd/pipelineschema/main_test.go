package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: -o writes the schema there (- to stdout); a path given without
// -o, or an unknown flag, is a usage error (exit 2) that writes nothing, not
// a write to the default pipelines/pipeline.schema.json.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("pipelines", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderr     string
		wantOutput string // a file that must hold the schema afterwards
	}{
		{name: "-o a path", args: []string{"-o", "mine.json"}, wantOutput: "mine.json"},
		{name: "-o -", args: []string{"-o", "-"}, stdout: `"$schema"`},
		{name: "a path without -o", args: []string{"other.json"}, code: 2, stderr: `pipelineschema: unexpected argument "other.json" (every value is given with a flag); see go run ./cmd/pipelineschema -h`},
		{name: "an unknown flag", args: []string{"-out", "x.json"}, code: 2, stderr: "flag provided but not defined: -out"},
		{name: "-h", args: []string{"-h"}, stdout: "usage: pipelineschema"},
		{name: "no such directory", args: []string{"-o", "nope/x.json"}, code: 1, stderr: "pipelineschema: open nope/x.json"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%s: exit %d, stdout %.200q, stderr %q; want exit %d, stdout with %q, stderr with %q", c.name, code, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
		}
		if c.wantOutput != "" {
			if b, err := os.ReadFile(c.wantOutput); err != nil || !bytes.Contains(b, []byte(`"$schema"`)) {
				t.Errorf("%s: %s holds %.100q, %v; want the schema", c.name, c.wantOutput, b, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join("pipelines", "pipeline.schema.json")); !os.IsNotExist(err) {
		t.Errorf("the default path was written (%v); no case asked for it", err)
	}
}
