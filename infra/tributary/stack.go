package tributary

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// StackID is the id of the Tributary stack; cdk synth writes
// cdk.out/Tributary.template.json.
const StackID = "Tributary"

// Context keys the app reads (cdk.json, or cdk synth -c key=value).
const (
	// ContextAssetDir is the directory holding <name>/bootstrap for every
	// function, relative to infra/; DefaultAssetDir if unset.
	ContextAssetDir = "tributary:assetDir"
	// ContextIngestAuth is how producers authenticate to ingest: AWS_IAM
	// (default) or HMAC (signed requests; see ingest.go).
	ContextIngestAuth = "tributary:ingestAuth"
	// ContextFlushInterval is how often, in whole seconds, aggregate writes
	// its partial aggregates: 0 (default) writes once per batch; above 0 the
	// Kinesis mapping gets a tumbling window of that length (up to 900) and
	// Lambda carries the partials between invocations, so that writes follow
	// keys x windows per interval instead of per batch.
	ContextFlushInterval = "tributary:flushIntervalSeconds"
)

// DefaultAssetDir is where the Makefile puts the linux/arm64 bootstraps.
const DefaultAssetDir = "../.build/lambda"

// Function names: functions/<name>, <assetDir>/<name>/bootstrap and the
// "tributary:function" metadata of the function resource.
const (
	FunctionIngest     = "ingest"
	FunctionAggregate  = "aggregate"
	FunctionQuarantine = "quarantine"
	FunctionTicker     = "ticker"
)

// FunctionNames lists every function the stack deploys.
var FunctionNames = []string{FunctionIngest, FunctionAggregate, FunctionQuarantine, FunctionTicker, FunctionWorker, FunctionCDC, FunctionTimeline, FunctionEnrich, FunctionSnapshot,
	FunctionJoin, FunctionDetect, FunctionRules, FunctionCommands, FunctionPublish, FunctionProject, FunctionStatusCodes}

// Environment variables of the windowed pipeline's functions (aggregate and
// ticker), read by package pipeline and the functions' mains.
const (
	EnvPipelineConfig   = "PIPELINE_CONFIG"
	EnvViewsTableName   = "VIEWS_TABLE_NAME"
	EnvOutputStreamName = "OUTPUT_STREAM_NAME"
)

// The Views table's schema, as package state declares it (state.CreateTable):
// keys pk/sk, and the sparse index of windows not yet final, which the
// ticker queries to finalize them.
const (
	ViewsOpenIndex      = "open"
	viewsTTLAttribute   = "expiresAt"
	maxFlushIntervalSec = 900
)

// viewsActions are the DynamoDB calls package state makes on the Views table
// (its itemStore interface: UpdateItem, GetItem, Query); the index is only
// queried. Keep them in step with state.itemStore: a call missing here works
// locally, where permissions are not enforced, and fails in AWS.
var (
	viewsTableActions = []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"}
	viewsIndexActions = []string{"dynamodb:Query"}
	// viewsLedgerActions are what aggregate's dedupe ledger (package
	// dedupe) adds, in the same table: a BatchGetItem of the keys' heads,
	// a conditional PutItem of a head, and the transaction sealing a full
	// one (authorized by its PutItems). The ticker reads no records and
	// does without.
	viewsLedgerActions = []string{"dynamodb:BatchGetItem", "dynamodb:PutItem"}
)

// quarantineTableActions are the calls package quarantine makes on the
// quarantine table through package setaside (BatchWriteItem of put
// requests, and conditional PutItem of a failed range's records): it never
// reads, updates or deletes an item.
var quarantineTableActions = []string{"dynamodb:PutItem", "dynamodb:BatchWriteItem"}

// TickerRate is how often the ticker runs: it advances the watermark of
// shards that saw no records for the pipeline's idleTimeout, finalizes the
// windows the watermark passed and emits their results.
const TickerRate = time.Minute

