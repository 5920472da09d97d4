package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// The pipeline listing says which pipelines log no result line
// (outputs.log false), the one thing about them make local cannot show in
// its checks; the others' lines are as the README quotes them.
func TestPipelineListingSaysWhichLogNoResults(t *testing.T) {
	var ps []*local.Windows
	for _, doc := range []string{
		`{"name": "loud", "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name": "quiet", "windows": [{"kind": "tumbling", "size": "1m"}], "outputs": {"table": true, "log": false}}`,
	} {
		cfg, err := pipeline.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, &local.Windows{Pipeline: cfg, Function: "aggregate-" + cfg.Name})
	}
	var out bytes.Buffer
	printPipelines(&out, ps, map[string]string{"loud": "checked", "quiet": "checked"})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("listing:\n%s", out.String())
	}
	if strings.Contains(lines[1], "not logged") || !strings.Contains(lines[1], "late policy drop — checked") {
		t.Errorf("loud's line: %q", lines[1])
	}
	if !strings.Contains(lines[2], "late policy drop, results not logged (outputs.log false) — checked") {
		t.Errorf("quiet's line: %q", lines[2])
	}
}
