package tributary

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// Where the pipeline files are.
const (
	// ContextPipelinesDir is the directory of pipeline files (one
	// <name>.json per aggregation, join or CEP detection, see
	// pipeline.LoadDir), relative to the
	// directory cdk runs in; DefaultPipelinesDir if unset.
	ContextPipelinesDir = "tributary:pipelinesDir"
	// DefaultPipelinesDir is the repository's pipelines/ seen from infra/.
	DefaultPipelinesDir = "../pipelines"
)

// PipelineMetadataKey is the CloudFormation Metadata key on the function
// resources of a pipeline file (an aggregation's aggregate and ticker, a
// join's join function, a CEP file's detect and rules functions) whose
// value is the file's name, next to FunctionMetadataKey. The alarms, dashboards and
// the local runner tell the functions of two pipelines apart by it.
const PipelineMetadataKey = "tributary:pipeline"

// MetricsPipelineDimension is the dimension the functions of a pipeline
// add to their own metrics, next to MetricsDimension (Function): each
// record is published under {Function, Pipeline} only (a rollup under
// {Function} would be billed as a metric more), which is what the alarms
// and dashboards of a pipeline's functions read.
const MetricsPipelineDimension = "Pipeline"

// FanOut says how the pipelines' aggregate functions read the events
// stream.
type FanOut string

const (
	// FanOutAuto, the default: shared throughput for one pipeline,
	// enhanced fan-out for more than one (see PipelinesProps.FanOut).
	FanOutAuto FanOut = ""
	// FanOutShared: every aggregate polls the stream directly and shares
	// its read limits with every other direct consumer.
	FanOutShared FanOut = "shared"
	// FanOutDedicated: every aggregate reads through its own registered
	// stream consumer (enhanced fan-out).
	FanOutDedicated FanOut = "dedicated"
)

// PipelinesProps configures NewPipelines.
type PipelinesProps struct {
	// AssetDir holds aggregate/bootstrap and ticker/bootstrap. If empty,
	// context ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// Dir is the directory of pipeline files, read at synth time with
	// pipeline.LoadDir (a file that does not parse fails synth, naming the
	// file and the field). If empty, context ContextPipelinesDir, else
	// DefaultPipelinesDir. Ignored when Files is set.
	Dir string
	// Files are the pipeline files, already loaded (pipeline.LoadDir, or
	// pipeline.NewFile for a file embedded in the app); if empty, Dir's.
	// NewPipelines deploys the aggregations among them and keeps the join
	// and CEP files in Pipelines.Operators.
	// Each is parsed again from its JSON, which is what the functions run.
	Files []pipeline.File
	// Events is the stream every pipeline reads. Required.
	Events awskinesis.IStream
	// OnFailure receives Lambda's on-failure record of an aggregate batch
	// that exhausted its retries (the Failures queue of NewQuarantine).
	// Required.
	OnFailure awssqs.IQueue
	// Quarantine is the table the aggregates set aside the records that
	// can never succeed in (NewQuarantine's table); none if nil.
	Quarantine awsdynamodb.ITable
	// FlushInterval is every aggregate's write interval (see
	// ContextFlushInterval); if zero, the context value, else
	// DefaultFlushInterval; FlushPerBatch writes once per batch.
	FlushInterval time.Duration
	// FanOut is how the aggregates read Events. With FanOutAuto (the
	// default) one pipeline polls the stream directly, as one consumer
	// among the others; with two or more, each aggregate gets its own
	// enhanced fan-out consumer. A Kinesis shard serves 2 MiB/s and five
	// GetRecords calls per second to all its polling consumers together,
	// and Lambda polls each shard about once a second per mapping: in the
	// repository's stack the join already polls the events stream (enrich
	// and detect have consumers of their own), so every further pipeline
	// polling directly would take read capacity, and add iterator age, from
	// all of them. A dedicated consumer has its own 2 MiB/s per shard,
	// records are pushed (about 70 ms instead of up to a second), and a
	// stream has room for 20 of them; each costs per consumer-shard hour
	// and per GB read.
	FanOut FanOut
	// TickerRate is how often each pipeline's ticker runs; TickerRate (one
	// minute) if zero. Whole minutes.
	TickerRate time.Duration
}

