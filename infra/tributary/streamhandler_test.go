package tributary

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestStreamHandler: a stream function of your own gets a state table of
// package state's schema (open index, TTL), an output stream, a mapping
// that reports batch item failures, bisects and sends exhausted batches to
// the on-failure queue (only the declared event types pass), the variables
// handler.FromEnv reads, a schedule ticking it, and grants of exactly what
// package handler does; cdk-nag finds nothing. A missing bootstrap or prop
// is an error naming it.
func TestStreamHandler(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Handler"), nil)
	events := testEventsStream(stack)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	ticks := failures.DeadLetterQueue().Queue
	quarantine := testQuarantine(stack)
	props := StreamHandlerProps{Name: FunctionStatusCodes, AssetDir: assets, Events: events, EventTypes: []string{"http_request"},
		Quarantine: quarantine, OnFailure: failures, TickFailures: ticks}
	h, err := NewStreamHandler(stack, "StatusCodes", props)
	if err != nil {
		t.Fatal(err)
	}
	addNag(app)
	tmpl := templateOf(stack)

	stateID, outID := logicalID(stack, h.State), logicalID(stack, h.Output)
	assertKeyedStateTable(t, "state table", tmpl.Resources[stateID])
	if r := tmpl.Resources[outID]; r.Type != "AWS::Kinesis::Stream" || r.DeletionPolicy != "Delete" {
		t.Errorf("output stream: %s, DeletionPolicy %q; want a Kinesis stream, Delete (derived)", r.Type, r.DeletionPolicy)
	}
	fnID, fn := tmpl.function(t, FunctionStatusCodes)
	env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	assertProps(t, "environment", env, map[string]any{
		"STATE_TABLE_NAME":      ref(stateID),
		"OUTPUT_STREAM_NAME":    ref(outID),
		"QUARANTINE_TABLE_NAME": ref(logicalID(stack, quarantine)),
	})
	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":             getAtt(logicalID(stack, events), "Arn"),
		"StartingPosition":           "TRIM_HORIZON",
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"BisectBatchOnFunctionError": true,
		"FilterCriteria":             nil, // its tick must see the shard's other records pass (see TestStreamJoin)
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(logicalID(stack, failures), "Arn")}},
	})
	if _, ok := m.Properties["MaximumRetryAttempts"]; !ok {
		t.Error("the mapping's retries are unbounded")
	}

	grants := tmpl.grants(logicalID(stack, h.Function.Role))
	want := []string{"kinesis:PutRecords " + outID + ".Arn", "dynamodb:Query " + stateID + ".Arn/index/open"}
	for _, a := range keyedStateActions {
		want = append(want, a+" "+stateID+".Arn")
	}
	for _, g := range want {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"dynamodb:Scan " + stateID + ".Arn", "dynamodb:DeleteItem " + stateID + ".Arn",
		"kinesis:PutRecords " + logicalID(stack, events) + ".Arn", "dynamodb:PutItem " + logicalID(stack, quarantine) + ".Arn"} {
		if grants[g] {
			t.Errorf("role may %s: more than package handler needs", g)
		}
	}
	assertSetAsideGrant(t, grants, logicalID(stack, quarantine))
	assertBacklogRead(t, env, grants, logicalID(stack, events))
	assertNoWildcards(t, grants)
	assertTick(t, tmpl, fnID, logicalID(stack, ticks))

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})

	t.Run("errors", func(t *testing.T) {
		bad := props
		bad.AssetDir = t.TempDir()
		if _, err := NewStreamHandler(stack, "NoAsset", bad); err == nil || !strings.Contains(err.Error(), "statuscodes/bootstrap does not exist") {
			t.Errorf("missing bootstrap: %v", err)
		}
		bad = props
		bad.OnFailure = nil
		if _, err := NewStreamHandler(stack, "NoOnFailure", bad); err == nil || !strings.Contains(err.Error(), "OnFailure") {
			t.Errorf("missing OnFailure: %v", err)
		}
		// Without TickFailures the handler gets a failure queue of its own.
		own := props
		own.TickFailures = nil
		if _, err := NewStreamHandler(stack, "OwnTickFailures", own); err != nil {
			t.Fatalf("without TickFailures: %v", err)
		}
		if q := stack.Node().TryFindChild(jsii.String("OwnTickFailures")).Node().TryFindChild(jsii.String("TickFailures")); q == nil {
			t.Errorf("without TickFailures, no TickFailures queue of its own")
		}
	})
}

// TestHandlersReadTheAssetDirContextStrictly: a tributary:assetDir that is
// not a string (a number in cdk.json) stops NewStreamHandler and
// NewTaskHandler naming the key, as it stops NewTributaryStack, rather than
// taking the bootstraps from DefaultAssetDir, which may hold others.
func TestHandlersReadTheAssetDirContextStrictly(t *testing.T) {
	const want = "context tributary:assetDir: got 5 (float64), want a string"
	app := newTestApp(t.TempDir(), map[string]any{ContextAssetDir: 5.0})
	stack := awscdk.NewStack(app, jsii.String("Handlers"), nil)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	_, err := NewStreamHandler(stack, "StatusCodes", StreamHandlerProps{Name: FunctionStatusCodes, Events: testEventsStream(stack),
		Quarantine: testQuarantine(stack), OnFailure: failures})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewStreamHandler error = %v, want one containing %q", err, want)
	}
	_, err = NewTaskHandler(stack, "Receipts", TaskHandlerProps{Name: FunctionReceipts})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewTaskHandler error = %v, want one containing %q", err, want)
	}
}
