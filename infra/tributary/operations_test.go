package tributary

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TestStateOutlivesTheStack: `cdk destroy` keeps every table (retained and
// deletion-protected: each holds state no stream gives back once the
// events stream's retention has passed) and every failure queue with its
// TLS-only policy; it deletes the work queues and the derived streams.
func TestStateOutlivesTheStack(t *testing.T) {
	s := fx.stack
	tables := fx.tmpl.ofType("AWS::DynamoDB::Table")
	if len(tables) != 19 {
		t.Errorf("%d tables, want 19 (Views, Quarantine, Idempotency, Results, Profiles, Tweets, Follows, Timelines, TimelineFanOut, JoinState, IngestRequests, the join's State, Rules, the CEP's State, event sourcing's Events, Snapshots, CommandRecords, Views, and statuscodes' State)", len(tables))
	}
	for id, r := range tables {
		if r.DeletionPolicy != "Retain" || r.UpdateReplacePolicy != "Retain" || r.Properties["DeletionProtectionEnabled"] != true {
			t.Errorf("table %s: DeletionPolicy %q, UpdateReplacePolicy %q, DeletionProtectionEnabled %v; want Retain, Retain, true",
				id, r.DeletionPolicy, r.UpdateReplacePolicy, r.Properties["DeletionProtectionEnabled"])
		}
	}
	failureQueues := map[string]bool{}
	for _, q := range FailureQueues(s.Stack) {
		failureQueues[logicalID(s.Stack, q)] = true
	}
	for id, r := range fx.tmpl.ofType("AWS::SQS::Queue") {
		want := "Delete"
		if failureQueues[id] {
			want = "Retain"
		}
		if r.DeletionPolicy != want {
			t.Errorf("queue %s: DeletionPolicy %q, want %q", id, r.DeletionPolicy, want)
		}
	}
	for id, p := range fx.tmpl.ofType("AWS::SQS::QueuePolicy") {
		q := resourceName(asList(p.Properties["Queues"])[0])
		if failureQueues[q] && p.DeletionPolicy != "Retain" {
			t.Errorf("policy %s of failure queue %s: DeletionPolicy %q, want Retain", id, q, p.DeletionPolicy)
		}
	}
	for _, tt := range []struct {
		id       string
		hours    any
		deletion string
	}{
		{logicalID(s.Stack, s.Events), DefaultEventsRetention.Hours(), "Retain"},
		{logicalID(s.Stack, s.Pipelines.WindowResults), 24.0, "Retain"},
		{logicalID(s.Stack, s.Enrichment.Enriched), 24.0, "Delete"},
	} {
		r := fx.tmpl.Resources[tt.id]
		if r.Properties["RetentionPeriodHours"] != tt.hours || r.DeletionPolicy != tt.deletion {
			t.Errorf("stream %s: RetentionPeriodHours %v, DeletionPolicy %q; want %v, %q",
				tt.id, r.Properties["RetentionPeriodHours"], r.DeletionPolicy, tt.hours, tt.deletion)
		}
	}
}

// TestTickerFailureDestination: a tick that still fails after two retries
// (or that Lambda could not run within ten minutes) is described on the
// TickerFailures queue — encrypted, TLS only, kept 14 days and on destroy —
// which the ticker's role may send to; EventBridge's undeliverable schedule
// events go there too.
func TestTickerFailureDestination(t *testing.T) {
	s := fx.stack
	tickerID := logicalID(s.Stack, pageviews(s).Ticker.Function)
	queueID := logicalID(s.Stack, pageviews(s).TickerFailures)
	var configs int
	for id, c := range fx.tmpl.ofType("AWS::Lambda::EventInvokeConfig") {
		if !reflect.DeepEqual(c.Properties["FunctionName"], ref(tickerID)) {
			continue
		}
		configs++
		assertProps(t, id, c.Properties, map[string]any{
			"MaximumRetryAttempts":     float64(tickerRetryAttempts),
			"MaximumEventAgeInSeconds": tickerMaxEventAge.Seconds(),
			"DestinationConfig":        map[string]any{"OnFailure": map[string]any{"Destination": getAtt(queueID, "Arn")}},
		})
	}
	if configs != 1 {
		t.Errorf("ticker has %d async invoke configs, want 1", configs)
	}
	q := fx.tmpl.Resources[queueID]
	assertProps(t, queueID, q.Properties, map[string]any{
		"SqsManagedSseEnabled":   true,
		"MessageRetentionPeriod": 1209600.0,
		"RedrivePolicy":          nil,
	})
	if q.DeletionPolicy != "Retain" {
		t.Errorf("TickerFailures DeletionPolicy %q, want Retain", q.DeletionPolicy)
	}
	if !deniesInsecureTransport(queueID) {
		t.Error("TickerFailures has no policy denying requests without TLS")
	}
	if !fx.tmpl.grants(logicalID(s.Stack, pageviews(s).Ticker.Role))["sqs:SendMessage "+queueID+".Arn"] {
		t.Error("the ticker's role may not send to TickerFailures (Lambda sends the on-failure record with it)")
	}
	rule := fx.tmpl.Resources[logicalID(s.Stack, pageviews(s).TickerRule)].Properties
	target := asList(rule["Targets"])[0].(map[string]any)
	if !reflect.DeepEqual(target["DeadLetterConfig"], map[string]any{"Arn": getAtt(queueID, "Arn")}) {
		t.Errorf("schedule target DeadLetterConfig %v, want TickerFailures", target["DeadLetterConfig"])
	}
}

// TestEveryScheduledFunctionDescribesItsFailedTicks: a schedule invokes
// its function asynchronously, so a tick that fails in the function is
// retried by Lambda, not EventBridge; every function a rule targets (each
// pipeline's ticker, the join's, the detection's and the status-code
// example's) has an async invoke config whose on-failure destination is
// the queue its rule's undeliverable events go to, with bounded retries
// and event age. Without it a failed tick is retried for up to six hours
// and then dropped, described nowhere.
func TestEveryScheduledFunctionDescribesItsFailedTicks(t *testing.T) {
	configs := map[string]map[string]any{}
	for id, c := range fx.tmpl.ofType("AWS::Lambda::EventInvokeConfig") {
		fn, _ := c.Properties["FunctionName"].(map[string]any)["Ref"].(string)
		if _, dup := configs[fn]; dup {
			t.Errorf("%s: a second async invoke config of %s", id, fn)
		}
		configs[fn] = c.Properties
	}
	var targets int
	for id, r := range fx.tmpl.ofType("AWS::Events::Rule") {
		for _, x := range asList(r.Properties["Targets"]) {
			target := x.(map[string]any)
			arn, _ := target["Arn"].(map[string]any)["Fn::GetAtt"].([]any)
			if len(arn) != 2 || fx.tmpl.Resources[arn[0].(string)].Type != "AWS::Lambda::Function" {
				continue
			}
			targets++
			fn := arn[0].(string)
			dlq, _ := target["DeadLetterConfig"].(map[string]any)
			if dlq == nil {
				t.Errorf("rule %s: target %s has no DeadLetterConfig", id, fn)
				continue
			}
			c, ok := configs[fn]
			if !ok {
				t.Errorf("rule %s: its function %s has no async invoke config: a failed tick is described nowhere", id, fn)
				continue
			}
			assertProps(t, fn+" async invoke config", c, map[string]any{
				"MaximumRetryAttempts":     float64(tickerRetryAttempts),
				"MaximumEventAgeInSeconds": tickerMaxEventAge.Seconds(),
				"DestinationConfig":        map[string]any{"OnFailure": map[string]any{"Destination": dlq["Arn"]}},
			})
		}
	}
	if targets < 5 {
		t.Errorf("%d scheduled functions, want at least 5 (2 tickers, join, detect, statuscodes)", targets)
	}
}

// TestDeployDocsListWhatDestroyKeeps: docs/deploy.md's paragraph on what
// `cdk destroy` keeps names every retained stream (by its construct id,
// `Events`) and bucket besides the tables and failure queues it lists by
// kind: what it leaves goes on billing, and a user reads that paragraph to
// know what to delete by hand.
func TestDeployDocsListWhatDestroyKeeps(t *testing.T) {
	raw, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, _ := strings.Cut(string(raw), "**What `cdk destroy` removes and what it keeps.**")
	para, _, _ = strings.Cut(para, "\n\n")
	if para == "" {
		t.Fatal("docs/deploy.md has no paragraph on what `cdk destroy` removes and what it keeps")
	}
	s := fx.stack
	for _, c := range *s.Stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		var kind, id string
		switch v := c.(type) {
		case awskinesis.Stream:
			kind, id = "stream", logicalID(s.Stack, v)
		case awss3.Bucket:
			kind, id = "bucket", logicalID(s.Stack, v)
		default:
			continue
		}
		if fx.tmpl.Resources[id].DeletionPolicy != "Retain" {
			continue
		}
		name := *c.Node().Id()
		if kind == "bucket" {
			name = strings.ToLower(*c.Node().Scope().Node().Id()) + " bucket"
		} else {
			name = "`" + name + "`"
		}
		if !strings.Contains(para, name) {
			t.Errorf("docs/deploy.md does not say that cdk destroy keeps the %s %s (%s)", kind, name, id)
		}
	}
}

