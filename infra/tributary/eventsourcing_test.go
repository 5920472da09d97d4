package tributary

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestEventSourcing: the event store streams new and old images to publish,
// which may only put records on the ShowEvents stream; project reads that
// stream; both mappings report batch item failures, bisect, are bounded and
// send what they give up on to the queue passed in. commands is behind an
// AWS_IAM function URL. No role may update or delete an event; each role
// holds exactly the calls its package makes; cdk-nag is clean.
func TestEventSourcing(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("EventSourcing"), nil)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	quarantine := testQuarantine(stack)
	e := NewEventSourcing(stack, "EventSourcing", EventSourcingProps{AssetDir: assets, OnFailure: failures, Quarantine: quarantine})
	addNag(app)
	tmpl := templateOf(stack)

	eventsID, snapsID, cmdsID, viewsID := logicalID(stack, e.Events), logicalID(stack, e.Snapshots), logicalID(stack, e.Commands), logicalID(stack, e.Views)
	streamID, paramID := logicalID(stack, e.Stream), logicalID(stack, e.ViewsParameter)
	keySchema := func(pk, sk string) []any {
		out := []any{map[string]any{"AttributeName": pk, "KeyType": "HASH"}}
		if sk != "" {
			out = append(out, map[string]any{"AttributeName": sk, "KeyType": "RANGE"})
		}
		return out
	}
	attr := func(name, typ string) any { return map[string]any{"AttributeName": name, "AttributeType": typ} }
	pitr := map[string]any{"PointInTimeRecoveryEnabled": true}
	for _, tt := range []struct {
		name, id string
		props    map[string]any
	}{
		// package es's schema (es.CreateTables): version is a number, so
		// versions sort as numbers; the sparse subject index finds what an
		// erasure must touch.
		{"events", eventsID, map[string]any{"KeySchema": keySchema("aggregateId", "version"),
			"AttributeDefinitions":             []any{attr("aggregateId", "S"), attr("version", "N"), attr("subject", "S")},
			"StreamSpecification":              map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
			"GlobalSecondaryIndexes":           []any{map[string]any{"IndexName": "subject", "KeySchema": keySchema("subject", ""), "Projection": map[string]any{"ProjectionType": "KEYS_ONLY"}}},
			"PointInTimeRecoverySpecification": pitr, "BillingMode": "PAY_PER_REQUEST"}},
		{"snapshots", snapsID, map[string]any{"KeySchema": keySchema("aggregateId", ""), "StreamSpecification": nil, "PointInTimeRecoverySpecification": pitr}},
		{"command records", cmdsID, map[string]any{"KeySchema": keySchema("id", ""), "StreamSpecification": nil,
			"TimeToLiveSpecification": map[string]any{"AttributeName": "expiresAt", "Enabled": true}}},
		// package seats's views table (seats.CreateViewsTable).
		{"views", viewsID, map[string]any{"KeySchema": keySchema("pk", "sk"),
			"GlobalSecondaryIndexes":           []any{map[string]any{"IndexName": "byDay", "KeySchema": keySchema("day", "at"), "Projection": map[string]any{"ProjectionType": "ALL"}}},
			"PointInTimeRecoverySpecification": pitr}},
	} {
		r, ok := tmpl.Resources[tt.id]
		if !ok || r.Type != "AWS::DynamoDB::Table" {
			t.Fatalf("no AWS::DynamoDB::Table %s (%s)", tt.id, tt.name)
		}
		assertProps(t, tt.name, r.Properties, tt.props)
	}
	assertProps(t, "ShowEvents", tmpl.Resources[streamID].Properties, map[string]any{
		"ShardCount": 1.0, "StreamEncryption": map[string]any{"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}})
	assertProps(t, "views parameter", tmpl.Resources[paramID].Properties, map[string]any{"Type": "String", "Value": ref(viewsID)})

	cmdFnID, cmdFn := tmpl.function(t, FunctionCommands)
	pubFnID, pubFn := tmpl.function(t, FunctionPublish)
	projFnID, projFn := tmpl.function(t, FunctionProject)
	paramName := ref(paramID)
	for _, tt := range []struct {
		name string
		fn   cfnResource
		env  map[string]any
	}{
		{FunctionCommands, cmdFn, map[string]any{EnvESEventsTable: ref(eventsID), EnvESSnapshotsTable: ref(snapsID), EnvESCommandsTable: ref(cmdsID),
			EnvESSnapshotEvery: "25", EnvViewsParameterName: paramName, EnvViewsRefresh: "30"}},
		{FunctionPublish, pubFn, map[string]any{EnvESStreamName: ref(streamID), EnvQuarantineTableName: ref(logicalID(stack, quarantine))}},
		{FunctionProject, projFn, map[string]any{EnvESEventsTable: ref(eventsID), EnvViewsParameterName: paramName, EnvViewsRefresh: "30",
			EnvQuarantineTableName: ref(logicalID(stack, quarantine))}},
	} {
		env, _ := tt.fn.Properties["Environment"].(map[string]any)
		assertProps(t, tt.name+" environment", env, map[string]any{"Variables": tt.env})
	}
	if cmdFn.Properties["Timeout"] != 10.0 {
		t.Errorf("commands timeout %v, want 10 (a read waits at most 5 s)", cmdFn.Properties["Timeout"])
	}
	urls := tmpl.ofType("AWS::Lambda::Url")
	if len(urls) != 1 {
		t.Fatalf("%d function URLs, want commands' only", len(urls))
	}
	for id, u := range urls {
		assertProps(t, id, u.Properties, map[string]any{"AuthType": "AWS_IAM", "TargetFunctionArn": getAtt(cmdFnID, "Arn")})
	}

	mapping := func(fnID string) cfnResource {
		for _, r := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
			if reflect.DeepEqual(r.Properties["FunctionName"], ref(fnID)) {
				return r
			}
		}
		t.Fatalf("no mapping for %s", fnID)
		return cfnResource{}
	}
	for src, m := range map[string]cfnResource{eventsID + ".StreamArn": mapping(pubFnID), streamID + ".Arn": mapping(projFnID)} {
		assertProps(t, "mapping on "+src, m.Properties, map[string]any{
			"StartingPosition":           "TRIM_HORIZON",
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
			"MaximumRecordAgeInSeconds":  DefaultStreamMaxRecordAge.Seconds(),
			"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(logicalID(stack, failures), "Arn")}},
		})
		if resourceName(m.Properties["EventSourceArn"]) != src {
			t.Errorf("mapping reads %v, want %s", m.Properties["EventSourceArn"], src)
		}
	}

	// Exactly the calls each package makes (see eventsourcing.go).
	events, views := eventsID+".Arn", viewsID+".Arn"
	param := resourceName(stack.Resolve(e.ViewsParameter.ParameterArn()))
	failuresArn := logicalID(stack, failures) + ".Arn"
	sendTo := on(failuresArn, "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage")
	setAside := on(logicalID(stack, quarantine)+".Arn", setAsideActions...)
	for _, tt := range []struct {
		name string
		fn   *GoFunction
		want []string
	}{
		{FunctionCommands, e.CommandsFn, join(
			on(events, "dynamodb:PutItem", "dynamodb:Query"),
			on(snapsID+".Arn", "dynamodb:GetItem", "dynamodb:PutItem"),
			on(cmdsID+".Arn", "dynamodb:GetItem", "dynamodb:PutItem"),
			on(views, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
			on(views+"-v*", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
			on(views+"/index/byDay", "dynamodb:Query"),
			on(views+"-v*/index/byDay", "dynamodb:Query"),
			on(param, "ssm:GetParameter"),
		)},
		{FunctionPublish, e.Publish.GoFunction, join(
			[]string{"dynamodb:ListStreams *"},
			on(eventsID+".StreamArn", "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
			on(streamID+".Arn", "kinesis:PutRecords"), sendTo, setAside,
		)},
		{FunctionProject, e.Project.GoFunction, join(
			on(streamID+".Arn", "kinesis:DescribeStream", "kinesis:DescribeStreamConsumer", "kinesis:DescribeStreamSummary",
				"kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards", "kinesis:ListStreams", "kinesis:SubscribeToShard"),
			on(views, "dynamodb:PutItem", "dynamodb:UpdateItem"),
			on(views+"-v*", "dynamodb:PutItem", "dynamodb:UpdateItem"),
			on(events, "dynamodb:Query"),
			on(param, "ssm:GetParameter"),
			sendTo, setAside,
		)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := logicalID(stack, tt.fn.LogGroup) + ".Arn"
			want := map[string]bool{"logs:CreateLogStream " + logs: true, "logs:PutLogEvents " + logs: true}
			for _, g := range tt.want {
				want[g] = true
			}
			got := tmpl.grants(logicalID(stack, tt.fn.Role))
			for g := range got {
				if !want[g] {
					t.Errorf("role allows %s, which %s does not call", g, tt.name)
				}
			}
			for g := range want {
				if !got[g] {
					t.Errorf("role lacks %s", g)
				}
			}
		})
	}
	// The log is immutable: no role of the stack may change or delete an
	// event (es.Erase runs with an operator's credentials).
	for roleID := range tmpl.ofType("AWS::IAM::Role") {
		for g := range tmpl.grants(roleID) {
			action, resource, _ := strings.Cut(g, " ")
			if resource == events && (action == "dynamodb:UpdateItem" || action == "dynamodb:DeleteItem" || action == "dynamodb:BatchWriteItem") {
				t.Errorf("role %s may %s on the event store", roleID, action)
			}
		}
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}