// Pipelines is every declared windowed pipeline (the aggregation files,
// kind "aggregate"), each with functions of its own over shared storage:
//
//   - per pipeline (a child construct named after it): an aggregate
//     function with its own mapping on the events stream, a ticker with its
//     own schedule, retries and failure queue (TickerFailures), both with
//     PIPELINE_CONFIG set to the pipeline's file, compacted;
//   - shared: the Views table (package state's schema; items are keyed by
//     pipeline name, "<pipeline>#<key>", result pages
//     "~page#<pipeline>#…", so pipelines never read or write each other's
//     windows), the SSM parameter naming its current version
//     (ViewsRegistry, which cmd/replay swaps), and the WindowResults stream,
//     if any pipeline's outputs.stream is true (each result names its
//     pipeline).
//
// Isolation: a pipeline's bad value or poison record fails or is set aside
// in its own function only: it has its own batches, retries, bisection and
// iterator position, so another pipeline's results never wait for it or
// see its failure. A bad file fails synth. What pipelines share is
// capacity: the events stream's (see PipelinesProps.FanOut), the Views
// table's (on demand), the quarantine table and the Failures queue
// (each message names the function and mapping it came from).
type Pipelines struct {
	constructs.Construct
	// Pipelines in the order of their files' names.
	Pipelines []*Pipeline
	// Operators are the directory's join and CEP files, which NewPipelines
	// reads (a bad one fails it, naming the file and the field) and leaves
	// to NewStreamJoin and NewDetection (the repository's stack deploys
	// each).
	Operators []pipeline.File
	// Views holds every pipeline's windows.
	Views awsdynamodb.Table
	// ViewsRegistry is the SSM parameter naming the current views table,
	// which every aggregate and ticker follows.
	ViewsRegistry *ViewsRegistry
	// WindowResults receives final results and corrections of the
	// pipelines whose outputs.stream is true; nil if none is.
	WindowResults awskinesis.Stream
	// FlushInterval is the aggregates' mapping tumbling window; 0 per batch.
	FlushInterval time.Duration
	// EnhancedFanOut says whether the aggregates read through consumers of
	// their own.
	EnhancedFanOut bool
}

// Pipeline is one declared pipeline's functions.
type Pipeline struct {
	constructs.Construct
	// Name is the pipeline's name (its file's base name).
	Name string
	// File is the file it was declared in; File.JSON is its PIPELINE_CONFIG.
	File pipeline.File
	// Config is the parsed file.
	Config *pipeline.Config
	// Aggregate reads the events stream and keeps the pipeline's windows.
	Aggregate *StreamFunction
	// Ticker, on TickerRule's schedule, advances idle shards and finalizes
	// the pipeline's windows; its failed ticks go to TickerFailures.
	Ticker         *GoFunction
	TickerRule     awsevents.Rule
	TickerFailures awssqs.Queue
}

