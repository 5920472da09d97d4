package tributary

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// TestSnapshot: the snapshot function knows its table, stream and entity
// key, has no trigger, and may describe and scan the table, read its
// stream's position and put records on the events stream — nothing more.
func TestSnapshot(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Snap"), nil)
	events := testEventsStream(stack)
	profiles := awsdynamodb.NewTable(stack, jsii.String("Profiles"), &awsdynamodb.TableProps{
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String("userId"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:                           awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
	})
	s := NewSnapshot(stack, "Snapshot", SnapshotProps{AssetDir: assets, Table: profiles, Events: events})
	addNag(app)
	tmpl := templateOf(stack)

	tableID, streamID := logicalID(stack, profiles), logicalID(stack, events)
	fnID, fn := tmpl.function(t, FunctionSnapshot)
	env, _ := fn.Properties["Environment"].(map[string]any)
	assertProps(t, "function environment", env, map[string]any{"Variables": map[string]any{
		"EVENTS_STREAM_NAME":   ref(streamID),
		"PROFILES_TABLE_NAME":  ref(tableID),
		"ENTITY_KEY_ATTRIBUTE": "userId",
	}})
	if fn.Properties["Timeout"] != float64(900) {
		t.Errorf("timeout %v, want 900 s: a snapshot scans the whole table", fn.Properties["Timeout"])
	}
	for _, m := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if m.Properties["FunctionName"] != nil && resourceName(m.Properties["FunctionName"]) == fnID {
			t.Errorf("the snapshot function has an event source mapping %v: it is invoked by hand", m.Properties)
		}
	}

	grants := tmpl.grants(logicalID(stack, s.Function.Role))
	want := map[string]bool{
		"dynamodb:DescribeTable " + tableID + ".Arn":          true,
		"dynamodb:Scan " + tableID + ".Arn":                   true,
		"dynamodb:DescribeStream " + tableID + ".StreamArn":   true,
		"dynamodb:GetShardIterator " + tableID + ".StreamArn": true,
		"dynamodb:GetRecords " + tableID + ".StreamArn":       true,
		"kinesis:PutRecords " + streamID + ".Arn":             true,
	}
	for g := range want {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for g := range grants {
		if (strings.HasPrefix(g, "dynamodb:") || strings.HasPrefix(g, "kinesis:")) && !want[g] {
			t.Errorf("role may %s: more than a snapshot needs", g)
		}
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}
