package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// localNames are what -template finds: the aggregate function's
// environment as the local runner deploys the template (names
// <stack>-<logical id>), so make results needs no names.
type localNames struct {
	pipeline, parameter, table, stream string
}

// readLocalNames plans the template's names under stack, as the local
// runner does, and reads them from the aggregate function of the pipeline
// named name — or, with name "", of the only pipeline the template runs;
// several are a usage error listing them.
func readLocalNames(path, stack, name string) (localNames, error) {
	d, err := localdeploy.Plan(path, stack)
	if err != nil {
		return localNames{}, err
	}
	pipelines, err := localdeploy.Pipelines(path, d)
	if err != nil {
		return localNames{}, err
	}
	byName := map[string]template.FunctionSpec{}
	names := make([]string, 0, len(pipelines))
	for _, p := range pipelines {
		byName[p.Config.Name] = p.Function
		names = append(names, p.Config.Name)
	}
	var found template.FunctionSpec
	switch {
	case len(byName) == 0:
		return localNames{}, cli.Usagef("template", "%s has no aggregate function with %s", path, pipeline.EnvVar)
	case name != "":
		f, ok := byName[name]
		if !ok {
			return localNames{}, cli.Usagef("pipeline", "%s is not deployed by %s; its pipelines: %s", strictjson.QuoteCut(name, cli.MaxEcho), path, strings.Join(names, ", "))
		}
		found = f
	case len(byName) == 1:
		found = byName[names[0]]
	default:
		return localNames{}, cli.Usagef("pipeline", "not given, and %s runs %d pipelines: give one of %s (make results PIPELINE=%s KEY=...)", path, len(names), strings.Join(names, ", "), names[0])
	}
	env := found.Env
	n := localNames{pipeline: env[pipeline.EnvVar], parameter: env[aggregate.EnvViewsParameter],
		table: env[aggregate.EnvViewsTable], stream: env[aggregate.EnvOutputStream]}
	if n.parameter == "" && n.table == "" {
		return localNames{}, fmt.Errorf("-template %s: the aggregate function names no views table", path)
	}
	return n, nil
}

// isPipelineFile reports whether -pipeline's value is a file (a path
// ending in .json or holding a separator) rather than a pipeline's name.
func isPipelineFile(v string) bool {
	return strings.HasSuffix(v, ".json") || strings.ContainsRune(v, '/') || strings.ContainsRune(v, filepath.Separator)
}

// pipelineNamed is the windowed aggregation named name in dir
// (pipelines/<name>.json), or, with name "", the only one there; an error
// lists those there. Join and CEP files are not results' to read.
func pipelineNamed(dir, name string) (*pipeline.Config, error) {
	files, err := pipeline.LoadDir(dir)
	if err != nil {
		return nil, cli.Usagef("pipeline", "%v (give -pipeline <file.json>, or run from the repository root)", err)
	}
	files = pipeline.OfKind(files, pipeline.KindAggregate)
	names := make([]string, len(files))
	for i, f := range files {
		if f.Config.Name == name || (name == "" && len(files) == 1) {
			return f.Config, nil
		}
		names[i] = f.Config.Name
	}
	if name == "" {
		return nil, cli.Usagef("pipeline", "not given, and %s holds %d pipelines: give one of %s", dir, len(files), strings.Join(names, ", "))
	}
	return nil, cli.Usagef("pipeline", "%s is not in %s; its pipelines: %s", strictjson.QuoteCut(name, cli.MaxEcho), dir, strings.Join(names, ", "))
}

// changedSinceDeploy is the file of dir whose pipeline is named name when
// its contents are not deployed, the configuration the template gives the
// functions (both compacted): it was edited after the template was
// synthesized. A directory that does not load (a file edited into one
// that no longer parses) is that error; one that does not exist is no
// change (results does not need it).
func changedSinceDeploy(dir, name, deployed string) (string, error) {
	files, err := pipeline.LoadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if f.Name == name && string(f.JSON) != deployed {
			return f.Path, nil
		}
	}
	return "", nil
}

// maxListPages bounds each listing stackNotRunning reads (100 names or
// fewer a page).
const maxListPages = 20

// stackNotRunning is, with -template, a usage error naming -stack when the
// endpoint runs the template under no stack of that name (make results
// STACK=nope printed SSM's ParameterNotFound), listing the stacks it does
// run: those whose views parameters, views tables or results streams are
// there. nil otherwise, or when they cannot be listed (the caller's error
// stands). Read after a failure only.
func stackNotRunning(ctx context.Context, cfg aws.Config, f *flags) error {
	if f.template == "" {
		return nil
	}
	var found []string
	params := ssm.NewDescribeParametersPaginator(ssm.NewFromConfig(cfg), &ssm.DescribeParametersInput{})
	for i := 0; params.HasMorePages() && i < maxListPages; i++ {
		out, err := params.NextPage(ctx)
		if err != nil {
			return nil
		}
		for _, p := range out.Parameters {
			found = append(found, aws.ToString(p.Name))
		}
	}
	tables := dynamodb.NewListTablesPaginator(dynamodb.NewFromConfig(cfg), &dynamodb.ListTablesInput{})
	for i := 0; tables.HasMorePages() && i < maxListPages; i++ {
		out, err := tables.NextPage(ctx)
		if err != nil {
			return nil
		}
		found = append(found, out.TableNames...)
	}
	streams, err := localdeploy.StreamsOn(ctx, kinesis.NewFromConfig(cfg))
	if err != nil {
		return nil
	}
	found = append(found, streams...)
	running := localdeploy.StacksAmong(f.template, found, func(d *template.Deployment) ([]string, error) {
		pipelines, _ := localdeploy.Pipelines(f.template, d)
		var names []string
		for _, p := range pipelines {
			env := p.Function.Env
			names = append(names, env[aggregate.EnvViewsParameter], env[aggregate.EnvViewsTable], env[aggregate.EnvOutputStream])
		}
		return names, nil
	})
	return localdeploy.CheckStack(f.stack, running)
}