// Pipeline returns the pipeline named name, or nil.
func (p *Pipelines) Pipeline(name string) *Pipeline {
	for _, x := range p.Pipelines {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Functions are the aggregate and ticker functions of every pipeline.
func (p *Pipelines) Functions() []*GoFunction {
	var out []*GoFunction
	for _, x := range p.Pipelines {
		out = append(out, x.Aggregate.GoFunction, x.Ticker)
	}
	return out
}

// LoadPipelines reads the pipeline files of props (Files, else Dir, else
// context ContextPipelinesDir under scope, else DefaultPipelinesDir).
func LoadPipelines(scope constructs.Construct, props PipelinesProps) ([]pipeline.File, error) {
	if len(props.Files) > 0 {
		// Parsed again from their JSON, which is what the functions run.
		out := make([]pipeline.File, len(props.Files))
		for i, f := range props.Files {
			var err error
			if out[i], err = pipeline.NewFile(f.Path, f.JSON); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	dir := props.Dir
	if dir == "" {
		var err error
		if dir, err = contextString(constructs.Node_Of(scope), ContextPipelinesDir, DefaultPipelinesDir); err != nil {
			return nil, err
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("context %s: %s is not a directory of pipeline files (relative to infra/; default %s)", ContextPipelinesDir, dir, DefaultPipelinesDir)
		}
	}
	return pipeline.LoadDir(dir)
}

// NewPipelines creates the pipelines of props under scope, in a construct
// id ("Pipelines" in the stack). It fails if a pipeline file does not
// parse (naming the file and the field), if two pipelines' names would
// give their constructs the same id, if a bootstrap is missing from the
// asset dir, or if Events or OnFailure is nil.
func NewPipelines(scope constructs.Construct, id string, props PipelinesProps) (*Pipelines, error) {
	switch {
	case props.Events == nil:
		return nil, fmt.Errorf("pipelines %s: Events is required (the stream they read)", id)
	case props.OnFailure == nil:
		return nil, fmt.Errorf("pipelines %s: OnFailure is required (the queue failed batches are described on)", id)
	}
	all, err := LoadPipelines(scope, props)
	if err != nil {
		return nil, err
	}
	files := pipeline.OfKind(all, pipeline.KindAggregate)
	if len(files) == 0 {
		return nil, fmt.Errorf("pipelines %s: no aggregation file (kind %q) among the %d pipeline files", id, pipeline.KindAggregate, len(all))
	}
	node := constructs.Node_Of(scope)
	assetDir, err := assetDirOf(node, props.AssetDir)
	if err != nil {
		return nil, err
	}
	if err := CheckAssets(assetDir, []string{FunctionAggregate, FunctionTicker}); err != nil {
		return nil, err
	}
	flush := props.FlushInterval
	switch {
	case flush == FlushPerBatch:
		flush = 0
	case flush == 0:
		if flush, err = contextSeconds(node, ContextFlushInterval, DefaultFlushInterval, maxFlushIntervalSec); err != nil {
			return nil, err
		}
	}
	rate := props.TickerRate
	if rate == 0 {
		rate = TickerRate
	}
	if rate%time.Minute != 0 || rate <= 0 {
		return nil, fmt.Errorf("pipelines %s: TickerRate %v is not a whole number of minutes", id, rate)
	}
	var efo bool
	switch props.FanOut {
	case FanOutAuto:
		efo = len(files) > 1
	case FanOutShared:
	case FanOutDedicated:
		efo = true
	default:
		return nil, fmt.Errorf("pipelines %s: FanOut %q: want %q, %q or empty", id, props.FanOut, FanOutShared, FanOutDedicated)
	}
	// Every kind's names become construct ids and output names of one
	// stack (a join's "<Name>Join", a dashboard's "<Name>DashboardName").
	ids := map[string]string{}
	for _, f := range all {
		cid := exportedName(f.Name)
		if other, ok := ids[cid]; ok {
			return nil, fmt.Errorf("%s: name: %q and the pipeline of %s would both be construct %s: rename one", f.Path, f.Name, other, cid)
		}
		ids[cid] = f.Path
	}
	anyStream := false
	for _, f := range files {
		anyStream = anyStream || f.Config.Outputs.Stream
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	p := &Pipelines{Construct: c, FlushInterval: flush, EnhancedFanOut: efo}
	for _, f := range all {
		if f.Kind != pipeline.KindAggregate {
			p.Operators = append(p.Operators, f)
		}
	}
	capacity, err := viewsCapacityOf(node)
	if err != nil {
		return nil, err
	}
	p.Views = newViewsTable(c, "Views", capacity)
	if anyStream {
		p.WindowResults = awskinesis.NewStream(c, jsii.String("WindowResults"), &awskinesis.StreamProps{
			StreamMode: awskinesis.StreamMode_PROVISIONED,
			ShardCount: jsii.Number(1),
			Encryption: awskinesis.StreamEncryption_MANAGED,
		})
	}
	for _, f := range files {
		p.Pipelines = append(p.Pipelines, p.newPipeline(c, f, props, assetDir, rate))
	}
	p.ViewsRegistry = NewViewsRegistry(c, "ViewsRegistry", p.Views, p.Functions()...)

	// Stack outputs (so one NewPipelines per stack): what cmd/results and
	// cmd/replay take, and each pipeline's failed ticks.
	stack := awscdk.Stack_Of(c)
	output(stack, "ViewsTableName", p.Views.TableName(), "DynamoDB table of the pipelines' window results (pk = <pipeline>#<key>, result pages ~page#<pipeline>#<kind>#<bucket>)")
	output(stack, "ViewsParameterName", p.ViewsRegistry.Parameter.ParameterName(), "SSM parameter naming the current views table (cmd/replay swaps it)")
	if p.WindowResults != nil {
		output(stack, "WindowResultsStreamName", p.WindowResults.StreamName(), "Kinesis stream of final window results and corrections")
	}
	for _, x := range p.Pipelines {
		output(stack, exportedName(x.Name)+"TickerFailuresQueueUrl", x.TickerFailures.QueueUrl(),
			fmt.Sprintf("SQS queue of pipeline %s's ticks that failed after their retries (declared in %s)", x.Name, x.File.Path))
	}
	return p, nil
}

// newPipeline creates one pipeline's construct, named after it, with its
// aggregate, ticker, schedule and ticker failure queue.
func (p *Pipelines) newPipeline(scope constructs.Construct, f pipeline.File, props PipelinesProps, assetDir string, rate time.Duration) *Pipeline {
	cfg := f.Config
	c := constructs.NewConstruct(scope, jsii.String(exportedName(cfg.Name)))
	x := &Pipeline{Construct: c, Name: cfg.Name, File: f, Config: cfg}
	env := func() map[string]*string {
		e := map[string]*string{
			EnvPipelineConfig: jsii.String(string(f.JSON)),
			EnvViewsTableName: p.Views.TableName(),
		}
		if cfg.Outputs.Stream {
			e[EnvOutputStreamName] = p.WindowResults.StreamName()
		}
		return e
	}

	x.Aggregate = NewStreamFunction(c, "Aggregate", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionAggregate,
			AssetDir:    assetDir,
			Description: fmt.Sprintf("Event-time windowed aggregation of pipeline %s into the views table", cfg.Name),
			Environment: env(),
			Timeout:     aggregateTimeout,
			MemoryMB:    aggregateMemoryMB,
		},
		Stream:    props.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
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
		ParallelizationFactor: parallelization(cfg.ParallelizationFactor),
		TumblingWindow:        p.FlushInterval,
		EnhancedFanOut:        p.EnhancedFanOut,
	})
	p.grantWindows(x.Aggregate.GoFunction, cfg)
	// A shard's first flush asks Kinesis for the shard's parents, whose
	// carried windows it takes over after a reshard (package aggregate,
	// carry.go): the event source grants the stream's reads, ListShards
	// among them.
	x.Aggregate.Function.AddEnvironment(jsii.String(EnvEventsStreamName), props.Events.StreamName(), nil)
	// The dedupe ledger (package dedupe) lives in the views table too.
	x.Aggregate.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(viewsLedgerActions...),
		Resources: &[]*string{p.Views.TableArn(),
			awscdk.Fn_Join(jsii.String(""), &[]*string{p.Views.TableArn(), jsii.String("-v*")})},
	}))

	x.Ticker = NewGoFunction(c, "Ticker", GoFunctionProps{
		Name:        FunctionTicker,
		AssetDir:    assetDir,
		Description: fmt.Sprintf("Advances idle shards of pipeline %s, finalizes its windows and emits their results", cfg.Name),
		Environment: env(),
		Timeout:     tickerTimeout,
		MemoryMB:    functionMemoryMB,
	})
	p.grantWindows(x.Ticker, cfg)
	// Before it advances an idle shard by the clock, the ticker reads the
	// events stream after the last record the aggregate processed
	// (package backlog): a shard whose records wait for a failing or
	// throttled aggregate is not idle.
	x.Ticker.Function.AddEnvironment(jsii.String(EnvEventsStreamName), props.Events.StreamName(), nil)
	props.Events.Grant(x.Ticker.Role, jsii.String("kinesis:GetShardIterator"), jsii.String("kinesis:GetRecords"))
	if key := props.Events.EncryptionKey(); key != nil {
		key.GrantDecrypt(x.Ticker.Role)
	}
	for _, fn := range []*GoFunction{x.Aggregate.GoFunction, x.Ticker} {
		fn.Function.Node().DefaultChild().(awslambda.CfnFunction).AddMetadata(jsii.String(PipelineMetadataKey), jsii.String(cfg.Name))
	}

	// The ticker's asynchronous invocations (the schedule's) get retries
	// and an on-failure destination of their own: a message there is a
	// tick of this pipeline that failed (its request, error and stack
	// trace) for a person to read. Retained, encrypted, TLS only, and
	// alarmed on its depth like every failure queue.
	x.TickerFailures = NewFailureQueue(c, "TickerFailures", "the ticker's asynchronous on-failure destination")
	x.Ticker.Function.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(tickerRetryAttempts),
		MaxEventAge:   seconds(tickerMaxEventAge),
		OnFailure:     awslambdadestinations.NewSqsDestination(x.TickerFailures),
	})
	x.TickerRule = awsevents.NewRule(c, jsii.String("TickerSchedule"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("Runs the ticker of pipeline %s: idle shards advance, windows close", cfg.Name)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(rate.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(x.Ticker.Function, &awseventstargets.LambdaFunctionProps{
			// EventBridge's own retries (of a throttled invoke) end when the
			// next tick is due.
			MaxEventAge:     seconds(rate),
			RetryAttempts:   jsii.Number(2),
			DeadLetterQueue: x.TickerFailures,
		})},
	})
	return x
}