// Function timeouts. The Failures queue's visibility timeout follows from
// quarantine's (see VisibilityTimeoutFor).
const (
	ingestTimeout     = 10 * time.Second
	aggregateTimeout  = 30 * time.Second
	quarantineTimeout = 30 * time.Second
	// tickerTimeout stays under TickerRate so that ticks do not overlap.
	tickerTimeout    = 50 * time.Second
	functionMemoryMB = 256
)

// TributaryStackProps configures NewTributaryStack.
type TributaryStackProps struct {
	awscdk.StackProps
	// AssetDir holds <name>/bootstrap for each of FunctionNames. If empty,
	// context ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// IngestAuth is how producers authenticate to ingest. If empty,
	// context ContextIngestAuth, else AWS_IAM.
	IngestAuth IngestAuthMode
	// Pipeline is the windowed pipeline aggregate and ticker run. If nil,
	// DefaultPipeline (pipeline.json).
	Pipeline *PipelineConfig
	// FlushInterval is aggregate's write interval (see ContextFlushInterval);
	// if zero, the context value, else per batch.
	FlushInterval time.Duration
}

// TributaryStack is the deployable topology: producers POST events to ingest,
// which puts them on the Events stream; aggregate runs the declared pipeline
// over them — event-time windows per key into the Views table, final results
// and corrections onto the WindowResults stream — and the ticker, on a
// schedule, advances idle shards and closes their windows; batches that keep
// failing are described on the Failures queue, from which quarantine copies
// the failed records into Quarantine.
type TributaryStack struct {
	awscdk.Stack

	Events awskinesis.Stream
	// Views holds the pipeline's window results (package state's schema).
	Views awsdynamodb.Table
	// WindowResults receives final results and corrections; nil when the
	// pipeline's outputs.stream is false.
	WindowResults awskinesis.Stream
	Quarantine    awsdynamodb.Table
	Failures      awssqs.Queue
	FailuresDLQ   awssqs.IQueue

	Ingest      *GoFunction
	IngestURL   awslambda.FunctionUrl
	Aggregate   *StreamFunction
	Ticker      *GoFunction
	TickerRule  awsevents.Rule
	Quarantiner *QueueFunction
	// Work is the tasks queues, the worker and its tables (worker.go).
	Work *WorkerResources
	// Profiles is the CDC source: a table whose changes the cdc function
	// republishes on the events stream, keyed like the activity events.
	Profiles *ProfilesCDC
	// Timelines is the table–table join: tweets ⋈ follows → timelines.
	Timelines *Timelines
	// Enrichment is the stream–table join: activity on the events stream
	// joined with the profile version before it → the enriched stream.
	Enrichment *Enrichment
	// ViewsRegistry is the SSM parameter naming the current version of the
	// views table, which aggregate and ticker follow and cmd/replay swaps.
	ViewsRegistry *ViewsRegistry
	// Snapshot is the bootstrap that publishes the profiles table's
	// contents as changelog records tied to a stream position.
	Snapshot *Snapshot
	// Joins is the stream–stream join (joins.go): search ⋈ click.
	Joins *StreamJoin
	// Detection is CEP with rules added at runtime (detect.go).
	Detection *Detection
	// EventSourcing is the event-sourced seat reservations: the event
	// store, its publication and the views (eventsourcing.go).
	EventSourcing *EventSourcing
	// StatusCodes is the example stream function of your own
	// (examples/functions/statuscodes, package handler; streamhandler.go).
	StatusCodes *StreamHandler
	// Dashboards are the dashboard, saved queries and top-keys rule of
	// each pipeline (dashboard.go, logs.go).
	Dashboards []*PipelineDashboard

	IngestAuth   IngestAuthMode
	AssetDirUsed string
	// Pipeline is the pipeline aggregate and ticker run.
	Pipeline PipelineConfig
	// FlushInterval is aggregate's mapping tumbling window; 0 per batch.
	FlushInterval time.Duration
	// TickerFailures receives the ticks that failed after their retries
	// (and schedule events EventBridge could not deliver).
	TickerFailures awssqs.Queue
	// Ops is the alarm topic, the alarms and the operational settings
	// (operations.go).
	Ops *Operations

	// IngestRequests holds ingest's Idempotency-Key records; IngestSecret
	// is the signing secret (nil unless IngestAuth is HMAC). See ingest.go.
	IngestRequests awsdynamodb.Table
	IngestSecret   awssecretsmanager.Secret
}

