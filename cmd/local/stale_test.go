package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// A template synthesized before a pipeline file changed is named with the
// file and make synth-local: go run ./cmd/local up skips the synth, and a
// user who edited pipelines/pageviews.json (outOfOrderness 5s → 40s) ran
// the functions on the old config without a word, while the commands it
// printed read the edited file.
func TestStaleTemplateIsNamedWithTheFileThatChanged(t *testing.T) {
	repo, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(repo, "pipelines", "pageviews.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "pipelines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "pageviews.json"), orig)
	// The template as the stack synthesizes it: the file, compacted, in the
	// aggregate's and the ticker's PIPELINE_CONFIG.
	var compact bytes.Buffer
	if err := json.Compact(&compact, orig); err != nil {
		t.Fatal(err)
	}
	fn := map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{
		"Environment": map[string]any{"Variables": map[string]any{"PIPELINE_CONFIG": compact.String()}}}}
	tpl, err := json.Marshal(map[string]any{"Resources": map[string]any{"PageviewsAggregate": fn, "PageviewsTicker": fn}})
	if err != nil {
		t.Fatal(err)
	}
	tplPath := filepath.Join(root, "infra", "cdk.out", "Tributary.template.json")
	if err := os.MkdirAll(filepath.Dir(tplPath), 0o755); err != nil {
		t.Fatal(err)
	}
	write(tplPath, tpl)
	o := &options{root: root, template: tplPath}

	var out bytes.Buffer
	warnStaleTemplate(o, &out)
	if out.Len() != 0 {
		t.Errorf("a template synthesized from the files as they are: %q, want no warning", out.String())
	}

	edited := strings.Replace(string(orig), `"outOfOrderness": "5s"`, `"outOfOrderness": "40s"`, 1)
	if edited == string(orig) {
		t.Fatalf("pipelines/pageviews.json has no \"outOfOrderness\": \"5s\" to edit:\n%s", orig)
	}
	write(filepath.Join(dir, "pageviews.json"), []byte(edited))
	out.Reset()
	warnStaleTemplate(o, &out)
	for _, want := range []string{"infra/cdk.out/Tributary.template.json", "pipelines/pageviews.json", "make synth-local"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("after pipelines/pageviews.json changed: %q, want it to name %s", out.String(), want)
		}
	}
}