// grantWindows lets fn do what a pipeline's functions do: read and write
// the Views table as package state does, query its open-windows index, and
// put results on WindowResults if the pipeline outputs to it.
func (p *Pipelines) grantWindows(fn *GoFunction, cfg *pipeline.Config) {
	index := awscdk.Fn_Join(jsii.String(""), &[]*string{p.Views.TableArn(), jsii.String("/index/" + ViewsOpenIndex)})
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(viewsTableActions...),
		Resources: &[]*string{p.Views.TableArn()},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(viewsIndexActions...),
		Resources: &[]*string{index},
	}))
	if cfg.Outputs.Stream {
		p.WindowResults.Grant(fn.Role, jsii.String("kinesis:PutRecords"))
	}
}

// NewViewsTable creates a table with package state's schema (keys pk/sk,
// the sparse open-windows index the tickers query, TTL expiresAt), on
// demand, with point-in-time recovery.
func NewViewsTable(scope constructs.Construct, id string) awsdynamodb.Table {
	return newViewsTable(scope, id, viewsCapacity{})
}

// newViewsTable is NewViewsTable, provisioned at c's capacity and auto
// scaled on utilization when c.write is above 0.
func newViewsTable(scope constructs.Construct, id string, c viewsCapacity) awsdynamodb.Table {
	props := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(viewsTTLAttribute),
	}
	// Sparse: only windows not yet final carry openIn/openUntil, so the
	// ticker's query reads the open windows and nothing else.
	index := &awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(ViewsOpenIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("openIn"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("openUntil"), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	}
	if c.write > 0 {
		props.BillingMode = awsdynamodb.BillingMode_PROVISIONED
		props.WriteCapacity, props.ReadCapacity = jsii.Number(c.write), jsii.Number(c.read)
		index.WriteCapacity, index.ReadCapacity = jsii.Number(viewsIndexCapacity), jsii.Number(viewsIndexCapacity)
	}
	t := awsdynamodb.NewTable(scope, jsii.String(id), props)
	t.AddGlobalSecondaryIndex(index)
	if c.write > 0 {
		scale := func(least int) *awsdynamodb.EnableScalingProps {
			return &awsdynamodb.EnableScalingProps{MinCapacity: jsii.Number(least), MaxCapacity: jsii.Number(min(least*viewsScaleUp, maxViewsCapacity))}
		}
		on := &awsdynamodb.UtilizationScalingProps{TargetUtilizationPercent: jsii.Number(viewsTargetUtilization)}
		t.AutoScaleWriteCapacity(scale(c.write)).ScaleOnUtilization(on)
		t.AutoScaleReadCapacity(scale(c.read)).ScaleOnUtilization(on)
		t.AutoScaleGlobalSecondaryIndexWriteCapacity(jsii.String(ViewsOpenIndex), scale(viewsIndexCapacity)).ScaleOnUtilization(on)
		t.AutoScaleGlobalSecondaryIndexReadCapacity(jsii.String(ViewsOpenIndex), scale(viewsIndexCapacity)).ScaleOnUtilization(on)
	}
	return t
}

