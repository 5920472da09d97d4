package tributary

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// keyedStateTableProps are what a keyed state table must declare for
// package state: keys pk/sk, the open index, TTL, on demand, PITR.
func assertKeyedStateTable(t *testing.T, what string, table cfnResource) {
	t.Helper()
	if table.Type != "AWS::DynamoDB::Table" {
		t.Fatalf("%s is a %s", what, table.Type)
	}
	assertProps(t, what, table.Properties, map[string]any{
		"BillingMode": "PAY_PER_REQUEST",
		"KeySchema": []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
			map[string]any{"AttributeName": "sk", "KeyType": "RANGE"}},
		"TimeToLiveSpecification":          map[string]any{"AttributeName": "expiresAt", "Enabled": true},
		"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
	})
	gsis := asList(table.Properties["GlobalSecondaryIndexes"])
	if len(gsis) != 1 || gsis[0].(map[string]any)["IndexName"] != ViewsOpenIndex {
		t.Errorf("%s indexes %v, want the open index", what, gsis)
	}
}

// assertTick checks that a schedule ticks fnID every minute, its
// undeliverable ticks going to failuresID.
func assertTick(t *testing.T, tmpl cfnTemplate, fnID, failuresID string) {
	t.Helper()
	for _, r := range tmpl.ofType("AWS::Events::Rule") {
		for _, target := range asList(r.Properties["Targets"]) {
			tg := target.(map[string]any)
			if !reflect.DeepEqual(tg["Arn"], getAtt(fnID, "Arn")) {
				continue
			}
			if r.Properties["ScheduleExpression"] != "rate(1 minute)" {
				t.Errorf("tick of %s: %v", fnID, r.Properties["ScheduleExpression"])
			}
			assertProps(t, "tick target", tg, map[string]any{
				"DeadLetterConfig": map[string]any{"Arn": getAtt(failuresID, "Arn")},
				"RetryPolicy":      map[string]any{"MaximumEventAgeInSeconds": float64(60), "MaximumRetryAttempts": float64(2)},
			})
			return
		}
	}
	t.Errorf("no schedule ticks %s", fnID)
}

// assertBacklogRead checks that a keyed operator's function, whose
// environment is env and grants grants, is given the stream it reads
// (eventsID) for its tick: EVENTS_STREAM_NAME and the two calls package
// backlog makes on it.
func assertBacklogRead(t *testing.T, env map[string]any, grants map[string]bool, eventsID string) {
	t.Helper()
	if got := env[EnvEventsStreamName]; !reflect.DeepEqual(got, ref(eventsID)) {
		t.Errorf("%s = %v, want the stream the function reads, %s: its tick reads it before it takes a shard for idle", EnvEventsStreamName, got, eventsID)
	}
	for _, g := range []string{"kinesis:GetShardIterator " + eventsID + ".Arn", "kinesis:GetRecords " + eventsID + ".Arn"} {
		if !grants[g] {
			t.Errorf("role lacks %s, which the tick's read of the stream needs; it has %v", g, grants)
		}
	}
}

func assertNoWildcards(t *testing.T, grants map[string]bool) {
	t.Helper()
	for g := range grants {
		if strings.HasSuffix(g, " *") {
			t.Errorf("role may %s: a wildcard", g)
		}
	}
}

