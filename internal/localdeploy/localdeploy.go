package localdeploy

import (
	"sort"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// Plan loads the template at path and plans it under stack as the local
// runner does, without touching an endpoint.
func Plan(path, stack string) (*template.Deployment, error) {
	t, err := template.Load(path)
	if err != nil {
		return nil, cli.Usagef("template", "%v (make synth-local writes it)", err)
	}
	d, err := template.Plan(t, template.ProvisionOptions{Stack: stack})
	if err != nil {
		return nil, cli.Usagef("stack", "%v", err)
	}
	return d, nil
}

// Pipeline is an aggregation pipeline the template runs: the aggregate
// function that runs it (the ticker reads the same configuration) and its
// file as parsed.
type Pipeline struct {
	Config   *pipeline.Config
	Function template.FunctionSpec
}

// Pipelines are the aggregation pipelines d runs, sorted by name. Those
// whose configuration parses come back with an error naming the first
// function whose configuration does not (path names the template in it).
func Pipelines(path string, d *template.Deployment) ([]Pipeline, error) {
	fns, err := d.Functions()
	if err != nil {
		return nil, cli.Usagef("template", "%s: %v", path, err)
	}
	var out []Pipeline
	var first error
	for _, f := range fns {
		if f.Binary != "aggregate" || f.Env[pipeline.EnvVar] == "" {
			continue
		}
		cfg, err := pipeline.Parse([]byte(f.Env[pipeline.EnvVar]))
		if err != nil {
			if first == nil {
				first = cli.Usagef("template", "%s: %s's %s: %v", path, f.LogicalID, pipeline.EnvVar, err)
			}
			continue
		}
		out = append(out, Pipeline{Config: cfg, Function: f})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Config.Name < out[j].Config.Name })
	return out, first
}