// NewTributaryStack creates the Tributary stack in scope. It fails if the
// ingest auth mode is not AWS_IAM or HMAC, if a function's bootstrap is
// missing from the asset dir, or if an operational context value (alarms,
// retention, reserved concurrency: OpsSettingsFromContext) is wrong.

// IngestRoutes is ingest's load policy per function URL path (INGEST_ROUTES):
// "/" buffers in Kinesis, "/orders" pushes back with 429, "/metrics" drops
// under throttling (counted in the Dropped metric).
const IngestRoutes = `{"/": "buffer", "/orders": "backpressure", "/metrics": "drop"}`

func NewTributaryStack(scope constructs.Construct, id string, props *TributaryStackProps) (*TributaryStack, error) {
	if props == nil {
		props = &TributaryStackProps{}
	}
	node := constructs.Node_Of(scope)
	assetDir := props.AssetDir
	if assetDir == "" {
		v, err := contextString(node, ContextAssetDir, DefaultAssetDir)
		if err != nil {
			return nil, err
		}
		assetDir = v
	}
	authContext, err := contextString(node, ContextIngestAuth, "")
	if err != nil {
		return nil, err
	}
	auth, err := ingestAuth(props.IngestAuth, authContext)
	if err != nil {
		return nil, err
	}
	flush := props.FlushInterval
	if flush == 0 {
		if flush, err = contextSeconds(node, ContextFlushInterval, 0, maxFlushIntervalSec); err != nil {
			return nil, err
		}
	}
	var pipe PipelineConfig
	if props.Pipeline != nil {
		pipe = *props.Pipeline
		if err := pipe.Validate(); err != nil {
			return nil, err
		}
	} else if pipe, err = DefaultPipeline(); err != nil {
		return nil, err
	}
	pipelineEnv, err := pipe.JSON()
	if err != nil {
		return nil, err
	}
	if err := CheckAssets(assetDir, FunctionNames); err != nil {
		return nil, err
	}
	ops, err := OpsSettingsFromContext(node)
	if err != nil {
		return nil, err
	}

	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Tributary: serverless stream processing in Go (ingest -> Kinesis -> windowed aggregate -> DynamoDB views and a results stream, failures -> quarantine)")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	s := &TributaryStack{Stack: stack, IngestAuth: auth, AssetDirUsed: assetDir, Pipeline: pipe, FlushInterval: flush}

	s.Events = awskinesis.NewStream(stack, jsii.String("Events"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(2),
		Encryption: awskinesis.StreamEncryption_MANAGED,
		// Quarantine reads a failed record back from here: the retention
		// is how long a failure can wait for it (ContextEventsRetentionHours).
		RetentionPeriod: awscdk.Duration_Hours(jsii.Number(ops.EventsRetention.Hours())),
	})

	s.Views = awsdynamodb.NewTable(stack, jsii.String("Views"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(viewsTTLAttribute),
	})
	// Sparse: only windows not yet final carry openIn/openUntil, so the
	// ticker's query reads the open windows and nothing else.
	s.Views.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(ViewsOpenIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("openIn"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("openUntil"), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	if pipe.Output().Stream {
		s.WindowResults = awskinesis.NewStream(stack, jsii.String("WindowResults"), &awskinesis.StreamProps{
			StreamMode: awskinesis.StreamMode_PROVISIONED,
			ShardCount: jsii.Number(1),
			Encryption: awskinesis.StreamEncryption_MANAGED,
		})
	}
	windowEnv := func() map[string]*string {
		env := map[string]*string{
			EnvPipelineConfig: jsii.String(pipelineEnv),
			EnvViewsTableName: s.Views.TableName(),
		}
		if s.WindowResults != nil {
			env[EnvOutputStreamName] = s.WindowResults.StreamName()
		}
		return env
	}

	s.Quarantine = awsdynamodb.NewTable(stack, jsii.String("Quarantine"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("source"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sequenceNumber"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String("expiresAt"),
	})

	// Failures is the on-failure destination of every stream mapping and the
	// source of quarantine.
	s.Failures = NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{
		ConsumerTimeout: quarantineTimeout,
		MaxReceiveCount: DefaultQueueMaxReceiveCount,
	})
	s.FailuresDLQ = s.Failures.DeadLetterQueue().Queue
	s.Profiles = NewProfilesCDC(stack, "ProfilesCDC", ProfilesCDCProps{
		AssetDir:   assetDir,
		Events:     s.Events,
		OnFailure:  s.Failures,
		Quarantine: s.Quarantine,
	})
	s.Timelines = NewTimelines(stack, "Timelines", TimelinesProps{AssetDir: assetDir, OnFailure: s.Failures, Quarantine: s.Quarantine})
	s.Enrichment = NewEnrichment(stack, "Enrichment", EnrichmentProps{AssetDir: assetDir, Events: s.Events, OnFailure: s.Failures, Quarantine: s.Quarantine,
		DedupeHorizon: pipe.DedupeHorizon})

	s.addIngest(assetDir)

	s.Aggregate = NewStreamFunction(stack, "AggregateFn", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionAggregate,
			AssetDir:    assetDir,
			Description: fmt.Sprintf("Event-time windowed aggregation of pipeline %s into the views table", pipe.Name),
			Environment: windowEnv(),
			Timeout:     aggregateTimeout,
			MemoryMB:    functionMemoryMB,
		},
		Stream:    s.Events,
		OnFailure: s.Failures,
		SetAside:  s.Quarantine,
		// Large batches: aggregate writes once per (key, window) per batch
		// (or per flush interval), so its cost follows keys x windows, not
		// events.
		BatchSize:         500,
		MaxBatchingWindow: 5 * time.Second,
		StartingPosition:  awslambda.StartingPosition_TRIM_HORIZON,
		RetryAttempts:     3,
		MaxRecordAge:      time.Hour,
		// pipeline.Parse refuses a factor above 1 unless records of one
		// group share a partition key; 1 leaves the property unset.
		ParallelizationFactor: parallelization(pipe.ParallelizationFactor),
		TumblingWindow:        flush,
	})
	s.grantWindows(s.Aggregate.GoFunction)

	s.Ticker = NewGoFunction(stack, "TickerFn", GoFunctionProps{
		Name:        FunctionTicker,
		AssetDir:    assetDir,
		Description: fmt.Sprintf("Advances idle shards of pipeline %s, finalizes its windows and emits their results", pipe.Name),
		Environment: windowEnv(),
		Timeout:     tickerTimeout,
		MemoryMB:    functionMemoryMB,
	})
	s.grantWindows(s.Ticker)
	// Retries, and an on-failure destination that alarms (operations.go).
	s.addTickerFailureDestination()
	s.TickerRule = awsevents.NewRule(stack, jsii.String("TickerSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the ticker: idle shards advance, windows close"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(TickerRate.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Ticker.Function, &awseventstargets.LambdaFunctionProps{
			// EventBridge's own retries (of a throttled invoke) end when the
			// next tick is due.
			MaxEventAge:     seconds(TickerRate),
			RetryAttempts:   jsii.Number(2),
			DeadLetterQueue: s.TickerFailures,
		})},
	})

	s.Quarantiner = NewQueueFunction(stack, "QuarantineFn", QueueFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionQuarantine,
			AssetDir:    assetDir,
			Description: "Copies the records of failed stream batches into the quarantine table",
			Environment: map[string]*string{EnvQuarantineTableName: s.Quarantine.TableName()},
			Timeout:     quarantineTimeout,
			MemoryMB:    functionMemoryMB,
		},
		Queue:          s.Failures,
		BatchSize:      10,
		MaxConcurrency: 2,
	})
	// quarantine only puts items (package setaside's Sink: BatchWriteItem,
	// and a conditional PutItem for the records of failed ranges, which never
	// replaces a record its function set aside); its reads of the failed
	// ranges are granted last, over every stream that reports to Failures
	// (GrantFailedRangeReads in addOperations).
	s.Quarantiner.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(quarantineTableActions...),
		Resources: &[]*string{s.Quarantine.TableArn()},
	}))

	s.addWorker(assetDir)
	s.ViewsRegistry = NewViewsRegistry(stack, "ViewsRegistry", s.Views, s.Aggregate.GoFunction, s.Ticker)
	s.Aggregate.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(viewsLedgerActions...),
		Resources: &[]*string{s.Views.TableArn(),
			awscdk.Fn_Join(jsii.String(""), &[]*string{s.Views.TableArn(), jsii.String("-v*")})},
	}))
	s.Snapshot = NewSnapshot(stack, "Snapshot", SnapshotProps{AssetDir: assetDir, Table: s.Profiles.Table, Events: s.Events})
	if err := s.addJoinsAndDetection(assetDir); err != nil {
		return nil, err
	}
	s.EventSourcing = NewEventSourcing(stack, "EventSourcing", EventSourcingProps{AssetDir: assetDir, Quarantine: s.Quarantine, OnFailure: s.Failures})
	// A stream function of your own (package handler): examples/functions/statuscodes.
	if s.StatusCodes, err = NewStreamHandler(stack, "StatusCodes", StreamHandlerProps{Name: FunctionStatusCodes, AssetDir: assetDir, Events: s.Events,
		EventTypes: []string{"http_request"}, Quarantine: s.Quarantine, OnFailure: s.Failures, TickFailures: s.TickerFailures}); err != nil {
		return nil, err
	}

	output(stack, "IngestUrl", s.IngestURL.Url(), "ingest Function URL: POST events here")
	output(stack, "EventsStreamName", s.Events.StreamName(), "Kinesis stream of ingested events")
	output(stack, "ViewsTableName", s.Views.TableName(), "DynamoDB table of the pipeline's window results (pk = <pipeline>#<key>)")
	if s.WindowResults != nil {
		output(stack, "WindowResultsStreamName", s.WindowResults.StreamName(), "Kinesis stream of final window results and corrections")
	}
	output(stack, "QuarantineTableName", s.Quarantine.TableName(), "DynamoDB table of records from failed batches")
	output(stack, "ProfilesTableName", s.Profiles.Table.TableName(), "DynamoDB table of profiles; the cdc function republishes its changes on the events stream")
	output(stack, "EnrichedStreamName", s.Enrichment.Enriched.StreamName(), "Kinesis stream of activity events joined with the profile version they follow")
	output(stack, "ViewsParameterName", s.ViewsRegistry.Parameter.ParameterName(), "SSM parameter naming the current views table (cmd/replay swaps it)")
	output(stack, "SnapshotFunctionName", s.Snapshot.Function.Function.FunctionName(), "invoke with {\"table\": \"<profiles table>\"} to bootstrap a consumer of the changelog")
	output(stack, "TweetsTableName", s.Timelines.Tweets.TableName(), "DynamoDB table of tweets (authorId, tweetId; createdAt, text)")
	output(stack, "FollowsTableName", s.Timelines.Follows.TableName(), "DynamoDB table of follows (followerId, followeeId; index followers)")
	output(stack, "TimelinesTableName", s.Timelines.View.TableName(), "DynamoDB table of timelines (userId, sk = <createdAt>#<tweetId>): tweets joined with follows")
	output(stack, "FailuresQueueUrl", s.Failures.QueueUrl(), "SQS queue of on-failure records of the stream mappings")
	output(stack, "FailuresDlqUrl", s.FailuresDLQ.QueueUrl(), "SQS dead-letter queue of failure records quarantine could not handle")

	// Last, over everything above: retention of state, reserved
	// concurrency, quarantine's reads of failed ranges, the alarm topic and
	// every alarm. Add resources before this call.
	if s.Ops, err = s.addOperations(ops); err != nil {
		return nil, err
	}
	// What a person opens to see the pipeline, over everything above.
	d, err := NewPipelineDashboard(stack, "Pipeline"+exportedName(pipe.Name), PipelineDashboardProps{
		Pipeline: pipe, Functions: []string{FunctionAggregate, FunctionTicker}})
	if err != nil {
		return nil, err
	}
	s.Dashboards = append(s.Dashboards, d)
	return s, nil
}