// viewsCapacity is the provisioned views table's least capacity units
// (write 0: on demand).
type viewsCapacity struct{ write, read int }

// Bounds on the views table's provisioned capacity: Application Auto
// Scaling keeps utilization at viewsTargetUtilization between the least
// capacity and viewsScaleUp times it (at most DynamoDB's default table
// quota, maxViewsCapacity); the open-windows index (a few keys-only
// entries per keyed state) gets viewsIndexCapacity of each, scaled the same way.
const (
	viewsTargetUtilization = 70
	viewsScaleUp           = 10
	maxViewsCapacity       = 40000
	viewsIndexCapacity     = 5
)

// viewsCapacityOf reads ContextViewsWriteCapacity and
// ContextViewsReadCapacity.
func viewsCapacityOf(node constructs.Node) (viewsCapacity, error) {
	w, err := contextWhole(node, ContextViewsWriteCapacity, 0, 0, maxViewsCapacity)
	if err != nil {
		return viewsCapacity{}, err
	}
	if w == 0 {
		r, set, err := contextNumber(node, ContextViewsReadCapacity, "a number")
		if err != nil {
			return viewsCapacity{}, err
		}
		if set && r != 0 {
			return viewsCapacity{}, fmt.Errorf("context %s: set without %s (the views table is on demand)", ContextViewsReadCapacity, ContextViewsWriteCapacity)
		}
		return viewsCapacity{}, nil
	}
	r, err := contextWhole(node, ContextViewsReadCapacity, max(5, math.Ceil(w/4)), 1, maxViewsCapacity)
	if err != nil {
		return viewsCapacity{}, err
	}
	return viewsCapacity{write: int(w), read: int(r)}, nil
}

// assetDirOf is dir, or context ContextAssetDir, or DefaultAssetDir.
func assetDirOf(node constructs.Node, dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return contextString(node, ContextAssetDir, DefaultAssetDir)
}

// parallelization is the mapping's ParallelizationFactor for a pipeline's:
// 0 (unset, Lambda's 1) for 0 or 1.
func parallelization(n int) int {
	if n <= 1 {
		return 0
	}
	return n
}
