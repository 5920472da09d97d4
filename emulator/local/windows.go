package local

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/template"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// Windows reads a deployed pipeline's views, as its aggregate function's
// environment in the template describes them.
type Windows struct {
	Pipeline *pipeline.Config
	// Function is the runner's name of the pipeline's aggregate function
	// (Stack.FunctionName: "aggregate", or "aggregate-<pipeline>" when
	// several pipelines run), for Stats.Of.
	Function string
	Table    string
	Output   string // output stream, "" when none
	views    viewQuerier
	// recent reads the dashboard's latest windows of a key, open session
	// and sliding windows (in the key's keyed state) among them
	// (aggregate.Processor.WindowsLatest).
	recent recentReader
	cfg    aws.Config
	// lambdaName is the function's physical name, the FunctionName
	// dimension of its AWS/Lambda metrics.
	lambdaName string
}

// viewQuerier reads a pipeline's windows: all of a range's, for a check
// (state.Views.Query, an error past state.MaxQueryWindows), or part of it,
// for the dashboard (state.Views.QueryBounded).
type viewQuerier interface {
	Query(ctx context.Context, pipeline, key, kind string, from, to time.Time) ([]state.View, error)
	QueryBounded(ctx context.Context, pipeline, key, kind string, from, to time.Time, b state.Bound) ([]state.View, bool, error)
}

var _ viewQuerier = (*state.Views)(nil)

// recentReader reads the last limit of a key's windows of a kind that
// start in [from, to), open ones included, and whether there are earlier
// ones.
type recentReader interface {
	WindowsLatest(ctx context.Context, key, kind string, from, to time.Time, limit int) ([]state.View, bool, error)
}

var _ recentReader = (*aggregate.Processor)(nil)

// FindPipelines finds every deployed pipeline, sorted by name: each
// aggregate function (binary "aggregate" with a PIPELINE_CONFIG), its
// config and views table. A function whose Metadata "tributary:pipeline"
// differs from its config's name, or two functions running one pipeline,
// are errors.
func (s *Stack) FindPipelines() ([]*Windows, error) {
	specs, err := s.deployment.Functions()
	if err != nil {
		return nil, err
	}
	var out []*Windows
	seen := map[string]string{}
	for _, f := range specs {
		if f.Binary != "aggregate" {
			continue
		}
		name := s.names[f.LogicalID]
		pc, err := pipeline.FromEnv(func(k string) (string, bool) { v, ok := f.Env[k]; return v, ok })
		if err != nil {
			return nil, fmt.Errorf("%s's %w", name, err)
		}
		if f.Pipeline != "" && f.Pipeline != pc.Name {
			return nil, fmt.Errorf("%s: Metadata %s is %q, its %s names pipeline %q", f.LogicalID, template.PipelineMetadataKey, f.Pipeline, pipeline.EnvVar, pc.Name)
		}
		if other, ok := seen[pc.Name]; ok {
			return nil, fmt.Errorf("pipeline %q runs in two aggregate functions, %s and %s", pc.Name, other, name)
		}
		seen[pc.Name] = name
		table := f.Env[aggregate.EnvViewsTable]
		if table == "" {
			return nil, fmt.Errorf("%s has no %s in the template", name, aggregate.EnvViewsTable)
		}
		views := state.NewViews(dynamodb.NewFromConfig(s.cfg), table, pc.Aggregates)
		out = append(out, &Windows{Pipeline: pc, Function: name, Table: table, Output: f.Env[aggregate.EnvOutputStream], cfg: s.cfg, lambdaName: f.FunctionName,
			views: views, recent: aggregate.New(pc, views, nil, "")})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the template has no aggregate function")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pipeline.Name < out[j].Pipeline.Name })
	return out, nil
}

// FindPipeline is the deployed pipeline named name; an error lists the
// deployed ones.
func (s *Stack) FindPipeline(name string) (*Windows, error) {
	ws, err := s.FindPipelines()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		if w.Pipeline.Name == name {
			return w, nil
		}
		names[i] = w.Pipeline.Name
	}
	return nil, fmt.Errorf("no pipeline %q is deployed (the template runs %s)", name, strings.Join(names, ", "))
}