// grantWindows lets fn do what the windowed pipeline's functions do: read
// and write the Views table as package state does, query its open-windows
// index, and put results on WindowResults.
func (s *TributaryStack) grantWindows(fn *GoFunction) {
	index := awscdk.Fn_Join(jsii.String(""), &[]*string{s.Views.TableArn(), jsii.String("/index/" + ViewsOpenIndex)})
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(viewsTableActions...),
		Resources: &[]*string{s.Views.TableArn()},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(viewsIndexActions...),
		Resources: &[]*string{index},
	}))
	if s.WindowResults != nil {
		s.WindowResults.Grant(fn.Role, jsii.String("kinesis:PutRecords"))
	}
}

// parallelization is the mapping's ParallelizationFactor for a pipeline's:
// 0 (unset, Lambda's 1) for 0 or 1.
func parallelization(n int) int {
	if n <= 1 {
		return 0
	}
	return n
}

func output(stack awscdk.Stack, id string, value *string, description string) {
	awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{
		Value:       value,
		Description: jsii.String(description),
	})
}

// CheckAssets reports every function in names whose <assetDir>/<name>/bootstrap
// is missing, so that synth fails naming the file instead of deep in the CDK.
func CheckAssets(assetDir string, names []string) error {
	var errs []error
	for _, name := range names {
		p := filepath.Join(assetDir, name, "bootstrap")
		info, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("function %s: %s does not exist (build the function binaries first, see the Makefile)", name, p))
		case err != nil:
			errs = append(errs, fmt.Errorf("function %s: %w", name, err))
		case info.IsDir():
			errs = append(errs, fmt.Errorf("function %s: %s is a directory, want the bootstrap binary", name, p))
		}
	}
	return errors.Join(errs...)
}