// grantSet is the "action resource" grants of role, as grants lists them.
func grantSet(roleID string) []string {
	var out []string
	for g := range fx.tmpl.grants(roleID) {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// on lists "action resource" for each action.
func on(resource string, actions ...string) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		out = append(out, a+" "+resource)
	}
	return out
}

// TestLeastPrivilege: each function's role holds exactly the calls its
// code makes (the packages' client interfaces, named next to each grant)
// plus what Lambda needs to run its mappings and destinations (the
// AWSLambdaKinesisExecutionRole / DynamoDB / SQS sets, scoped to the one
// stream or queue; sqs:SendMessage to the on-failure queue). No role
// anywhere has a wildcard action. Ingest is not listed: its wiring is
// another change's (it holds kinesis:PutRecords, PutRecord and ListShards,
// of which it calls PutRecords only).
func TestLeastPrivilege(t *testing.T) {
	s := fx.stack
	arn := func(c any) string {
		switch v := c.(type) {
		case awskinesis.IStream:
			return logicalID(s.Stack, v) + ".Arn"
		case awsdynamodb.ITable:
			return logicalID(s.Stack, v) + ".Arn"
		}
		panic(fmt.Sprintf("arn of %T", c))
	}
	views, results := arn(s.Pipelines.Views), arn(s.Pipelines.WindowResults)
	events, failures := arn(s.Events), logicalID(s.Stack, s.Quarantine.Failures)+".Arn"
	param := resourceName(s.Stack.Resolve(s.Pipelines.ViewsRegistry.Parameter.ParameterArn()))
	streamOf := func(tbl awsdynamodb.ITable) string { return logicalID(s.Stack, tbl) + ".StreamArn" }
	profiles, tweets, follows := s.Profiles.Table, s.Timelines.Tweets, s.Timelines.Follows

	// What Lambda's pollers and destinations need (granted by CDK's event
	// sources and destinations).
	kinesisMapping := on(events, "kinesis:DescribeStream", "kinesis:DescribeStreamConsumer", "kinesis:DescribeStreamSummary",
		"kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards", "kinesis:ListStreams", "kinesis:SubscribeToShard")
	ddbMapping := func(tables ...awsdynamodb.ITable) []string {
		out := []string{"dynamodb:ListStreams *"}
		for _, tbl := range tables {
			out = append(out, on(streamOf(tbl), "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")...)
		}
		return out
	}
	sqsMapping := func(q string) []string {
		return on(q, "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage")
	}
	sendTo := func(q string) []string { return on(q, "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage") }
	windows := join(
		on(views, "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"),
		on(views+"-v*", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"),
		on(views+"/index/open", "dynamodb:Query"),
		on(views+"-v*/index/open", "dynamodb:Query"),
		on(results, "kinesis:PutRecords"),
		on(param, "ssm:GetParameter"),
	)
	tasks, tasksFifo := logicalID(s.Stack, s.Work.Tasks)+".Arn", logicalID(s.Stack, s.Work.TasksFifo)+".Arn"
	// Stream consumers set aside what can never succeed (package setaside).
	setAside := on(arn(s.Quarantine.Table), setAsideActions...)
	esEvents, esViews := arn(s.EventSourcing.Events), arn(s.EventSourcing.Views)
	esParam := resourceName(s.Stack.Resolve(s.EventSourcing.ViewsParameter.ParameterArn()))

	tests := []struct {
		name string
		fn   *GoFunction
		want []string
	}{
		{FunctionAggregate, pageviews(s).Aggregate.GoFunction, join(kinesisMapping, sendTo(failures), windows, setAside,
			// Two pipelines: each aggregate reads through its own consumer.
			on(logicalID(s.Stack, pageviews(s).Aggregate.Consumer)+".ConsumerARN", "kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"),
			on(views, "dynamodb:BatchGetItem", "dynamodb:PutItem"), on(views+"-v*", "dynamodb:BatchGetItem", "dynamodb:PutItem"))},
		// The ticker reads the events stream after the aggregate's last
		// record before it advances a shard as idle (package backlog).
		{FunctionTicker, pageviews(s).Ticker, join(windows, sendTo(logicalID(s.Stack, pageviews(s).TickerFailures)+".Arn"),
			on(events, "kinesis:GetShardIterator", "kinesis:GetRecords"))},
		{FunctionQuarantine, s.Quarantine.Function.GoFunction, join(
			sqsMapping(failures),
			on(arn(s.Quarantine.Table), "dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"),
			on(events, "kinesis:GetShardIterator", "kinesis:GetRecords"),
			on(streamOf(profiles), "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
			on(streamOf(tweets), "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
			on(streamOf(follows), "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
			on(streamOf(s.EventSourcing.Events), "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
			on(arn(s.EventSourcing.Stream), "kinesis:GetShardIterator", "kinesis:GetRecords"),
		)},
		{FunctionEnrich, s.Enrichment.Function.GoFunction, join(
			kinesisMapping, sendTo(failures),
			on(logicalID(s.Stack, s.Enrichment.Function.Consumer)+".ConsumerARN", "kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"),
			on(arn(s.Enrichment.Enriched), "kinesis:PutRecords"),
			on(arn(s.Enrichment.JoinTable), "dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"),
			setAside,
		)},
		{FunctionCDC, s.Profiles.Function.GoFunction, join(ddbMapping(profiles), sendTo(failures), on(events, "kinesis:PutRecords"), setAside)},
		{FunctionTimeline, s.Timelines.Function.GoFunction, join(
			ddbMapping(tweets, follows), sendTo(failures),
			on(arn(tweets), "dynamodb:GetItem", "dynamodb:Query"),
			on(arn(follows), "dynamodb:GetItem"),
			on(arn(follows)+"/index/followers", "dynamodb:Query"),
			on(arn(s.Timelines.View), "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"),
			on(arn(s.Timelines.FanOut), "dynamodb:GetItem", "dynamodb:UpdateItem"),
			setAside,
		)},
		{FunctionWorker, s.Work.Worker.GoFunction, join(
			sqsMapping(tasks), sqsMapping(tasksFifo),
			on(arn(s.Work.Idempotency), idempotencyTableActions...),
			on(arn(s.Work.Results), resultsTableActions...),
			on(logicalID(s.Stack, s.Work.TasksDLQ)+".Arn", deadLetterQueueActions...),
			on(logicalID(s.Stack, s.Work.TasksFifoDLQ)+".Arn", deadLetterQueueActions...),
		)},
		// Event sourcing (packages es, seats, projection; eventsourcing.go):
		// no role may update or delete an event.
		{FunctionCommands, s.EventSourcing.CommandsFn, join(
			on(esEvents, "dynamodb:PutItem", "dynamodb:Query"),
			on(arn(s.EventSourcing.Snapshots), "dynamodb:GetItem", "dynamodb:PutItem"),
			on(arn(s.EventSourcing.Commands), "dynamodb:GetItem", "dynamodb:PutItem"),
			on(esViews, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
			on(esViews+"-v*", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
			on(esViews+"/index/byDay", "dynamodb:Query"),
			on(esViews+"-v*/index/byDay", "dynamodb:Query"),
			on(esParam, "ssm:GetParameter"),
		)},
		{FunctionPublish, s.EventSourcing.Publish.GoFunction, join(
			ddbMapping(s.EventSourcing.Events), sendTo(failures), on(arn(s.EventSourcing.Stream), "kinesis:PutRecords"), setAside,
		)},
		{FunctionProject, s.EventSourcing.Project.GoFunction, join(
			on(arn(s.EventSourcing.Stream), "kinesis:DescribeStream", "kinesis:DescribeStreamConsumer", "kinesis:DescribeStreamSummary",
				"kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards", "kinesis:ListStreams", "kinesis:SubscribeToShard"),
			sendTo(failures),
			on(esViews, "dynamodb:PutItem", "dynamodb:UpdateItem"),
			on(esViews+"-v*", "dynamodb:PutItem", "dynamodb:UpdateItem"),
			on(esEvents, "dynamodb:Query"),
			on(esParam, "ssm:GetParameter"),
			setAside,
		)},
		{FunctionSnapshot, s.Snapshot.Function, join(
			on(arn(profiles), "dynamodb:DescribeTable", "dynamodb:Scan"),
			on(streamOf(profiles), "dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
			on(events, "kinesis:PutRecords"),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := logicalID(s.Stack, tt.fn.LogGroup) + ".Arn"
			want := map[string]bool{"logs:CreateLogStream " + logs: true, "logs:PutLogEvents " + logs: true}
			for _, g := range tt.want {
				want[g] = true
			}
			got := fx.tmpl.grants(logicalID(s.Stack, tt.fn.Role))
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
	for roleID := range fx.tmpl.ofType("AWS::IAM::Role") {
		for _, g := range grantSet(roleID) {
			if action, _, _ := strings.Cut(g, " "); strings.Contains(action, "*") {
				t.Errorf("role %s has wildcard action %s", roleID, g)
			}
		}
	}
}

// join concatenates lists.
func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestGrantFailedRangeReadsIsGeneric: the reader of failed ranges may read
// back every stream whose mapping reports to the failures queue — directly
// or through a fan-out consumer, Kinesis or DynamoDB — and nothing else.
func TestGrantFailedRangeReadsIsGeneric(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Ranges"), nil)
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	other := NewQueueWithDLQ(stack, "Other", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	stream := func(id string) awskinesis.Stream {
		return awskinesis.NewStream(stack, jsii.String(id), &awskinesis.StreamProps{ShardCount: jsii.Number(1)})
	}
	direct, elsewhere, fanned := stream("Direct"), stream("Elsewhere"), stream("Fanned")
	table := awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
	})
	fn := func(name string) GoFunctionProps { return GoFunctionProps{Name: name, AssetDir: assets} }
	NewStreamFunction(stack, "A", StreamFunctionProps{Function: fn(FunctionAggregate), Stream: direct, OnFailure: failures})
	NewStreamFunction(stack, "B", StreamFunctionProps{Function: fn(FunctionEnrich), Stream: elsewhere, OnFailure: other})
	NewStreamFunction(stack, "C", StreamFunctionProps{Function: fn(FunctionCDC), Stream: fanned, OnFailure: failures, EnhancedFanOut: true})
	NewStreamFunction(stack, "D", StreamFunctionProps{Function: fn(FunctionTimeline), Table: table, OnFailure: failures})
	reader := NewQueueFunction(stack, "Reader", QueueFunctionProps{Function: fn(FunctionQuarantine), Queue: failures})
	GrantFailedRangeReads(stack, failures, reader.GoFunction)

	tmpl := templateOf(stack)
	var got []string
	for g := range tmpl.grants(logicalID(stack, reader.Role)) {
		if !strings.HasPrefix(g, "logs:") && !strings.HasPrefix(g, "sqs:") {
			got = append(got, g)
		}
	}
	sort.Strings(got)
	want := join(
		on(logicalID(stack, direct)+".Arn", "kinesis:GetRecords", "kinesis:GetShardIterator"),
		on(logicalID(stack, fanned)+".Arn", "kinesis:GetRecords", "kinesis:GetShardIterator"),
		on(logicalID(stack, table)+".StreamArn", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
	)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reader grants\n %v\nwant\n %v\n(nothing on %s, whose failures go elsewhere)", got, want, logicalID(stack, elsewhere))
	}
}

// TestNoReservedConcurrencyByDefault: reserved concurrency takes from the
// account's pool (and fails to deploy on a new account's small one), so
// none is set unless asked for.
func TestNoReservedConcurrencyByDefault(t *testing.T) {
	for id, fn := range fx.tmpl.ofType("AWS::Lambda::Function") {
		if v, ok := fn.Properties["ReservedConcurrentExecutions"]; ok {
			t.Errorf("function %s has ReservedConcurrentExecutions %v by default", id, v)
		}
	}
	// -c tributary:reservedConcurrency.ingest= (empty) is unset, as every
	// other key's empty value is, not a reserved concurrency of 0.
	app := newTestApp(t.TempDir(), map[string]any{ContextReservedConcurrencyPrefix + FunctionIngest: ""})
	s, err := OpsSettingsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := s.ReservedConcurrency[FunctionIngest]; ok {
		t.Errorf("an empty %s%s gives reserved concurrency %d, want none", ContextReservedConcurrencyPrefix, FunctionIngest, n)
	}
}

// TestOperationsFromContext: every operational setting follows its context
// value, as numbers (cdk.json) or strings (-c key=value): settingsVariant's
// alarm email, events retention (72), reserved concurrency (aggregate 10,
// worker "10") and errors and iterator age alarm settings.
func TestOperationsFromContext(t *testing.T) {
	v := settingsVariant.get(t)
	s, tmpl := v.stack, v.tmpl

	subs := tmpl.ofType("AWS::SNS::Subscription")
	if len(subs) != 1 {
		t.Fatalf("%d subscriptions, want 1", len(subs))
	}
	for id, sub := range subs {
		assertProps(t, id, sub.Properties, map[string]any{
			"Protocol": "email", "Endpoint": "ops@example.com", "TopicArn": ref(logicalID(s.Stack, s.Ops.Topic)),
		})
	}
	if got := tmpl.Resources[logicalID(s.Stack, s.Events)].Properties["RetentionPeriodHours"]; got != 72.0 {
		t.Errorf("events RetentionPeriodHours = %v, want 72", got)
	}
	// Every function of a name gets its reserved concurrency (the
	// variant has two join functions).
	reserved := map[string]float64{FunctionAggregate: 10, FunctionWorker: 10}
	named := map[string]bool{}
	for id, fn := range tmpl.ofType("AWS::Lambda::Function") {
		name, _ := fn.Metadata[FunctionMetadataKey].(string)
		named[name] = true
		got, ok := fn.Properties["ReservedConcurrentExecutions"]
		if w, want := reserved[name]; want != ok || (ok && got != w) {
			t.Errorf("%s (%s) ReservedConcurrentExecutions = %v (set %v), want %v (set %v)", name, id, got, ok, w, want)
		}
	}
	for _, name := range FunctionNames {
		if !named[name] {
			t.Errorf("no function %s", name)
		}
	}
	for _, a := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		p := a.Properties
		switch p["MetricName"] {
		case "Errors":
			assertProps(t, "errors alarm", p, map[string]any{"Threshold": 3.0, "Period": 300.0, "EvaluationPeriods": 1.0})
		case "IteratorAge":
			assertProps(t, "iterator age alarm", p, map[string]any{"Threshold": 300000.0, "Period": 120.0, "EvaluationPeriods": 5.0, "DatapointsToAlarm": 5.0})
		case "Throttles":
			if p["Namespace"] == "AWS/Lambda" {
				assertProps(t, "throttles alarm", p, map[string]any{"Threshold": 1.0, "Period": 300.0})
			}
		}
	}
}

// TestOpsSettingsRejects: a wrong operational setting stops synthesis,
// naming the context key and what it wants.
func TestOpsSettingsRejects(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	tests := []struct {
		name    string
		context map[string]any
		want    string
	}{
		{"retention below a day", map[string]any{ContextEventsRetentionHours: 12.0},
			"context tributary:eventsRetentionHours: 12 is not a whole number between 24 and 8760"},
		{"retention not a number", map[string]any{ContextEventsRetentionHours: "a week"},
			`context tributary:eventsRetentionHours: "a week" is not a number`},
		{"not an email", map[string]any{ContextAlarmEmail: "ops"}, `context tributary:alarmEmail: "ops" is not an email address`},
		{"unknown function", map[string]any{"tributary:reservedConcurrency.agregate": 5.0},
			"context tributary:reservedConcurrency.agregate: unknown key"},
		{"zero concurrency", map[string]any{"tributary:reservedConcurrency.aggregate": 0.0},
			"context tributary:reservedConcurrency.aggregate: 0 would stop aggregate from ever running"},
		{"zero concurrency as a string", map[string]any{"tributary:reservedConcurrency.ingest": "0"},
			"context tributary:reservedConcurrency.ingest: 0 would stop ingest from ever running"},
		{"fractional concurrency", map[string]any{"tributary:reservedConcurrency.aggregate": "2.5"},
			"context tributary:reservedConcurrency.aggregate: 2.5 is not a whole number"},
		{"concurrency below an SQS mapping's maximum", map[string]any{"tributary:reservedConcurrency.quarantine": 1.0},
			"context tributary:reservedConcurrency.quarantine: 1 is below the MaximumConcurrency 2 of its SQS mapping"},
		{"negative threshold", map[string]any{"tributary:alarm.errors.threshold": -1.0},
			"context tributary:alarm.errors.threshold: -1 is not a number of at least 0"},
		{"zero threshold", map[string]any{"tributary:alarm.queueDepth.threshold": 0.0},
			"context tributary:alarm.queueDepth.threshold: 0 would put the alarm in ALARM at every data point"},
		{"zero threshold as a string", map[string]any{"tributary:alarm.errors.threshold": "0"},
			"context tributary:alarm.errors.threshold: 0 would put the alarm in ALARM"},
		{"percentage above 100", map[string]any{"tributary:alarm.lateDroppedPercent.threshold": 150.0},
			"context tributary:alarm.lateDroppedPercent.threshold: 150 is above 100"},
		{"iterator age past any record's age", map[string]any{"tributary:alarm.iteratorAge.threshold": 1e9},
			"context tributary:alarm.iteratorAge.threshold: 1000000000 is above 604800000"},
		{"iterator age past a consumer's maximum record age", map[string]any{"tributary:alarm.iteratorAge.threshold": 3600000.0},
			"is not below the MaximumRecordAge of"},
		{"period off the metrics' minute", map[string]any{"tributary:alarm.errors.periodSeconds": 90.0},
			"context tributary:alarm.errors.periodSeconds: 90 is not a multiple of 60"},
		{"looking back more than a day in periods under an hour", map[string]any{"tributary:alarm.errors.periodSeconds": 1800.0, "tributary:alarm.errors.evaluationPeriods": 49.0},
			"context tributary:alarm.errors.*: 49 periods of 30m0s look back more than a day, which CloudWatch refuses for periods under an hour"},
		{"looking back more than a week in hourly periods", map[string]any{"tributary:alarm.errors.periodSeconds": 3600.0, "tributary:alarm.errors.evaluationPeriods": 169.0},
			"context tributary:alarm.errors.*: 169 periods of 1h0m0s look back more than 7 days, which CloudWatch refuses"},
		{"unknown alarm kind", map[string]any{"tributary:alarm.eror.threshold": 1.0},
			"context tributary:alarm.eror.threshold: unknown key"},
		{"unknown alarm setting", map[string]any{"tributary:alarm.errors.limit": 1.0},
			"context tributary:alarm.errors.limit: unknown key"},
		{"misspelt flush interval", map[string]any{"tributary:flushIntervalSecond": 60.0},
			"context tributary:flushIntervalSecond: unknown key; did you mean tributary:flushIntervalSeconds?"},
		{"two misspelt keys", map[string]any{"tributary:flushIntervalSecond": 60.0, "tributary:eventRetentionHours": 24.0},
			"context tributary:eventRetentionHours, tributary:flushIntervalSecond: unknown key; tributary:eventRetentionHours: did you mean tributary:eventsRetentionHours?; tributary:flushIntervalSecond: did you mean tributary:flushIntervalSeconds?"},
		{"misspelt retention", map[string]any{"tributary:eventRetentionHours": 24.0},
			"context tributary:eventRetentionHours: unknown key"},
		{"key in another case", map[string]any{"Tributary:alarmEmail": "ops@example.com"},
			"context Tributary:alarmEmail: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := map[string]any{ContextAssetDir: assets}
			for k, v := range tt.context {
				ctx[k] = v
			}
			_, err := NewTributaryStack(newTestApp(t.TempDir(), ctx), StackID, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewTributaryStack error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestErrorsThresholdWithinTheTickersReach: a pipeline's ticker runs only
// on its schedule, every minute, each tick tried at most 3 times (once and
// 2 retries) and run up to 10 minutes late, so one period of P seconds
// sees at most 3 x ((P+600)/60 + 1) of its errors: 48 in 5 minutes, 36 in
// one. An errors threshold above that would leave every ticker's errors
// alarm unable to fire, so synth stops naming the key and the ticker; a
// threshold at the bound synthesizes. One case builds a whole stack (synth
// stops); the stack of threePipelinesVariant is the one at the bound
// (synth goes on: its errors alarms carry it); the others check the
// settings the context gives against the shared fixture's tickers, as
// synth does, without building a stack each (seconds of jsii apiece).
func TestErrorsThresholdWithinTheTickersReach(t *testing.T) {
	t.Run("at the bound of 5 minutes, a whole stack", func(t *testing.T) {
		tmpl := threePipelinesVariant.get(t).tmpl
		n := 0
		for id, r := range tmpl.ofType("AWS::CloudWatch::Alarm") {
			if !strings.Contains(id, "ErrorsAlarm") {
				continue
			}
			n++
			if p := r.Properties; p["Threshold"] != 48.0 || p["Period"] != 300.0 {
				t.Errorf("%s: threshold %v over %v s, want 48 over 300 s", id, p["Threshold"], p["Period"])
			}
		}
		if n == 0 {
			t.Error("the stack has no errors alarm")
		}
	})
	tests := []struct {
		name      string
		threshold any
		period    float64
		want      string // "" if synth succeeds
		synth     bool   // build a whole stack with it
	}{
		{"one above it", 49.0, 300, "context tributary:alarm.errors.threshold: 49 is above 48, the most errors ticker[", true},
		{"far above it, as a string", "1e308", 300, "context tributary:alarm.errors.threshold: 1e+308 is above 48", false},
		{"at the bound of a minute", 36.0, 60, "", false},
		{"a fraction above it", 36.5, 60, "36.5 is above 36, the most errors ticker[", false},
		{"a day's period allows more", 4353.0, 86400, "", false},
		{"a day's period, one above", 4354.0, 86400, "4354 is above 4353, the most errors ticker[", false},
	}
	assets := t.TempDir()
	writeDummyAssets(assets)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := map[string]any{ContextAssetDir: assets,
				"tributary:alarm.errors.threshold": tt.threshold, "tributary:alarm.errors.periodSeconds": tt.period}
			app := newTestApp(t.TempDir(), ctx)
			var err error
			if tt.synth {
				_, err = NewTributaryStack(app, StackID, nil)
			} else {
				settings, serr := OpsSettingsFromContext(app.Node())
				if serr != nil {
					t.Fatalf("OpsSettingsFromContext: %v", serr)
				}
				err = checkErrorsThreshold(fx.stack.Stack, settings.Alarms)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("threshold %v over %v s: %v, want it to synthesize", tt.threshold, tt.period, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("threshold %v over %v s: %v, want synth stopped with an error containing %q", tt.threshold, tt.period, err, tt.want)
			}
		})
	}
}

// TestAlarmsLookBackAsFarAsCloudWatchAllows: CloudWatch lets an alarm
// look back a day over periods under an hour and 7 days over hourly or
// longer ones; a range within that synthesizes, with the alarms' period
// and evaluation count as asked.
func TestAlarmsLookBackAsFarAsCloudWatchAllows(t *testing.T) {
	tests := []struct{ period, evals float64 }{
		{1800, 48},  // a day of half hours
		{3600, 48},  // two days of hours
		{3600, 168}, // a week of hours
		{86400, 7},  // a week of days
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v x %v s", tt.evals, tt.period), func(t *testing.T) {
			app := newTestApp(t.TempDir(), map[string]any{
				"tributary:alarm.throttles.periodSeconds": tt.period, "tributary:alarm.throttles.evaluationPeriods": tt.evals})
			s, err := OpsSettingsFromContext(app.Node())
			if err != nil {
				t.Fatalf("OpsSettingsFromContext: %v", err)
			}
			got := s.Alarms[AlarmThrottles]
			if got.Period.Seconds() != tt.period || float64(got.EvaluationPeriods) != tt.evals {
				t.Errorf("throttles alarm: %v x %d, want %v x %v s", got.Period, got.EvaluationPeriods, tt.evals, tt.period)
			}
		})
	}
}

// TestEveryContextKeyIsKnown: each context key the package declares (a
// Context... constant of the package's source) is one unknownContextKeys
// accepts, so that a new setting cannot stop synth as a misspelt key, and
// has a row in docs/configuration.md.
func TestEveryContextKeyIsKnown(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^\s*Context\w+\s*=\s*"(tributary:[^"]*)"`)
	var keys int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			key := m[1]
			keys++
			if key == ContextAlarmPrefix || key == ContextReservedConcurrencyPrefix {
				continue
			}
			if !slices.Contains(contextKeys, key) {
				t.Errorf("%s declares context key %s, which is not in contextKeys: setting it would stop synth as an unknown key", f, key)
			}
			if !strings.Contains(string(conf), "`"+key+"`") {
				t.Errorf("docs/configuration.md does not list context key %s (%s)", key, f)
			}
		}
	}
	if keys != len(contextKeys)+2 {
		t.Errorf("%d context keys declared, contextKeys has %d (and the 2 prefixes)", keys, len(contextKeys))
	}
}

// readmeRow is the table row of context key in docs/deploy.md (a line
// starting with "| `key` |"), or "". The name is from when the table was
// in the README.
func readmeRow(readme, key string) string {
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| `"+key+"` |") {
			return line
		}
	}
	return ""
}

// TestREADMEListsEveryContextKey: the table under "Alarms, retention and
// what `cdk destroy` keeps" (docs/deploy.md, once the README's deploy
// section) has a row for every operational context key, with the default
// the code uses.
func TestREADMEListsEveryContextKey(t *testing.T) {
	raw, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	rows := map[string]string{
		ContextAlarmEmail:                               "none",
		ContextEventsRetentionHours:                     fmt.Sprint(DefaultEventsRetention.Hours()),
		ContextReservedConcurrencyPrefix + "<function>": "none",
	}
	for _, k := range AlarmKinds {
		rows[ContextAlarmPrefix+string(k.Kind)+".threshold"] = fmt.Sprintf("%v per %v s × %d",
			k.Default.Threshold, k.Default.Period.Seconds(), k.Default.EvaluationPeriods)
	}
	for key, def := range rows {
		row := readmeRow(readme, key)
		if row == "" {
			t.Errorf("docs/deploy.md has no table row for %s", key)
			continue
		}
		if cells := strings.Split(row, "|"); len(cells) < 4 || strings.TrimSpace(cells[2]) != def {
			t.Errorf("docs/deploy.md row %q: default cell, want %q", row, def)
		}
	}
}

// TestDocsCountWhatTheTemplateHas: the figures docs/ quote from the
// template are the template's: the alarms docs/cost.md prices, and the
// flush interval default docs/configuration.md gives.
func TestDocsCountWhatTheTemplateHas(t *testing.T) {
	cost, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\| CloudWatch \| (\d+) alarms`).FindSubmatch(cost)
	if m == nil {
		t.Fatal("docs/cost.md has no CloudWatch row counting alarms")
	}
	if got, want := string(m[1]), fmt.Sprint(len(fx.tmpl.ofType("AWS::CloudWatch::Alarm"))); got != want {
		t.Errorf("docs/cost.md prices %s alarms; the template has %s", got, want)
	}
	// The other counts the month is priced from: shards of every stream,
	// the events stream's consumer-shards, dashboards and top-keys rules.
	var shards, eventShards float64
	for id, r := range fx.tmpl.ofType("AWS::Kinesis::Stream") {
		n, _ := r.Properties["ShardCount"].(float64)
		shards += n
		if id == logicalID(fx.stack.Stack, fx.stack.Events) {
			eventShards = n
		}
	}
	consumerShards := float64(len(fx.tmpl.ofType("AWS::Kinesis::StreamConsumer"))) * eventShards
	for _, c := range []struct {
		re   string
		want float64
	}{
		{`\| Kinesis shards \| (\d+) shards`, shards},
		{`\((\d+) shards, the events stream's retention`, shards},
		{`(\d+) consumer-shards with the archive's`, consumerShards},
		{`(\d+) dashboards \(one per pipeline file`, float64(len(fx.tmpl.ofType("AWS::CloudWatch::Dashboard")))},
		{`(\d+) Contributor Insights rules`, float64(len(fx.tmpl.ofType("AWS::CloudWatch::InsightRule")))},
	} {
		m := regexp.MustCompile(c.re).FindSubmatch(cost)
		if m == nil {
			t.Errorf("docs/cost.md has nothing matching %s", c.re)
			continue
		}
		if got := string(m[1]); got != fmt.Sprint(c.want) {
			t.Errorf("docs/cost.md: %q says %s; the template has %v", m[0], got, c.want)
		}
	}
	conf, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := readmeRow(string(conf), ContextFlushInterval)
	if cells := strings.Split(row, "|"); len(cells) < 4 || strings.TrimSpace(cells[2]) != fmt.Sprint(DefaultFlushInterval.Seconds()) {
		t.Errorf("docs/configuration.md row for %s: %q, want the default %v", ContextFlushInterval, row, DefaultFlushInterval.Seconds())
	}
}
