package cli_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/cli"
)

// TestReadFileIsBounded: a file past the bound is refused, naming the flag,
// without reading it into memory (a -file /dev/zero, a log given by
// mistake); one within it is read whole.
func TestReadFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = cli.ReadFile("file", big, 8192, "a rule is a small JSON object")
	runtime.ReadMemStats(&after)
	var ue *cli.UsageError
	if !errors.As(err, &ue) || ue.Flag != "file" || !strings.Contains(err.Error(), "more than 8192 bytes: a rule is a small JSON object") {
		t.Errorf("ReadFile of 64 MiB = %v; want a usage error of -file saying the bound", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing a 64 MiB file allocated %d bytes: it was read past the bound", n)
	}
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"id":"r1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := cli.ReadFile("file", small, 8192, ""); err != nil || string(b) != `{"id":"r1"}` {
		t.Errorf("ReadFile of a small file = %q, %v", b, err)
	}
	if _, err := cli.ReadFile("file", filepath.Join(dir, "missing.json"), 8192, ""); !errors.As(err, &ue) {
		t.Errorf("a missing file: %v, want a usage error", err)
	}
}
