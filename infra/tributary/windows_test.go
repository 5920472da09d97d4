package tributary

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestTickerSchedule: an EventBridge rule invokes the ticker every minute
// (the local runner plays it from this rule), Lambda lets only that rule
// invoke it, and a failed tick is retried and then described on
// TickerFailures (TestTickerFailureDestination), as is a schedule event
// EventBridge could not deliver.
func TestTickerSchedule(t *testing.T) {
	s := fx.stack
	tickerID, _ := fx.tmpl.function(t, FunctionTicker)
	ruleID := logicalID(s.Stack, pageviews(s).TickerRule)

	rules := fx.tmpl.ofType("AWS::Events::Rule")
	if want := len(s.Pipelines.Pipelines) + 3; len(rules) != want {
		t.Fatalf("template has %d rules, want %d (each pipeline's ticker's, and the join's, detect's and statuscodes' ticks: TestStreamJoin, TestDetection, TestStreamHandler)", len(rules), want)
	}
	assertProps(t, ruleID, fx.tmpl.Resources[ruleID].Properties, map[string]any{
		"ScheduleExpression": "rate(1 minute)",
		"State":              "ENABLED",
		"EventPattern":       nil,
		"Targets": []any{map[string]any{
			"Id":  "Target0",
			"Arn": getAtt(tickerID, "Arn"),
			"RetryPolicy": map[string]any{
				"MaximumEventAgeInSeconds": 60.0,
				"MaximumRetryAttempts":     2.0,
			},
			"DeadLetterConfig": map[string]any{"Arn": getAtt(logicalID(s.Stack, pageviews(s).TickerFailures), "Arn")},
		}},
	})

	var invokers []string
	for id, p := range fx.tmpl.ofType("AWS::Lambda::Permission") {
		if reflect.DeepEqual(p.Properties["FunctionName"], getAtt(tickerID, "Arn")) {
			invokers = append(invokers, id)
			assertProps(t, id, p.Properties, map[string]any{
				"Action":    "lambda:InvokeFunction",
				"Principal": "events.amazonaws.com",
				"SourceArn": getAtt(ruleID, "Arn"),
			})
		}
	}
	if len(invokers) != 1 {
		t.Errorf("ticker has %d invoke permissions %v, want 1 for the schedule", len(invokers), invokers)
	}

	var configs int
	for id, c := range fx.tmpl.ofType("AWS::Lambda::EventInvokeConfig") {
		if reflect.DeepEqual(c.Properties["FunctionName"], ref(tickerID)) {
			configs++
			assertProps(t, id, c.Properties, map[string]any{
				"MaximumRetryAttempts":     float64(tickerRetryAttempts),
				"MaximumEventAgeInSeconds": tickerMaxEventAge.Seconds(),
			})
		}
	}
	if configs != 1 {
		t.Errorf("ticker has %d async invoke configs, want 1", configs)
	}

	for _, m := range fx.tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(m.Properties["FunctionName"], ref(tickerID)) {
			t.Errorf("ticker has an event source mapping %v; it runs on the schedule only", m.Properties)
		}
	}
}

// TestPipelineConfigIsTheFile: the functions get pipeline.json, and the
// stack's fields follow it.
func TestPipelineConfigIsTheFile(t *testing.T) {
	_, fn := fx.tmpl.function(t, FunctionAggregate)
	vars := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	var got map[string]any
	if err := json.Unmarshal([]byte(vars[EnvPipelineConfig].(string)), &got); err != nil {
		t.Fatalf("%s is not JSON: %v", EnvPipelineConfig, err)
	}
	for k, want := range map[string]any{
		"name":                      "pageviews",
		"eventTypes":                []any{"page_view"},
		"value":                     "data.ms",
		"aggregates":                []any{"count", "sum", "min", "max", "mean", "quantiles"},
		"quantiles":                 []any{0.5, 0.99},
		"latePolicy":                "correct",
		"allowedLateness":           "10m",
		"outputs":                   map[string]any{"table": true, "stream": true},
		"partitionKeyIsGroupingKey": true,
	} {
		if !reflect.DeepEqual(got[k], want) {
			t.Errorf("%s.%s = %v, want %v", EnvPipelineConfig, k, got[k], want)
		}
	}
	if pageviews(fx.stack).Config.Name != "pageviews" {
		t.Errorf("stack pipeline = %+v, want pageviews", pageviews(fx.stack).Config)
	}
}

