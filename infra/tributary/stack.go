package tributary

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
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
	// its partial aggregates: above 0 (DefaultFlushInterval unless set) the
	// Kinesis mapping gets a tumbling window of that length (up to 900) and
	// Lambda carries the partials between invocations, so that writes follow
	// keys x windows per interval instead of per batch; 0 writes once per
	// batch (results sooner, several times the write units: docs/cost.md,
	// "What it costs").
	ContextFlushInterval = "tributary:flushIntervalSeconds"
	// ContextViewsWriteCapacity makes the pipelines' views table
	// provisioned: that many write capacity units at least, scaled by
	// Application Auto Scaling up to ten times as many to keep utilization
	// at 70 %. Unset or 0: on demand (the default), which costs nothing
	// idle and takes any load at once, at 3.5 times the price of a fully
	// used unit (docs/cost.md: BENCH load_provisioned sizes it for a load).
	ContextViewsWriteCapacity = "tributary:viewsWriteCapacity"
	// ContextViewsReadCapacity is the provisioned views table's read
	// capacity units at least (scaled the same way); unset, a quarter of
	// the write capacity (at least 5). Only with ContextViewsWriteCapacity.
	ContextViewsReadCapacity = "tributary:viewsReadCapacity"
)

// DefaultFlushInterval is the aggregates' write interval when neither props
// nor context set one: per interval, the cheaper path at every load bench/load
// measures (a twentieth of the write units of per batch at the reference
// load), for results up to one interval later. Two minutes, not one: a
// session state and the dedupe claims are written once an interval, so
// one minute costs about half as many write units again (0.407 an event
// against 0.281) for results 30 s sooner on average (60 s at most); five
// minutes saves about a third (0.195) for results up to three minutes
// later again, which a team watching one-minute windows would notice
// (BENCH load_flush, docs/cost.md).
const DefaultFlushInterval = 2 * time.Minute

// FlushPerBatch, as a FlushInterval in props, writes once per batch
// whatever the context says.
const FlushPerBatch time.Duration = -1

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
	FunctionJoin, FunctionDetect, FunctionRules, FunctionCommands, FunctionPublish, FunctionProject, FunctionStatusCodes, FunctionArchive}

// Environment variables of a pipeline's functions (aggregate and ticker),
// read by package pipeline and the functions' mains.
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
// (its itemStore interface: UpdateItem, GetItem, Query, and DeleteItem for
// a window listing whose windows are all published); the index is only
// queried. Keep them in step with state.itemStore: a call missing here works
// locally, where permissions are not enforced, and fails in AWS.
var (
	viewsTableActions = []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:DeleteItem"}
	viewsIndexActions = []string{"dynamodb:Query"}
	// viewsLedgerActions are what aggregate's dedupe ledger (package
	// dedupe) adds, in the same table: a BatchGetItem of the keys' heads,
	// a conditional PutItem of a head, and the PutItems sealing a full
	// one. The ticker reads no records and does without.
	viewsLedgerActions = []string{"dynamodb:BatchGetItem", "dynamodb:PutItem"}
)

// quarantineTableActions are the calls package quarantine makes on the
// quarantine table through package setaside (conditional PutItem of a
// failed range's records; for a message it sets aside, BatchWriteItem of
// its chunks and UpdateItem of its item): it never reads or deletes an
// item.
var quarantineTableActions = []string{"dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"}

// TickerRate is how often a pipeline's ticker runs by default: it advances
// the watermark of shards that saw no records for the pipeline's
// idleTimeout, finalizes the windows the watermark passed and emits their
// results.
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
	// aggregateMemoryMB buys the aggregate function 0.58 of a vCPU: with
	// the default flush interval one instance keeps up with several full
	// shards (BENCH keepup; docs/performance.md gives the last run's figure)
	// for a few dollars a month at 100 events/s (BENCH load lambda_usd).
	aggregateMemoryMB = 1024
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
	// PipelinesDir is the directory of pipeline files. If empty, context
	// ContextPipelinesDir, else DefaultPipelinesDir.
	PipelinesDir string
	// Pipelines, if set, are the pipelines to deploy instead of
	// PipelinesDir's.
	Pipelines []pipeline.File
	// FlushInterval is aggregate's write interval (see ContextFlushInterval);
	// if zero, the context value, else DefaultFlushInterval; FlushPerBatch
	// writes once per batch.
	FlushInterval time.Duration
}