// Kind is the window kind shown and checked: the pipeline's first window.
func (w *Windows) Kind() string { return w.Pipeline.Windows[0].ID() }

// Read returns keys' windows of the first kind starting in [from, to).
func (w *Windows) Read(ctx context.Context, keys []string, from, to time.Time) ([]state.View, error) {
	var out []state.View
	for _, k := range keys {
		vs, err := w.views.Query(ctx, w.Pipeline.Name, k, w.Kind(), from, to)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// Counts turns views into per (key, window start) counts.
func Counted(vs []state.View) Counts {
	c := Counts{}
	for _, v := range vs {
		c[WindowKey{v.Key, v.Window.Start.UTC().Format(time.RFC3339)}] += int(v.Result.Count)
	}
	return c
}

// Wait polls until keys' windows hold want's total (or more) and cond holds, or ctx ends.
func (w *Windows) Wait(ctx context.Context, want Counts, from, to time.Time, cond func([]state.View) bool, progress io.Writer) ([]state.View, error) {
	keys := want.Keys()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	status := newStatusLine(progress)
	defer status.Done()
	for {
		vs, err := w.Read(ctx, keys, from, to)
		if err != nil {
			return nil, err
		}
		got := Counted(vs).Total()
		status.Set("    the windows hold %d of the %d events sent", got, want.Total())
		if got >= want.Total() && (cond == nil || cond(vs)) {
			return vs, nil
		}
		select {
		case <-ctx.Done():
			return vs, fmt.Errorf("waiting for windows in %s: %w", w.Table, ctx.Err())
		case <-tick.C:
		}
	}
}

// Keys returns the keys of c, sorted.
func (c Counts) Keys() []string {
	seen := map[string]bool{}
	for k := range c {
		seen[k.Key] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PrintWindows writes the windows next to what was sent and returns the
// number of windows whose count differs.
func PrintWindows(out io.Writer, kind string, want Counts, vs []state.View) int {
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Key != vs[j].Key {
			return vs[i].Key < vs[j].Key
		}
		return vs[i].Window.Start.Before(vs[j].Window.Start)
	})
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KEY\tWINDOW (%s, event time)\tSENT\tCOUNT\tMEAN ms\tMAX ms\tSTATE\tREVISION\t\n", kind)
	got := Counted(vs)
	bad := 0
	for _, v := range vs {
		k := WindowKey{v.Key, v.Window.Start.UTC().Format(time.RFC3339)}
		mark := ""
		if want[k] != got[k] {
			mark = "MISMATCH"
			bad++
		}
		st := "open"
		if v.Final {
			st = "final"
		}
		fmt.Fprintf(tw, "%s\t%s–%s\t%d\t%d\t%.0f\t%.0f\t%s\t%d\t%s\n", v.Key, v.Window.Start.Format("15:04"), v.Window.End.Format("15:04"),
			want[k], v.Result.Count, v.Result.Mean, v.Result.Max, st, v.Revision, mark)
	}
	for k, n := range want {
		if _, ok := got[k]; !ok {
			fmt.Fprintf(tw, "%s\t%s\t%d\t0\t\t\tmissing\t\tMISMATCH\n", k.Key, k.Window, n)
			bad++
		}
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t\t\t\t\t\n", want.Total(), got.Total())
	_ = tw.Flush()
	return bad
}

// ReadOutputs reads every record on the output stream (every shard, from the start).
func (w *Windows) ReadOutputs(ctx context.Context) ([]string, error) {
	if w.Output == "" {
		return nil, nil
	}
	client := kinesis.NewFromConfig(w.cfg)
	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(w.Output)})
	if err != nil {
		return nil, fmt.Errorf("listing shards of %s: %w", w.Output, err)
	}
	var out []string
	for _, sh := range shards.Shards {
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(w.Output), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, err
		}
		iter := it.ShardIterator
		for iter != nil {
			recs, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, err
			}
			for _, r := range recs.Records {
				out = append(out, strings.TrimSpace(string(r.Data)))
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	return out, nil
}
