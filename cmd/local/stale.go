package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// configVars are the function environment variables the stack sets to a
// pipeline file of the pipelines directory, compacted.
var configVars = []string{"PIPELINE_CONFIG", "JOIN_CONFIG", "CEP_CONFIG"}

// staleConfigs returns the files of the pipelines directory dir that the
// template at templatePath was not synthesized from: each file whose
// compacted JSON no function of the template carries (edited, or new,
// since the last synth), as paths relative to root where they are under it.
// Run under make, the template is always fresh (make synthesizes what
// changed first); run directly (go run ./cmd/local up), the functions run
// whatever the template holds, while the commands printed read the files.
// A directory that cannot be read, or a file that no longer parses, is
// returned as its error: the template cannot be from it either.
func staleConfigs(templatePath, dir, root string) ([]string, error) {
	tpl, err := template.Load(templatePath)
	if err != nil {
		return nil, err
	}
	files, err := pipeline.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	deployed := map[string]bool{}
	for _, r := range tpl.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		env, _ := r.Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for _, name := range configVars {
			if v, ok := vars[name].(string); ok {
				deployed[v] = true
			}
		}
	}
	if len(deployed) == 0 {
		// No function carries a pipeline file: not a template of this
		// directory's pipelines (a test's, an app of its own).
		return nil, nil
	}
	var stale []string
	for _, f := range files {
		if !deployed[string(f.JSON)] {
			path := f.Path
			if rel, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(rel) {
				path = rel
			}
			stale = append(stale, path)
		}
	}
	sort.Strings(stale)
	return stale, nil
}

// warnStaleTemplate says so, on w, when the template o runs was not
// synthesized from the pipeline files there are now: a pipeline edited
// after the last synth (outOfOrderness 5s → 40s) would otherwise run its
// old config without a word, while the replay and results commands read the
// edited file.
func warnStaleTemplate(o *options, w io.Writer) {
	stale, err := staleConfigs(o.template, filepath.Join(o.root, "pipelines"), o.root)
	tplPath := o.template
	if rel, err := filepath.Rel(o.root, tplPath); err == nil && filepath.IsLocal(rel) {
		tplPath = rel
	}
	switch {
	case err != nil:
		fmt.Fprintf(w, "! %s may not be from the pipeline files there are now (%v): the functions run what it holds; make synth-local synthesizes it again (make local-up does, first)\n", tplPath, err)
	case len(stale) > 0:
		fmt.Fprintf(w, "! %s is older than %s: it was synthesized before %s changed, and the functions run the config it holds, not the file's. Run make synth-local first (make local-up and make local synthesize what changed, then start)\n",
			tplPath, joinNames(stale), them(len(stale)))
	}
}

func joinNames(names []string) string {
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
			if i == len(names)-1 {
				out += "and "
			}
		}
		out += n
	}
	return out
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "they"
}