// TributaryStack is the deployable topology, composed of the public
// constructs (NewIngest, NewQuarantine, NewPipelines, NewDashboard,
// NewOperations) and the repository's demonstrations: producers POST
// events to ingest, which puts them on the Events stream; each declared
// pipeline's aggregate runs it over them — event-time windows per key into
// the Views table, final results and corrections onto the WindowResults
// stream — and its ticker, on a schedule, advances idle shards and closes
// their windows; batches that keep failing are described on the Failures
// queue, from which quarantine copies the failed records into its table.
type TributaryStack struct {
	awscdk.Stack

	// Events is the stream ingest writes and every stage reads.
	Events awskinesis.Stream
	// Ingest is the ingest function, its URL and tables (NewIngest).
	Ingest *Ingest
	// Quarantine is the quarantine table, the Failures queue and the
	// quarantine function (NewQuarantine).
	Quarantine *Quarantine
	// Pipelines are the declared windowed pipelines (NewPipelines).
	Pipelines *Pipelines
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
	// Archive keeps the events stream in S3 past its retention (archive.go).
	Archive *Archive
	// Snapshot is the bootstrap that publishes the profiles table's
	// contents as changelog records tied to a stream position.
	Snapshot *Snapshot
	// Joins are the stream–stream joins (joins.go), one per join file of
	// the pipelines directory: search ⋈ click.
	Joins []*StreamJoin
	// Detections are CEP with rules added at runtime (detect.go), one per
	// CEP file of the pipelines directory.
	Detections []*Detection
	// EventSourcing is the event-sourced seat reservations: the event
	// store, its publication and the views (eventsourcing.go).
	EventSourcing *EventSourcing
	// StatusCodes is the example stream function of your own
	// (examples/functions/statuscodes, package handler; streamhandler.go).
	StatusCodes *StreamHandler
	// Dashboards are the dashboard, saved queries and top-keys rule of
	// each pipeline (NewDashboard), in the pipelines' order.
	Dashboards []*Dashboard
	// OperatorDashboards are each join's and detection's dashboard.
	OperatorDashboards []*OperatorDashboard

	AssetDirUsed string
	// TickerFailures receives the failed ticks of the join's and
	// detection's tickers (each pipeline's ticker has its own queue).
	TickerFailures awssqs.Queue
	// Ops is the alarm topic, the alarms and the operational settings
	// (NewOperations).
	Ops *Operations
}

// IngestRoutes is ingest's load policy per function URL path (INGEST_ROUTES):
// "/" buffers in Kinesis, "/orders" pushes back with 429, "/metrics" drops
// under throttling (counted in the Dropped metric).
const IngestRoutes = `{"/": "buffer", "/orders": "backpressure", "/metrics": "drop"}`