// The aggregates write once every two minutes unless told otherwise, and
// context 0 or FlushPerBatch in props writes once per batch (no tumbling
// window on the mapping). NewPipelines decides it: each case is the
// pipelines alone in a bare stack of an app with that context (none at all
// for the code's default); the shared fixture's stack (cdk.json's 120) and
// a whole stack given FlushPerBatch in props over 300 in context show
// that the Tributary stack hands both to it (and
// TestFlushIntervalAndPipelineShapeTheTopology a context string).
func TestFlushIntervalDefaultsToTwoMinutes(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	files := testPipelineFiles(t, map[string]string{"pageviews": readRepoPipeline(t, "pageviews")})
	for _, tt := range []struct {
		name    string
		context map[string]any
		props   time.Duration
		want    any
	}{
		{"default: no context", map[string]any{}, 0, 120.0},
		{"context 0: per batch", map[string]any{ContextFlushInterval: 0.0}, 0, nil},
		{"context 300", map[string]any{ContextFlushInterval: 300.0}, 0, 300.0},
		{"props FlushPerBatch over context 300", map[string]any{ContextFlushInterval: 300.0}, FlushPerBatch, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Context: &tt.context, Outdir: jsii.String(t.TempDir())})
			stack := awscdk.NewStack(app, jsii.String("Flush"), nil)
			pipes, err := NewPipelines(stack, "Pipelines", PipelinesProps{AssetDir: assets, Files: files, Events: testEventsStream(stack),
				OnFailure: NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: time.Minute}), FlushInterval: tt.props})
			if err != nil {
				t.Fatal(err)
			}
			tmpl := templateOf(stack)
			aggregateID := logicalID(stack, pipes.Pipelines[0].Aggregate.Function)
			assertProps(t, "aggregate mapping", tmpl.mappingOf(t, aggregateID).Properties, map[string]any{"TumblingWindowInSeconds": tt.want})
		})
	}
	for _, tt := range []struct {
		name string
		tmpl func(t *testing.T) cfnTemplate
		want any
	}{
		{"whole stack: cdk.json's context", func(*testing.T) cfnTemplate { return fx.tmpl }, 120.0},
		{"whole stack: props FlushPerBatch over context 300", func(t *testing.T) cfnTemplate { return onePipelineVariant.get(t).tmpl }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := tt.tmpl(t)
			aggregateID, _ := tmpl.function(t, FunctionAggregate)
			assertProps(t, "aggregate mapping", tmpl.mappingOf(t, aggregateID).Properties, map[string]any{"TumblingWindowInSeconds": tt.want})
		})
	}
}

// TestFlushIntervalAndPipelineShapeTheTopology reads a variant
// (settingsVariant): a flush interval from the command line's context (a
// string), and a pipeline that writes only to the table and runs two
// batches per shard.
func TestFlushIntervalAndPipelineShapeTheTopology(t *testing.T) {
	v := settingsVariant.get(t)
	stack, tmpl := v.stack, v.tmpl

	if stack.Pipelines.FlushInterval != 5*time.Minute {
		t.Errorf("FlushInterval = %v, want 5m from context", stack.Pipelines.FlushInterval)
	}
	if n := len(stack.Pipelines.Pipelines); n != 1 {
		t.Fatalf("%d pipelines, want the one that writes only to the table", n)
	}
	aggregateID, fn := tmpl.function(t, FunctionAggregate)
	assertProps(t, "aggregate mapping", tmpl.mappingOf(t, aggregateID).Properties, map[string]any{
		"TumblingWindowInSeconds": 300.0,
		"ParallelizationFactor":   2.0,
	})

	if stack.Pipelines.WindowResults != nil {
		t.Errorf("a pipeline without outputs.stream has a WindowResults stream")
	}
	for id := range tmpl.ofType("AWS::Kinesis::Stream") {
		if strings.HasPrefix(id, "WindowResults") {
			t.Errorf("a pipeline without outputs.stream: the template has stream %s", id)
		}
	}
	if _, ok := tmpl.Outputs["WindowResultsStreamName"]; ok {
		t.Error("output WindowResultsStreamName without a results stream")
	}
	vars := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := vars[EnvOutputStreamName]; ok {
		t.Errorf("aggregate has %s without a results stream", EnvOutputStreamName)
	}
	var file bytes.Buffer
	if err := json.Compact(&file, []byte(v.docs["pageviews"])); err != nil {
		t.Fatal(err)
	}
	if got := vars[EnvPipelineConfig]; got != file.String() {
		t.Errorf("%s = %v, want the stack's pipeline %s", EnvPipelineConfig, got, file.String())
	}
	for g := range tmpl.grants(logicalID(stack.Stack, pageviews(stack).Aggregate.Role)) {
		if strings.HasPrefix(g, "kinesis:PutRecord") {
			t.Errorf("aggregate may %s with no results stream", g)
		}
	}
	for _, e := range append(v.nagError, v.nagWarn...) {
		t.Errorf("cdk-nag: %s", e)
	}
}
