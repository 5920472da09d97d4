package pipeline_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// TestPipelineFilesAreReadStrictly: a pipeline file that means one thing to
// one JSON reader and another to the next (a key twice: the functions and
// the stack would each pick a copy), or holds text that is not UTF-8, is a
// synth error naming the file and the field.
func TestPipelineFilesAreReadStrictly(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"a window size twice", `{"name": "a", "windows": [{"kind": "tumbling", "size": "1m", "size": "1h"}]}`, `a.json: windows[0].size: duplicate object key "size"`},
		{"the name twice", `{"name": "b", "name": "a", "windows": [{"kind": "tumbling", "size": "1m"}]}`, `a.json: name: duplicate object key "name"`},
		{"invalid UTF-8 in an event type", `{"name": "a", "eventTypes": ["ord` + "\xe9" + `r"], "windows": [{"kind": "tumbling", "size": "1m"}]}`, "a.json: eventTypes[0]: invalid UTF-8"},
		{"a lone surrogate in an event type", `{"name": "a", "eventTypes": ["x\ud800"], "windows": [{"kind": "tumbling", "size": "1m"}]}`, "a.json: eventTypes[0]: invalid UTF-8"},
		{"nested past the bound", `{"name": "a", "windows": [{"kind": "tumbling", "size": "1m"}], "outputs": ` + strings.Repeat(`{"x":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`, "a.json: outputs" + strings.Repeat(".x", 63) + ": nests arrays and objects deeper than 64"},
		{"a misspelt field keeps its hint", `{"name": "a", "windows": [{"kind": "tumbling", "size": "1m"}], "dedupHorizon": "1h"}`, `a.json: dedupHorizon: unknown field; did you mean "dedupeHorizon"?`},
		{"not JSON is still placed by line and column", "{\"name\": \"a\",\n \"windows\": [}", "a.json: not valid JSON at line 2, column 14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := pipeline.LoadDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}