// NewTributaryStack creates the Tributary stack in scope. It fails if the
// ingest auth mode is not AWS_IAM or HMAC, if a pipeline file does not
// parse (naming the file and the field), if a function's bootstrap is
// missing from the asset dir, or if an operational context value (alarms,
// retention, reserved concurrency: OpsSettingsFromContext) is wrong.
func NewTributaryStack(scope constructs.Construct, id string, props *TributaryStackProps) (*TributaryStack, error) {
	if props == nil {
		props = &TributaryStackProps{}
	}
	node := constructs.Node_Of(scope)
	assetDir, err := assetDirOf(node, props.AssetDir)
	if err != nil {
		return nil, err
	}
	// A wrong setting is named with the missing binaries, not behind
	// them: a synth without built functions still says what else is wrong.
	ops, opsErr := OpsSettingsFromContext(node)
	if err := errors.Join(opsErr, CheckAssets(assetDir, FunctionNames)); err != nil {
		return nil, err
	}

	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Tributary: serverless stream processing in Go (ingest -> Kinesis -> windowed aggregate -> DynamoDB views and a results stream, failures -> quarantine)")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	s := &TributaryStack{Stack: stack, AssetDirUsed: assetDir}

	s.Events = NewEventsStream(stack, "Events", ops.EventsRetention)
	if s.Ingest, err = NewIngest(stack, "Ingest", IngestProps{AssetDir: assetDir, Events: s.Events, Auth: props.IngestAuth}); err != nil {
		return nil, err
	}
	if s.Quarantine, err = NewQuarantine(stack, "Quarantine", QuarantineProps{AssetDir: assetDir}); err != nil {
		return nil, err
	}
	failures, quarantine := s.Quarantine.Failures, s.Quarantine.Table
	s.Profiles = NewProfilesCDC(stack, "ProfilesCDC", ProfilesCDCProps{
		AssetDir:   assetDir,
		Events:     s.Events,
		OnFailure:  failures,
		Quarantine: quarantine,
	})
	s.Timelines = NewTimelines(stack, "Timelines", TimelinesProps{AssetDir: assetDir, OnFailure: failures, Quarantine: quarantine})
	s.Enrichment = NewEnrichment(stack, "Enrichment", EnrichmentProps{AssetDir: assetDir, Events: s.Events, OnFailure: failures, Quarantine: quarantine})

	if s.Pipelines, err = NewPipelines(stack, "Pipelines", PipelinesProps{
		AssetDir:      assetDir,
		Dir:           props.PipelinesDir,
		Files:         props.Pipelines,
		Events:        s.Events,
		OnFailure:     failures,
		Quarantine:    quarantine,
		FlushInterval: props.FlushInterval,
	}); err != nil {
		return nil, err
	}

	s.addTickerFailures()
	s.addWorker(assetDir)
	s.Snapshot = NewSnapshot(stack, "Snapshot", SnapshotProps{AssetDir: assetDir, Table: s.Profiles.Table, Events: s.Events})
	if s.Archive, err = NewArchive(stack, "Archive", ArchiveProps{AssetDir: assetDir, Events: s.Events, OnFailure: failures}); err != nil {
		return nil, err
	}
	if err := s.addJoinsAndDetection(assetDir); err != nil {
		return nil, err
	}
	s.EventSourcing = NewEventSourcing(stack, "EventSourcing", EventSourcingProps{AssetDir: assetDir, Quarantine: quarantine, OnFailure: failures})
	// A stream function of your own (package handler): examples/functions/statuscodes.
	if s.StatusCodes, err = NewStreamHandler(stack, "StatusCodes", StreamHandlerProps{Name: FunctionStatusCodes, AssetDir: assetDir, Events: s.Events,
		EventTypes: []string{"http_request"}, Quarantine: quarantine, OnFailure: failures, TickFailures: s.TickerFailures}); err != nil {
		return nil, err
	}

	output(stack, "ProfilesTableName", s.Profiles.Table.TableName(), "DynamoDB table of profiles; the cdc function republishes its changes on the events stream")
	output(stack, "EnrichedStreamName", s.Enrichment.Enriched.StreamName(), "Kinesis stream of activity events joined with the profile version they follow")
	output(stack, "SnapshotFunctionName", s.Snapshot.Function.Function.FunctionName(), "invoke with {\"table\": \"<profiles table>\"} to bootstrap a consumer of the changelog")
	output(stack, "TweetsTableName", s.Timelines.Tweets.TableName(), "DynamoDB table of tweets (authorId, tweetId; createdAt, text)")
	output(stack, "FollowsTableName", s.Timelines.Follows.TableName(), "DynamoDB table of follows (followerId, followeeId; index followers)")
	output(stack, "TimelinesTableName", s.Timelines.View.TableName(), "DynamoDB table of timelines (userId, sk = <createdAt>#<len(authorId)>#<authorId>#<tweetId>): tweets joined with follows")

	// Last, over everything above: retention of state, reserved
	// concurrency, quarantine's reads of failed ranges, the alarm topic and
	// every alarm. Add resources before this call.
	if s.Ops, err = NewOperations(stack, OperationsProps{Settings: &ops, Quarantine: s.Quarantine}); err != nil {
		return nil, err
	}
	// What a person opens to see each pipeline, over everything above.
	for _, x := range s.Pipelines.Pipelines {
		d, err := NewDashboard(stack, "Pipeline"+exportedName(x.Name), DashboardProps{Pipeline: x})
		if err != nil {
			return nil, err
		}
		s.Dashboards = append(s.Dashboards, d)
	}
	if err := s.addOperatorDashboards(); err != nil {
		return nil, err
	}
	s.keepDeployedIDs()
	return s, nil
}

