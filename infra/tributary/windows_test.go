package tributary

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
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
// window on the mapping).
func TestFlushIntervalDefaultsToTwoMinutes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		context map[string]any
		props   time.Duration
		want    any
	}{
		{"default", nil, 0, 120.0},
		{"context 0: per batch", map[string]any{ContextFlushInterval: 0.0}, 0, nil},
		{"props FlushPerBatch over context 300", map[string]any{ContextFlushInterval: 300.0}, FlushPerBatch, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := fx.tmpl // cdk.json's context and no props: the shared fixture's stack
			if tt.context != nil || tt.props != 0 {
				assets := t.TempDir()
				writeDummyAssets(assets)
				ctx := map[string]any{ContextAssetDir: assets}
				for k, v := range tt.context {
					ctx[k] = v
				}
				app := newTestApp(t.TempDir(), ctx)
				stack, err := NewTributaryStack(app, StackID, &TributaryStackProps{FlushInterval: tt.props})
				if err != nil {
					t.Fatal(err)
				}
				tmpl = templateOf(stack.Stack)
			}
			aggregateID, _ := tmpl.function(t, FunctionAggregate)
			assertProps(t, "aggregate mapping", tmpl.mappingOf(t, aggregateID).Properties, map[string]any{"TumblingWindowInSeconds": tt.want})
		})
	}
}

// TestFlushIntervalAndPipelineShapeTheTopology synthesizes a variant: a
// flush interval from the command line's context (a string), and a pipeline
// that writes only to the table and runs two batches per shard.
func TestFlushIntervalAndPipelineShapeTheTopology(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), map[string]any{ContextFlushInterval: "300", ContextAssetDir: assets})
	var doc map[string]any
	if err := json.Unmarshal([]byte(readRepoPipeline(t, "pageviews")), &doc); err != nil {
		t.Fatal(err)
	}
	doc["outputs"] = map[string]any{"table": true}
	doc["parallelizationFactor"] = 2
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	files := testPipelineFiles(t, map[string]string{"pageviews": string(raw)})
	stack, err := NewTributaryStack(app, StackID, &TributaryStackProps{Pipelines: files})
	if err != nil {
		t.Fatal(err)
	}
	addNag(app)
	tmpl := templateOf(stack.Stack)

	if stack.Pipelines.FlushInterval != 5*time.Minute {
		t.Errorf("FlushInterval = %v, want 5m from context", stack.Pipelines.FlushInterval)
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
	if got := vars[EnvPipelineConfig]; got != string(files[0].JSON) {
		t.Errorf("%s = %v, want the stack's pipeline %s", EnvPipelineConfig, got, files[0].JSON)
	}
	for g := range tmpl.grants(logicalID(stack.Stack, pageviews(stack).Aggregate.Role)) {
		if strings.HasPrefix(g, "kinesis:PutRecord") {
			t.Errorf("aggregate may %s with no results stream", g)
		}
	}
	errs, warns := nagFindings(stack.Stack)
	for _, e := range append(errs, warns...) {
		t.Errorf("cdk-nag: %s", e)
	}
}
