package tributary

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestEnrichment: enrich subscribes to the events stream through its own
// enhanced fan-out consumer from offset 0 (so a new deployment rebuilds the
// join's copy of the table from the changelog), reports batch item failures,
// bisects, is bounded, and may put records on the enriched stream and read
// and write its join table — and nothing more.
func TestEnrichment(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Enrich"), nil)
	events := testEventsStream(stack)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	quarantine := testQuarantine(stack)
	e := NewEnrichment(stack, "Enrichment", EnrichmentProps{AssetDir: assets, Events: events, OnFailure: failures, Quarantine: quarantine})
	addNag(app)
	tmpl := templateOf(stack)

	tableID := logicalID(stack, e.JoinTable)
	table, ok := tmpl.Resources[tableID]
	if !ok || table.Type != "AWS::DynamoDB::Table" {
		t.Fatalf("no AWS::DynamoDB::Table %s", tableID)
	}
	assertProps(t, "join table", table.Properties, map[string]any{
		"BillingMode": "PAY_PER_REQUEST",
		"KeySchema":   []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
	})
	enrichedID := logicalID(stack, e.Enriched)

	fnID, fn := tmpl.function(t, FunctionEnrich)
	env, _ := fn.Properties["Environment"].(map[string]any)
	assertProps(t, "function environment", env, map[string]any{"Variables": map[string]any{
		EnvEnrichedStreamName:  ref(enrichedID),
		EnvJoinTableName:       ref(tableID),
		EnvDedupeHorizon:       "1h",
		EnvQuarantineTableName: ref(logicalID(stack, quarantine)),
	}})

	if e.Function.Consumer == nil {
		t.Fatal("enrich has no enhanced fan-out consumer")
	}
	consumerID := logicalID(stack, e.Function.Consumer)
	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":             getAtt(consumerID, "ConsumerARN"),
		"StartingPosition":           "TRIM_HORIZON",
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
		"MaximumRecordAgeInSeconds":  DefaultStreamMaxRecordAge.Seconds(),
		"DestinationConfig": map[string]any{"OnFailure": map[string]any{
			"Destination": getAtt(logicalID(stack, failures), "Arn")}},
	})

	grants := tmpl.grants(logicalID(stack, e.Function.Role))
	want := []string{
		"kinesis:PutRecords " + enrichedID + ".Arn",
		"kinesis:SubscribeToShard " + consumerID + ".ConsumerARN",
		"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
	}
	for _, a := range enrichJoinActions {
		want = append(want, a+" "+tableID+".Arn")
	}
	for _, g := range want {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	streamID := logicalID(stack, events)
	for _, g := range []string{
		"kinesis:PutRecords " + streamID + ".Arn",
		"dynamodb:Scan " + tableID + ".Arn",
		"dynamodb:DeleteItem " + tableID + ".Arn",
	} {
		if grants[g] {
			t.Errorf("role may %s: more than the join needs", g)
		}
	}
	assertSetAsideGrant(t, grants, logicalID(stack, quarantine))
	for g := range grants {
		if strings.HasSuffix(g, " *") {
			t.Errorf("role may %s: a wildcard", g)
		}
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}