// addTickerFailures creates the TickerFailures queue of the join's and the
// detection's tickers: retained, encrypted, TLS only, alarmed on its depth
// like every failure queue (NewOperations). Nothing consumes it.
func (s *TributaryStack) addTickerFailures() {
	s.TickerFailures = NewFailureQueue(s.Stack, "TickerFailures", "the join's and the detection's tickers' asynchronous on-failure destination")
	output(s.Stack, "TickerFailuresQueueUrl", s.TickerFailures.QueueUrl(), "SQS queue of the join's and detection's ticks that failed after their retries")
}

// keepDeployedIDs gives the resources that hold data or that producers and
// operators know by name the logical ids they had before the stack was
// composed of constructs (when they were direct children of the stack), so
// that updating a deployed stack keeps them instead of replacing them: the
// tables and failure queues (retained: a new id would leave the old one
// behind, full, and start an empty one), the stream of results, the views
// parameter (whose value cmd/replay swaps), the ingest signing secret, and
// the ingest function and its URL (a replaced URL is a new address for
// every producer).
func (s *TributaryStack) keepDeployedIDs() {
	pin := func(c constructs.IConstruct, oldPath string) {
		if c == nil {
			return
		}
		el, ok := c.(awscdk.CfnElement)
		if !ok {
			el = c.Node().DefaultChild().(awscdk.CfnElement)
		}
		el.OverrideLogicalId(jsii.String(cdkLogicalID(oldPath)))
	}
	pin(s.Pipelines.Views, "Views/Resource")
	if s.Pipelines.WindowResults != nil {
		pin(s.Pipelines.WindowResults, "WindowResults/Resource")
	}
	pin(s.Pipelines.ViewsRegistry.Parameter, "ViewsRegistry/CurrentViews/Resource")
	pin(s.Quarantine.Table, "Quarantine/Resource")
	pin(s.Quarantine.Failures, "Failures/Resource")
	pin(s.Quarantine.FailuresDLQ, "FailuresDlq/Resource")
	pin(s.Ingest.Requests, "IngestRequests/Resource")
	if s.Ingest.Secret != nil {
		pin(s.Ingest.Secret, "IngestSigningSecret/Resource")
	}
	pin(s.Ingest.Function.Function, "IngestFn/Function/Resource")
	pin(s.Ingest.URL, "IngestFn/Function/FunctionUrl/Resource")
}

// cdkLogicalID is the logical id the CDK gives the resource at path (below
// the stack): the path's components without "Resource" and "Default",
// alphanumerics only, then the first 8 hex digits of the MD5 of the path.
func cdkLogicalID(path string) string {
	parts := strings.Split(path, "/")
	var hashed, human []string
	for _, p := range parts {
		if p == "Default" {
			continue
		}
		hashed = append(hashed, p)
		if p != "Resource" && (len(human) == 0 || human[len(human)-1] != p) {
			human = append(human, p)
		}
	}
	sum := md5.Sum([]byte(strings.Join(hashed, "/")))
	return alarmIDSanitizer.ReplaceAllString(strings.Join(human, ""), "") + strings.ToUpper(hex.EncodeToString(sum[:])[:8])
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
			errs = append(errs, fmt.Errorf("function %s: %s does not exist (build the function binaries first: make functions)", name, p))
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
	n, set, err := contextNumber(node, key, "a number of seconds")
	if err != nil || !set {
		return def, err
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
