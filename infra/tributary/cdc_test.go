package tributary

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestProfilesCDC: the profiles table streams new and old images to the cdc
// function, whose mapping reports batch item failures, bisects, is bounded
// and sends what it gives up on to the queue passed in; the function may put
// records on the events stream and nothing more on it.
func TestProfilesCDC(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("CDC"), nil)
	events := testEventsStream(stack)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	quarantine := testQuarantine(stack)
	p := NewProfilesCDC(stack, "Profiles", ProfilesCDCProps{AssetDir: assets, Events: events, OnFailure: failures, Quarantine: quarantine})
	addNag(app)
	tmpl := templateOf(stack)

	tableID := logicalID(stack, p.Table)
	table, ok := tmpl.Resources[tableID]
	if !ok || table.Type != "AWS::DynamoDB::Table" {
		t.Fatalf("no AWS::DynamoDB::Table %s", tableID)
	}
	assertProps(t, "table", table.Properties, map[string]any{
		"BillingMode":                      "PAY_PER_REQUEST",
		"StreamSpecification":              map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
		"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
		"KeySchema":                        []any{map[string]any{"AttributeName": "userId", "KeyType": "HASH"}},
	})

	fnID, fn := tmpl.function(t, FunctionCDC)
	env, _ := fn.Properties["Environment"].(map[string]any)
	assertProps(t, "function environment", env, map[string]any{"Variables": map[string]any{
		"EVENTS_STREAM_NAME":   ref(logicalID(stack, events)),
		"ENTITY_KEY_ATTRIBUTE": "userId",
		EnvQuarantineTableName: ref(logicalID(stack, quarantine)),
	}})

	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":             getAtt(tableID, "StreamArn"),
		"StartingPosition":           "TRIM_HORIZON",
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
		"MaximumRecordAgeInSeconds":  DefaultStreamMaxRecordAge.Seconds(),
		"DestinationConfig": map[string]any{"OnFailure": map[string]any{
			"Destination": getAtt(logicalID(stack, failures), "Arn")}},
	})

	grants := tmpl.grants(logicalID(stack, p.Function.Role))
	streamID := logicalID(stack, events)
	for _, g := range []string{
		"kinesis:PutRecords " + streamID + ".Arn",
		"dynamodb:GetRecords " + tableID + ".StreamArn",
		"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
	} {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"kinesis:GetRecords " + streamID + ".Arn", "kinesis:PutRecord " + streamID + ".Arn",
		"dynamodb:PutItem " + tableID + ".Arn"} {
		if grants[g] {
			t.Errorf("role may %s: more than change capture needs", g)
		}
	}

	// Changes that can never be written are set aside: BatchWriteItem and
	// UpdateItem on the quarantine table, nothing more there.
	assertSetAsideGrant(t, grants, logicalID(stack, quarantine))

	// The only wildcard is the event source's ListStreams, which has no
	// resource-level scope (and is suppressed for cdk-nag with that reason).
	for g := range grants {
		if strings.HasSuffix(g, " *") && g != "dynamodb:ListStreams *" {
			t.Errorf("role may %s: a wildcard beyond dynamodb:ListStreams", g)
		}
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}
