package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/emulator/template"
)

// localNames are what -template finds: the aggregate function's
// environment as the local runner deploys the template (names
// <stack>-<logical id>), so make results needs no names.
type localNames struct {
	pipeline, parameter, table, stream string
}

// readLocalNames plans the template's names under stack, as the local
// runner does, and reads them from the one function that runs a pipeline.
func readLocalNames(path, stack string) (localNames, error) {
	t, err := template.Load(path)
	if err != nil {
		return localNames{}, cli.Usagef("template", "%v (make synth writes it)", err)
	}
	d, err := template.Plan(t, template.ProvisionOptions{Stack: stack})
	if err != nil {
		return localNames{}, cli.Usagef("stack", "%v", err)
	}
	fns, err := d.Functions()
	if err != nil {
		return localNames{}, cli.Usagef("template", "%s: %v", path, err)
	}
	var found []template.FunctionSpec
	for _, f := range fns {
		// The aggregate function runs the pipeline (the ticker reads the
		// same configuration).
		if f.Env[pipeline.EnvVar] != "" && f.Binary == "aggregate" {
			found = append(found, f)
		}
	}
	switch len(found) {
	case 0:
		return localNames{}, cli.Usagef("template", "%s has no aggregate function with %s", path, pipeline.EnvVar)
	case 1:
	default:
		var ids []string
		for _, f := range found {
			ids = append(ids, f.LogicalID)
		}
		sort.Strings(ids)
		return localNames{}, cli.Usagef("template", "%s runs %d pipelines (%s): give -pipeline, -parameter and -stream", path, len(found), strings.Join(ids, ", "))
	}
	env := found[0].Env
	n := localNames{pipeline: env[pipeline.EnvVar], parameter: env[aggregate.EnvViewsParameter],
		table: env[aggregate.EnvViewsTable], stream: env[aggregate.EnvOutputStream]}
	if n.parameter == "" && n.table == "" {
		return localNames{}, fmt.Errorf("-template %s: the aggregate function names no views table", path)
	}
	return n, nil
}
