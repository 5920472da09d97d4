package tributary

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestTimelines: the tweets and follows tables stream new and old images to
// the one timeline function through two mappings that report batch item
// failures, bisect, are bounded and send what they give up on to the queue
// passed in; the follows table has the followers index; the function may
// read the sources, write the view and its fan-out progress, and nothing
// more on them.
func TestTimelines(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Timelines"), nil)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	quarantine := testQuarantine(stack)
	tl := NewTimelines(stack, "Timelines", TimelinesProps{AssetDir: assets, OnFailure: failures, Quarantine: quarantine})
	addNag(app)
	tmpl := templateOf(stack)

	tweetsID, followsID, viewID, fanOutID := logicalID(stack, tl.Tweets), logicalID(stack, tl.Follows), logicalID(stack, tl.View), logicalID(stack, tl.FanOut)
	keySchema := func(pk, sk string) []any {
		return []any{map[string]any{"AttributeName": pk, "KeyType": "HASH"}, map[string]any{"AttributeName": sk, "KeyType": "RANGE"}}
	}
	stream := map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"}
	pitr := map[string]any{"PointInTimeRecoveryEnabled": true}
	for _, tt := range []struct {
		name, id string
		props    map[string]any
	}{
		{"tweets", tweetsID, map[string]any{"KeySchema": keySchema("authorId", "tweetId"), "StreamSpecification": stream, "PointInTimeRecoverySpecification": pitr}},
		{"follows", followsID, map[string]any{"KeySchema": keySchema("followerId", "followeeId"), "StreamSpecification": stream, "PointInTimeRecoverySpecification": pitr,
			"GlobalSecondaryIndexes": []any{map[string]any{"IndexName": "followers", "KeySchema": keySchema("followeeId", "followerId"),
				"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"}}}}},
		{"timelines", viewID, map[string]any{"KeySchema": keySchema("userId", "sk"), "StreamSpecification": nil, "PointInTimeRecoverySpecification": pitr}},
		// Fan-out progress (timeline.Tables.FanOut): expires once no
		// delivery of its record can come.
		{"fan-out progress", fanOutID, map[string]any{"KeySchema": keySchema("tweet", "sequenceNumber"), "StreamSpecification": nil,
			"TimeToLiveSpecification": map[string]any{"AttributeName": "expiresAt", "Enabled": true}}},
	} {
		r, ok := tmpl.Resources[tt.id]
		if !ok || r.Type != "AWS::DynamoDB::Table" {
			t.Fatalf("no AWS::DynamoDB::Table %s (%s)", tt.id, tt.name)
		}
		assertProps(t, tt.name, r.Properties, tt.props)
	}

	fnID, fn := tmpl.function(t, FunctionTimeline)
	env, _ := fn.Properties["Environment"].(map[string]any)
	assertProps(t, "function environment", env, map[string]any{"Variables": map[string]any{
		EnvTweetsTableName:     ref(tweetsID),
		EnvFollowsTableName:    ref(followsID),
		EnvFollowersIndexName:  "followers",
		EnvTimelinesTableName:  ref(viewID),
		EnvFanOutTableName:     ref(fanOutID),
		EnvQuarantineTableName: ref(logicalID(stack, quarantine)),
	}})

	mappings := map[string]cfnResource{}
	for _, r := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(r.Properties["FunctionName"], ref(fnID)) {
			mappings[resourceName(r.Properties["EventSourceArn"])] = r
		}
	}
	if len(mappings) != 2 {
		t.Fatalf("timeline function has mappings on %v, want one per source table", keys(mappings))
	}
	for _, src := range []string{tweetsID, followsID} {
		m, ok := mappings[src+".StreamArn"]
		if !ok {
			t.Errorf("no mapping on %s's stream", src)
			continue
		}
		assertProps(t, "mapping on "+src, m.Properties, map[string]any{
			"StartingPosition":           "TRIM_HORIZON",
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
			"MaximumRecordAgeInSeconds":  DefaultStreamMaxRecordAge.Seconds(),
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{
				"Destination": getAtt(logicalID(stack, failures), "Arn")}},
		})
	}

	grants := tmpl.grants(logicalID(stack, tl.Function.Role))
	for _, g := range []string{
		"dynamodb:GetRecords " + tweetsID + ".StreamArn",
		"dynamodb:GetRecords " + followsID + ".StreamArn",
		"dynamodb:GetItem " + tweetsID + ".Arn",
		"dynamodb:Query " + tweetsID + ".Arn",
		"dynamodb:GetItem " + followsID + ".Arn",
		"dynamodb:Query " + followsID + ".Arn/index/followers",
		"dynamodb:PutItem " + viewID + ".Arn",
		"dynamodb:DeleteItem " + viewID + ".Arn",
		"dynamodb:Query " + viewID + ".Arn",
		"dynamodb:GetItem " + fanOutID + ".Arn",
		"dynamodb:UpdateItem " + fanOutID + ".Arn",
		"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
	} {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"dynamodb:PutItem " + tweetsID + ".Arn", "dynamodb:DeleteItem " + followsID + ".Arn",
		"dynamodb:PutItem " + followsID + ".Arn", "dynamodb:Scan " + viewID + ".Arn", "dynamodb:UpdateItem " + viewID + ".Arn"} {
		if grants[g] {
			t.Errorf("role may %s: more than the join needs", g)
		}
	}
	assertSetAsideGrant(t, grants, logicalID(stack, quarantine))
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