// TestStreamJoin: the join reads every record of the events stream (no
// mapping filter: a filter hid from its tick that the shard's later records
// were seen, and a search followed by any other event on its shard waited
// for the next search or click to come out unmatched), from offset 0, reporting batch item failures and bisecting; its config
// is its file's (pipelines/search-click.json); it may read and write its state table and index, put on
// the joins stream and set records aside, and nothing more; a schedule
// ticks it.
func TestStreamJoin(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Join"), nil)
	events := testEventsStream(stack)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	ticks := failures.DeadLetterQueue().Queue // a queue cdk-nag accepts as a failure destination
	quarantine := testQuarantine(stack)
	cfg, err := JoinFromFile(repoFile(t, "search-click.json"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewStreamJoin(stack, "J", StreamJoinProps{AssetDir: assets, Events: events, OnFailure: failures, Quarantine: quarantine, TickFailures: ticks, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	addNag(app)
	tmpl := templateOf(stack)

	stateID, joinsID := logicalID(stack, j.State), logicalID(stack, j.Joins)
	assertKeyedStateTable(t, "join state table", tmpl.Resources[stateID])
	if p := tmpl.Resources[joinsID].DeletionPolicy; p != "Delete" {
		t.Errorf("the joins stream's DeletionPolicy is %q: it is derived, rebuilt by a replay, so Delete", p)
	}
	fnID, fn := tmpl.function(t, FunctionJoin)
	env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if got, want := env[EnvJoinConfig], compactFile("../../pipelines/search-click.json"); got != want {
		t.Errorf("JOIN_CONFIG %v, want pipelines/search-click.json compacted, %s", got, want)
	}
	assertProps(t, "environment", env, map[string]any{
		EnvJoinStateTableName:  ref(stateID),
		EnvJoinsStreamName:     ref(joinsID),
		EnvQuarantineTableName: ref(logicalID(stack, quarantine)),
	})
	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":             getAtt(logicalID(stack, events), "Arn"),
		"StartingPosition":           "TRIM_HORIZON",
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"BisectBatchOnFunctionError": true,
		"BatchSize":                  float64(100),
		"FilterCriteria":             nil,
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(logicalID(stack, failures), "Arn")}},
	})
	if _, ok := m.Properties["ParallelizationFactor"]; ok {
		t.Error("the join's mapping sets a ParallelizationFactor: one key's records must stay in order")
	}

	grants := tmpl.grants(logicalID(stack, j.Function.Role))
	want := []string{"kinesis:PutRecords " + joinsID + ".Arn", "dynamodb:Query " + stateID + ".Arn/index/open"}
	for _, a := range keyedStateActions {
		want = append(want, a+" "+stateID+".Arn")
	}
	for _, g := range want {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"dynamodb:Scan " + stateID + ".Arn", "dynamodb:DeleteItem " + stateID + ".Arn", "kinesis:PutRecords " + logicalID(stack, events) + ".Arn"} {
		if grants[g] {
			t.Errorf("role may %s: more than the join needs", g)
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
}

// TestDetection: detect reads every event through its own enhanced fan-out
// consumer, may scan the rules table (and not write it), read and write its
// state, put matches; the rules function may read and write the rules table
// only, behind an AWS_IAM function URL; a schedule ticks detect.
func TestDetection(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Detect"), nil)
	events := testEventsStream(stack)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	ticks := failures.DeadLetterQueue().Queue // a queue cdk-nag accepts as a failure destination
	quarantine := testQuarantine(stack)
	cfg, err := CEPFromFile(repoFile(t, "detect.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDetection(stack, "D", DetectionProps{AssetDir: assets, Events: events, OnFailure: failures, Quarantine: quarantine, TickFailures: ticks, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	addNag(app)
	tmpl := templateOf(stack)

	rulesID, stateID, matchesID := logicalID(stack, d.Rules), logicalID(stack, d.State), logicalID(stack, d.Matches)
	if p := tmpl.Resources[matchesID].DeletionPolicy; p != "Delete" {
		t.Errorf("the matches stream's DeletionPolicy is %q, want Delete (derived)", p)
	}
	assertKeyedStateTable(t, "CEP state table", tmpl.Resources[stateID])
	assertProps(t, "rules table", tmpl.Resources[rulesID].Properties, map[string]any{
		"KeySchema":               []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
		"TimeToLiveSpecification": map[string]any{"AttributeName": "expiresAt", "Enabled": true},
	})
	fnID, fn := tmpl.function(t, FunctionDetect)
	env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	assertProps(t, "detect environment", env, map[string]any{
		EnvCEPStateTableName: ref(stateID), EnvRulesTableName: ref(rulesID), EnvMatchesStreamName: ref(matchesID),
	})
	if !strings.Contains(env[EnvCEPConfig].(string), `"name":"detect"`) {
		t.Errorf("CEP_CONFIG %v", env[EnvCEPConfig])
	}
	if d.Detect.Consumer == nil {
		t.Fatal("detect has no enhanced fan-out consumer")
	}
	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":        getAtt(logicalID(stack, d.Detect.Consumer), "ConsumerARN"),
		"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
	})
	grants := tmpl.grants(logicalID(stack, d.Detect.Role))
	for _, g := range []string{"dynamodb:GetItem " + rulesID + ".Arn", "dynamodb:Scan " + rulesID + ".Arn", "kinesis:PutRecords " + matchesID + ".Arn", "dynamodb:UpdateItem " + stateID + ".Arn"} {
		if !grants[g] {
			t.Errorf("detect lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"dynamodb:PutItem " + rulesID + ".Arn", "dynamodb:UpdateItem " + rulesID + ".Arn"} {
		if grants[g] {
			t.Errorf("detect may %s: it only reads the rules", g)
		}
	}
	assertSetAsideGrant(t, grants, logicalID(stack, quarantine))
	assertBacklogRead(t, env, grants, logicalID(stack, events))
	assertNoWildcards(t, grants)
	assertTick(t, tmpl, fnID, logicalID(stack, ticks))

	adminID, admin := tmpl.function(t, FunctionRules)
	if v := admin.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)[EnvRulesTableName]; !reflect.DeepEqual(v, ref(rulesID)) {
		t.Errorf("rules function RULES_TABLE_NAME %v", v)
	}
	adminGrants := tmpl.grants(logicalID(stack, d.Admin.Role))
	for _, a := range adminRulesActions {
		if !adminGrants[a+" "+rulesID+".Arn"] {
			t.Errorf("rules function lacks %s on the rules table; it has %v", a, adminGrants)
		}
	}
	for g := range adminGrants {
		if strings.HasPrefix(g, "dynamodb:") && !strings.HasSuffix(g, " "+rulesID+".Arn") {
			t.Errorf("rules function may %s: it needs the rules table only", g)
		}
	}
	assertNoWildcards(t, adminGrants)
	urls := tmpl.ofType("AWS::Lambda::Url")
	if len(urls) != 1 {
		t.Fatalf("%d function URLs", len(urls))
	}
	for _, u := range urls {
		assertProps(t, "rules URL", u.Properties, map[string]any{"AuthType": "AWS_IAM", "TargetFunctionArn": getAtt(adminID, "Arn")})
	}

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}

// compactFile is a JSON file (a path from this directory) compacted, as the stack
// passes a declared config to its function.
func compactFile(name string) string {
	raw, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		panic(err)
	}
	return b.String()
}

// repoFile is the repository's pipeline file pipelines/<name>.
func repoFile(t *testing.T, name string) pipeline.File {
	t.Helper()
	path := "../../pipelines/" + name
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pipeline.NewFile(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