// contextSeconds is the context value key as a whole number of seconds
// between 0 and max: a number (cdk.json) or a numeric string (cdk synth -c);
// def if unset.
func contextSeconds(node constructs.Node, key string, def time.Duration, max int) (time.Duration, error) {
	var n float64
	switch v := node.TryGetContext(jsii.String(key)).(type) {
	case nil:
		return def, nil
	case float64:
		n = v
	case string:
		if v == "" {
			return def, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("context %s: %q is not a number of seconds", key, v)
		}
		n = f
	default:
		return 0, fmt.Errorf("context %s: got %v (%T), want a number of seconds", key, v, v)
	}
	if n != float64(int(n)) || n < 0 || n > float64(max) {
		return 0, fmt.Errorf("context %s: %v is not a whole number of seconds between 0 and %d", key, n, max)
	}
	return time.Duration(n) * time.Second, nil
}

// contextString is the string context value key, or def if unset or empty.
func contextString(node constructs.Node, key, def string) (string, error) {
	switch v := node.TryGetContext(jsii.String(key)).(type) {
	case nil:
		return def, nil
	case string:
		if v == "" {
			return def, nil
		}
		return v, nil
	default:
		return "", fmt.Errorf("context %s: got %v (%T), want a string", key, v, v)
	}
}
