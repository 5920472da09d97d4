package tributary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// readRepoPipeline is the repository's pipelines/<name>.json.
func readRepoPipeline(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoPipelinesDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writePipelineDir writes docs (name -> JSON) as <name>.json into a new
// directory and returns it.
func writePipelineDir(t testing.TB, docs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, doc := range docs {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testPipelineFiles loads docs as a pipelines directory would hold them.
func testPipelineFiles(t testing.TB, docs map[string]string) []pipeline.File {
	t.Helper()
	files, err := pipeline.LoadDir(writePipelineDir(t, docs))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// streamMappingsOf counts the Kinesis and DynamoDB Streams mappings
// invoking the function fnID.
func (t cfnTemplate) streamMappingsOf(fnID string) int {
	n := 0
	for _, r := range t.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(r.Properties["FunctionName"], ref(fnID)) && r.Properties["StartingPosition"] != nil {
			n++
		}
	}
	return n
}

const ordersDoc = `{
  "name": "orders",
  "eventTypes": ["order_placed"],
  "key": "data.region",
  "value": "data.total",
  "windows": [{"kind": "tumbling", "size": "5m"}],
  "aggregates": ["count", "sum"],
  "outputs": {"table": true}
}`

// TestPipelinesFromFiles: the stack deploys what the pipelines directory
// declares, without code changes: per file an aggregate with its own
// mapping on the events stream and a ticker with its own schedule and
// failure queue, each with PIPELINE_CONFIG equal to its file, compacted,
// and the pipeline's name in its metadata; one views table for all; a
// third file adds a third pipeline. The pipelines share nothing that
// fails: functions, mappings, schedules and ticker failure queues are
// distinct. With more than one pipeline the aggregates read through
// enhanced fan-out consumers of their own; the stack passes cdk-nag.
func TestPipelinesFromFiles(t *testing.T) {
	// Two files are the repository's own (the shared fixture's stack,
	// checked by the other tests); one and three are variants, the one
	// pipeline's given a flush interval too (onePipelineVariant).
	tests := []struct {
		name    string
		variant *lazyVariant
		efo     bool
		names   []string
	}{
		{"one", onePipelineVariant, false, []string{"pageviews"}},
		{"a third file", threePipelinesVariant, true, []string{"checkouts", "orders", "pageviews"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.variant.get(t)
			s, tmpl := v.stack, v.tmpl
			if got, want := len(v.docs), len(tt.names); got != want {
				t.Fatalf("the variant's directory has %d files, want %d", got, want)
			}

			var got []string
			for _, x := range s.Pipelines.Pipelines {
				got = append(got, x.Name)
			}
			if !reflect.DeepEqual(got, tt.names) {
				t.Fatalf("pipelines %v, want %v", got, tt.names)
			}
			seen := map[string]string{} // logical id or destination -> pipeline
			distinct := func(what, key, pipe string) {
				if other, ok := seen[key]; ok {
					t.Errorf("pipelines %s and %s share %s %s", other, pipe, what, key)
				}
				seen[key] = pipe
			}
			for _, name := range tt.names {
				var want bytes.Buffer
				if err := json.Compact(&want, []byte(v.docs[name])); err != nil {
					t.Fatal(err)
				}
				aggID, agg := tmpl.pipelineFunction(t, FunctionAggregate, name)
				tickID, tick := tmpl.pipelineFunction(t, FunctionTicker, name)
				for _, fn := range []struct {
					id string
					r  cfnResource
				}{{aggID, agg}, {tickID, tick}} {
					vars := fn.r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
					if vars[EnvPipelineConfig] != want.String() {
						t.Errorf("%s: %s = %v, want the file %s", fn.id, EnvPipelineConfig, vars[EnvPipelineConfig], want.String())
					}
					if !reflect.DeepEqual(vars[EnvViewsTableName], ref(logicalID(s.Stack, s.Pipelines.Views))) {
						t.Errorf("%s: %s = %v, want the shared views table", fn.id, EnvViewsTableName, vars[EnvViewsTableName])
					}
					_, streams := vars[EnvOutputStreamName]
					if cfg := s.Pipelines.Pipeline(name).Config; streams != cfg.Outputs.Stream {
						t.Errorf("%s: %s set %v, want %v (outputs.stream)", fn.id, EnvOutputStreamName, streams, cfg.Outputs.Stream)
					}
					distinct("function", fn.id, name)
				}
				// The ticker reads the events stream after the aggregate's
				// last record before it takes a shard for idle; the
				// aggregate asks it for a new shard's parents, whose
				// carries it takes over (ListShards, which its mapping
				// grants).
				events := logicalID(s.Stack, s.Events)
				for _, fn := range []struct {
					id string
					r  cfnResource
				}{{aggID, agg}, {tickID, tick}} {
					vars := fn.r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
					if got := vars[EnvEventsStreamName]; !reflect.DeepEqual(got, ref(events)) {
						t.Errorf("%s: %s = %v, want the events stream", fn.id, EnvEventsStreamName, got)
					}
				}
				if g := "kinesis:ListShards " + events + ".Arn"; !tmpl.grants(logicalID(s.Stack, s.Pipelines.Pipeline(name).Aggregate.Role))[g] {
					t.Errorf("aggregate role lacks %s", g)
				}
				grants := tmpl.grants(logicalID(s.Stack, s.Pipelines.Pipeline(name).Ticker.Role))
				for _, g := range []string{"kinesis:GetShardIterator " + events + ".Arn", "kinesis:GetRecords " + events + ".Arn"} {
					if !grants[g] {
						t.Errorf("ticker role lacks %s; it has %v", g, grants)
					}
				}
				m := tmpl.mappingOf(t, aggID)
				distinct("mapping source", resourceName(m.Properties["EventSourceArn"]), name)
				distinct("mapping", resourceName(m.Properties["FunctionName"])+"/mapping", name)
				x := s.Pipelines.Pipeline(name)
				distinct("schedule", logicalID(s.Stack, x.TickerRule), name)
				distinct("ticker failure queue", logicalID(s.Stack, x.TickerFailures), name)
				// The mapping reports to the shared Failures queue, whose
				// messages name the function they came from.
				if dest := m.Properties["DestinationConfig"].(map[string]any)["OnFailure"].(map[string]any)["Destination"]; !reflect.DeepEqual(dest, getAtt(logicalID(s.Stack, s.Quarantine.Failures), "Arn")) {
					t.Errorf("%s's mapping reports to %v, want Failures", name, dest)
				}
				if _, ok := tmpl.Outputs[exportedName(name)+"TickerFailuresQueueUrl"]; !ok {
					t.Errorf("no output %sTickerFailuresQueueUrl", exportedName(name))
				}
				if _, ok := tmpl.Outputs[exportedName(name)+"DashboardUrl"]; !ok {
					t.Errorf("no output %sDashboardUrl", exportedName(name))
				}
			}
			if n := len(tmpl.ofType("AWS::Events::Rule")); n < len(tt.names) {
				t.Errorf("%d rules, want at least one schedule per pipeline", n)
			}
			consumers := 0
			for _, c := range tmpl.ofType("AWS::Kinesis::StreamConsumer") {
				if strings.Contains(resourceName(c.Properties["ConsumerName"]), "Pipelines") {
					consumers++
				}
			}
			if want := map[bool]int{true: len(tt.names), false: 0}[tt.efo]; consumers != want || s.Pipelines.EnhancedFanOut != tt.efo {
				t.Errorf("%d pipeline stream consumers (EnhancedFanOut %v), want %d", consumers, s.Pipelines.EnhancedFanOut, want)
			}
			if n := len(tmpl.ofType("AWS::CloudWatch::Dashboard")); n != len(tt.names) {
				t.Errorf("%d dashboards, want %d", n, len(tt.names))
			}
			// Per-pipeline alarms: each aggregate's errors, iterator age,
			// set aside and late share.
			alarms := map[string]bool{}
			for id := range tmpl.ofType("AWS::CloudWatch::Alarm") {
				alarms[id] = true
			}
			for _, name := range tt.names {
				for _, kind := range []string{"Errors", "IteratorAge", "SetAside", "LateDropped"} {
					prefix := "Aggregate" + exportedName(name) + kind + "Alarm"
					if !hasPrefix(alarms, prefix) {
						t.Errorf("no alarm %s*", prefix)
					}
				}
				if !hasPrefix(alarms, "Ticker"+exportedName(name)+"ErrorsAlarm") {
					t.Errorf("no alarm Ticker%sErrorsAlarm*", exportedName(name))
				}
			}
			for _, e := range append(v.nagError, v.nagWarn...) {
				t.Errorf("cdk-nag: %s", e)
			}
		})
	}
}

func hasPrefix(set map[string]bool, prefix string) bool {
	for k := range set {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// TestPipelinesRefuse: a pipelines directory the functions could not run
// fails synth with the file and the field.
func TestPipelinesRefuse(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	tests := []struct {
		name string
		docs map[string]string
		want []string
	}{
		{"bad field", map[string]string{"pageviews": readRepoPipeline(t, "pageviews"), "checkouts": `{"name": "checkouts", "windows": [{"kind": "tumbling", "size": "1x"}]}`},
			[]string{"checkouts.json: windows[0].size: "}},
		{"name is not the file's", map[string]string{"orders": `{"name": "checkout", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			[]string{"orders.json: name: "}},
		{"unknown field", map[string]string{"orders": `{"name": "orders", "windows": [{"kind": "tumbling", "size": "1m"}], "watermark": "5s"}`},
			[]string{"orders.json: watermark: unknown field"}},
		{"names that make one construct", map[string]string{"page-views": `{"name": "page-views", "windows": [{"kind": "tumbling", "size": "1m"}]}`,
			"pageviews": `{"name": "pageviews", "windows": [{"kind": "tumbling", "size": "1m"}]}`},
			[]string{"pageviews.json: name: ", "page-views.json"}},
		{"empty", map[string]string{}, []string{"no pipeline files"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := newTestApp(t.TempDir(), map[string]any{ContextPipelinesDir: writePipelineDir(t, tt.docs), ContextAssetDir: assets})
			_, err := NewTributaryStack(app, StackID, nil)
			if err == nil {
				t.Fatalf("NewTributaryStack = nil error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// NewPipelines without its required props.
	app := newTestApp(t.TempDir(), nil)
	files := testPipelineFiles(t, map[string]string{"orders": ordersDoc})
	for i, props := range []func(awscdk.Stack) PipelinesProps{
		func(awscdk.Stack) PipelinesProps { return PipelinesProps{AssetDir: assets, Files: files} },
		func(s awscdk.Stack) PipelinesProps {
			return PipelinesProps{AssetDir: assets, Files: files, Events: testEventsStream(s)}
		},
		func(s awscdk.Stack) PipelinesProps {
			return PipelinesProps{AssetDir: assets, Files: files, Events: testEventsStream(s),
				OnFailure: NewQueueWithDLQ(s, "F", QueueWithDLQProps{ConsumerTimeout: time.Minute}), FanOut: "sometimes"}
		},
	} {
		stack := awscdk.NewStack(app, jsii.String(fmt.Sprintf("S%d", i)), nil)
		if _, err := NewPipelines(stack, "P", props(stack)); err == nil {
			t.Errorf("NewPipelines #%d = nil error", i)
		}
	}
}

// TestPipelineFunctionsSorted: stackFunctions orders a pipeline's functions
// by name and pipeline, so alarms and widgets come in a stable order.
func TestPipelineFunctionsSorted(t *testing.T) {
	var labels []string
	for _, fn := range stackFunctions(fx.stack.Stack) {
		if fn.pipeline != "" {
			labels = append(labels, fn.label())
		}
	}
	want := []string{"aggregate[checkouts]", "aggregate[pageviews]", "detect[detect]", "join[search-click]", "rules[detect]", "ticker[checkouts]", "ticker[pageviews]"}
	if !sort.StringsAreSorted(labels) || !reflect.DeepEqual(labels, want) {
		t.Errorf("pipeline functions %v, want %v", labels, want)
	}
}
