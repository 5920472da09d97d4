package tributary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// The Tributary stack is synthesized once per test binary (jsii startup and
// synthesis take seconds); the tests read its template.
var fx *fixture

// testTmp is the test binary's own directory, removed when it ends; the
// stacks built on first use (variants_test.go) write there.
var testTmp string

type fixture struct {
	stack    *TributaryStack
	tmpl     cfnTemplate
	outdir   string
	nagError []string // unsuppressed AwsSolutions errors
	nagWarn  []string // unsuppressed AwsSolutions warnings
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	defer jsii.Close()
	tmp, err := os.MkdirTemp("", "tributary-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	testTmp = tmp

	assetDir := filepath.Join(tmp, "assets")
	writeDummyAssets(assetDir)
	outdir := filepath.Join(tmp, "cdk.out")
	app := newTestApp(outdir, nil)
	stack, err := NewTributaryStack(app, StackID, &TributaryStackProps{AssetDir: assetDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewTributaryStack:", err)
		return 1
	}
	addNag(app)
	fx = &fixture{stack: stack, outdir: outdir}
	// The nag findings first: Annotations_FromStack always synthesizes the
	// app anew (force), Template_FromStack takes its last synthesis; the
	// other way round the stack is synthesized twice.
	fx.nagError, fx.nagWarn = nagFindings(stack.Stack)
	fx.tmpl = templateOf(stack.Stack)
	return m.Run()
}

// writeDummyAssets gives every function a bootstrap whose content is its
// name, so that a test can tell which directory a function's code came from.
func writeDummyAssets(dir string) {
	for _, name := range FunctionNames {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte("dummy "+name), 0o755); err != nil {
			panic(err)
		}
	}
}

// testEventsStream is an events stream like the stack's (two shards,
// managed encryption), for tests of the constructs that read or write it.
func testEventsStream(stack awscdk.Stack) awskinesis.Stream {
	return awskinesis.NewStream(stack, jsii.String("Events"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(2),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})
}

// newTestApp is an App writing to outdir with cdk.json's context (feature
// flags included, so the template is the one cdk synth writes) plus extra.
func newTestApp(outdir string, extra map[string]any) awscdk.App {
	raw, err := os.ReadFile("../cdk.json")
	if err != nil {
		panic(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		panic(fmt.Sprintf("cdk.json: %v", err))
	}
	// What the cdk CLI adds: the local runner finds a function's staged
	// code by its aws:asset:path metadata.
	cfg.Context["aws:cdk:enable-path-metadata"] = true
	cfg.Context["aws:cdk:enable-asset-metadata"] = true
	// cdk synth fails on an error annotation (a cdk-nag finding); here it
	// stays an annotation, so that the template can still be inspected and
	// the nag test lists the findings.
	cfg.Context["@aws-cdk/core:annotationsInValidationReport"] = false
	// cdk.json's pipelines dir is relative to infra/; tests run in
	// infra/tributary.
	cfg.Context[ContextPipelinesDir] = repoPipelinesDir
	for k, v := range extra {
		cfg.Context[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Context: &cfg.Context, Outdir: jsii.String(outdir)})
}

func addNag(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// nagFindings lists the unsuppressed AwsSolutions errors and warnings.
func nagFindings(stack awscdk.Stack) (errs, warns []string) {
	a := assertions.Annotations_FromStack(stack)
	rule := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, m := range *a.FindError(jsii.String("*"), rule) {
		errs = append(errs, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	for _, m := range *a.FindWarning(jsii.String("*"), rule) {
		warns = append(warns, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	return errs, warns
}

// cfnTemplate is the part of a CloudFormation template the tests read.
type cfnTemplate struct {
	Resources map[string]cfnResource `json:"Resources"`
	Outputs   map[string]struct {
		Value any `json:"Value"`
	} `json:"Outputs"`
}

type cfnResource struct {
	Type                string         `json:"Type"`
	Properties          map[string]any `json:"Properties"`
	Metadata            map[string]any `json:"Metadata"`
	DeletionPolicy      string         `json:"DeletionPolicy"`
	UpdateReplacePolicy string         `json:"UpdateReplacePolicy"`
}

func templateOf(stack awscdk.Stack) cfnTemplate {
	raw, err := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	if err != nil {
		panic(err)
	}
	var t cfnTemplate
	if err := json.Unmarshal(raw, &t); err != nil {
		panic(err)
	}
	return t
}

func (t cfnTemplate) ofType(typ string) map[string]cfnResource {
	out := map[string]cfnResource{}
	for id, r := range t.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// repoPipelinesDir is the pipeline files the repository ships, seen from
// the tests: links to pipelines/ (testdata/shipped-pipelines), so that a
// pipeline you add there (the README's first pipeline) does not change the
// template these tests expect.
const repoPipelinesDir = "../../testdata/shipped-pipelines"

// pageviews is the stack's pageviews pipeline, the one most tests look at.
func pageviews(s *TributaryStack) *Pipeline {
	p := s.Pipelines.Pipeline("pageviews")
	if p == nil {
		panic("the stack has no pipeline pageviews")
	}
	return p
}

// function returns the logical id and resource of the function whose
// "tributary:function" metadata is name; of a pipeline's functions
// (aggregate, ticker), pageviews'.
func (t cfnTemplate) function(tb testing.TB, name string) (string, cfnResource) {
	tb.Helper()
	var ids []string
	for id, r := range t.ofType("AWS::Lambda::Function") {
		if r.Metadata[FunctionMetadataKey] == name {
			ids = append(ids, id)
		}
	}
	if len(ids) > 1 {
		return t.pipelineFunction(tb, name, "pageviews")
	}
	if len(ids) == 0 {
		tb.Fatalf("no AWS::Lambda::Function with Metadata %s=%s", FunctionMetadataKey, name)
	}
	return ids[0], t.Resources[ids[0]]
}

// pipelineFunction returns the function name of pipeline pipe.
func (t cfnTemplate) pipelineFunction(tb testing.TB, name, pipe string) (string, cfnResource) {
	tb.Helper()
	for id, r := range t.ofType("AWS::Lambda::Function") {
		if r.Metadata[FunctionMetadataKey] == name && r.Metadata[PipelineMetadataKey] == pipe {
			return id, r
		}
	}
	tb.Fatalf("no AWS::Lambda::Function with Metadata %s=%s, %s=%s", FunctionMetadataKey, name, PipelineMetadataKey, pipe)
	return "", cfnResource{}
}

// mappingOf returns the event source mapping of the function with logical id fnID.
func (t cfnTemplate) mappingOf(tb testing.TB, fnID string) cfnResource {
	tb.Helper()
	var found []cfnResource
	for _, r := range t.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(r.Properties["FunctionName"], ref(fnID)) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		tb.Fatalf("function %s has %d event source mappings, want 1", fnID, len(found))
	}
	return found[0]
}

// grants lists the "action resource" pairs the IAM policies attached to
// role roleID allow, resources written as "<logicalId>.<attr>", "<logicalId>"
// or the literal string.
func (t cfnTemplate) grants(roleID string) map[string]bool {
	out := map[string]bool{}
	for _, p := range t.ofType("AWS::IAM::Policy") {
		if !slices.ContainsFunc(asList(p.Properties["Roles"]), func(r any) bool { return reflect.DeepEqual(r, ref(roleID)) }) {
			continue
		}
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range asList(doc["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range asList(st["Action"]) {
				for _, r := range asList(st["Resource"]) {
					out[fmt.Sprintf("%s %s", a, resourceName(r))] = true
				}
			}
		}
	}
	return out
}

func resourceName(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case map[string]any:
		if ga, ok := v["Fn::GetAtt"].([]any); ok {
			return fmt.Sprintf("%v.%v", ga[0], ga[1])
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 && j[0] == "" {
			var b strings.Builder
			for _, part := range asList(j[1]) {
				b.WriteString(resourceName(part))
			}
			return b.String()
		}
		if id, ok := v["Ref"]; ok {
			return fmt.Sprint(id)
		}
	}
	raw, _ := json.Marshal(r)
	return string(raw)
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func ref(id string) any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }

// logicalID is the logical id of the L2 construct c's CloudFormation resource.
func logicalID(stack awscdk.Stack, c constructs.IConstruct) string {
	el, ok := c.(awscdk.CfnElement)
	if !ok {
		el = c.Node().DefaultChild().(awscdk.CfnElement)
	}
	// Resolved, so that an overridden id (keepDeployedIDs) is the one seen.
	return stack.Resolve(el.LogicalId()).(string)
}

func assertProps(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if w == nil {
			if ok {
				t.Errorf("%s: %s = %v, want it absent", what, k, g)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			t.Errorf("%s: %s = %s, want %s", what, k, gj, wj)
		}
	}
}

func TestFunctions(t *testing.T) {
	s := fx.stack
	tests := []struct {
		name    string
		fn      *GoFunction
		timeout float64
		env     map[string]any
	}{
		{FunctionIngest, s.Ingest.Function, 10, ingestEnv(s)},
		{FunctionAggregate, pageviews(s).Aggregate.GoFunction, 30, withEvents(s, withQuarantine(s, windowEnv(s)))},
		{FunctionQuarantine, s.Quarantine.Function.GoFunction, 30, map[string]any{"QUARANTINE_TABLE_NAME": ref(logicalID(s.Stack, s.Quarantine.Table))}},
		{FunctionTicker, pageviews(s).Ticker, 50, withEvents(s, windowEnv(s))},
		{FunctionWorker, s.Work.Worker.GoFunction, 60, map[string]any{
			EnvIdempotencyTableName: ref(logicalID(s.Stack, s.Work.Idempotency)),
			EnvResultsTableName:     ref(logicalID(s.Stack, s.Work.Results)),
		}},
		{FunctionCDC, s.Profiles.Function.GoFunction, 30, cdcEnv(s)},
		{FunctionTimeline, s.Timelines.Function.GoFunction, 30, withQuarantine(s, map[string]any{
			EnvTweetsTableName:    ref(logicalID(s.Stack, s.Timelines.Tweets)),
			EnvFollowsTableName:   ref(logicalID(s.Stack, s.Timelines.Follows)),
			EnvFollowersIndexName: "followers",
			EnvTimelinesTableName: ref(logicalID(s.Stack, s.Timelines.View)),
			EnvFanOutTableName:    ref(logicalID(s.Stack, s.Timelines.FanOut)),
		})},
		{FunctionEnrich, s.Enrichment.Function.GoFunction, 30, withQuarantine(s, map[string]any{
			EnvEnrichedStreamName: ref(logicalID(s.Stack, s.Enrichment.Enriched)),
			EnvJoinTableName:      ref(logicalID(s.Stack, s.Enrichment.JoinTable)),
			EnvDedupeHorizon:      "1h",
		})},
		{FunctionSnapshot, s.Snapshot.Function, 900, map[string]any{
			"EVENTS_STREAM_NAME":   ref(logicalID(s.Stack, s.Events)),
			"PROFILES_TABLE_NAME":  ref(logicalID(s.Stack, s.Profiles.Table)),
			"ENTITY_KEY_ATTRIBUTE": ProfilesPartitionKey,
		}},
		{FunctionJoin, s.Joins[0].Function.GoFunction, 30, withEvents(s, withQuarantine(s, map[string]any{
			EnvJoinConfig:         compactFile("../../pipelines/search-click.json"),
			EnvJoinStateTableName: ref(logicalID(s.Stack, s.Joins[0].State)),
			EnvJoinsStreamName:    ref(logicalID(s.Stack, s.Joins[0].Joins)),
		}))},
		{FunctionDetect, s.Detections[0].Detect.GoFunction, 30, withEvents(s, withQuarantine(s, map[string]any{
			EnvCEPConfig:         compactFile("../../pipelines/detect.json"),
			EnvCEPStateTableName: ref(logicalID(s.Stack, s.Detections[0].State)),
			EnvRulesTableName:    ref(logicalID(s.Stack, s.Detections[0].Rules)),
			EnvMatchesStreamName: ref(logicalID(s.Stack, s.Detections[0].Matches)),
		}))},
		{FunctionRules, s.Detections[0].Admin, 30, map[string]any{EnvRulesTableName: ref(logicalID(s.Stack, s.Detections[0].Rules))}},
		{FunctionCommands, s.EventSourcing.CommandsFn, 10, map[string]any{
			EnvESEventsTable:      ref(logicalID(s.Stack, s.EventSourcing.Events)),
			EnvESSnapshotsTable:   ref(logicalID(s.Stack, s.EventSourcing.Snapshots)),
			EnvESCommandsTable:    ref(logicalID(s.Stack, s.EventSourcing.Commands)),
			EnvESSnapshotEvery:    "25",
			EnvViewsParameterName: ref(logicalID(s.Stack, s.EventSourcing.ViewsParameter)),
			EnvViewsRefresh:       "30",
		}},
		{FunctionPublish, s.EventSourcing.Publish.GoFunction, 30, withQuarantine(s, map[string]any{
			EnvESStreamName: ref(logicalID(s.Stack, s.EventSourcing.Stream)),
		})},
		{FunctionStatusCodes, s.StatusCodes.Function.GoFunction, 30, withEvents(s, withQuarantine(s, map[string]any{
			EnvStateTableName:   ref(logicalID(s.Stack, s.StatusCodes.State)),
			EnvOutputStreamName: ref(logicalID(s.Stack, s.StatusCodes.Output)),
		}))},
		{FunctionArchive, s.Archive.Function.GoFunction, 60, map[string]any{EnvArchiveBucketName: ref(logicalID(s.Stack, s.Archive.Bucket))}},
		{FunctionProject, s.EventSourcing.Project.GoFunction, 30, withQuarantine(s, map[string]any{
			EnvESEventsTable:      ref(logicalID(s.Stack, s.EventSourcing.Events)),
			EnvViewsParameterName: ref(logicalID(s.Stack, s.EventSourcing.ViewsParameter)),
			EnvViewsRefresh:       "30",
		})},
	}
	// Each further pipeline adds an aggregate and a ticker
	// (TestPipelinesFromFiles).
	if got, want := len(fx.tmpl.ofType("AWS::Lambda::Function")), len(tests)+2*(len(s.Pipelines.Pipelines)-1); got != want {
		t.Errorf("template has %d functions, want %d", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, fn := fx.tmpl.function(t, tt.name)
			if want := logicalID(s.Stack, tt.fn.Function); id != want {
				t.Errorf("function with metadata %s is %s, want %s", tt.name, id, want)
			}
			assertProps(t, id, fn.Properties, map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"Timeout":       tt.timeout,
				"MemorySize":    memoryOf(tt.name),
				"Environment":   map[string]any{"Variables": tt.env},
				"LoggingConfig": map[string]any{"LogGroup": ref(logicalID(s.Stack, tt.fn.LogGroup))},
				"Role":          getAtt(logicalID(s.Stack, tt.fn.Role), "Arn"),
				"TracingConfig": nil,
			})
			logGroup := fx.tmpl.Resources[logicalID(s.Stack, tt.fn.LogGroup)]
			if got := logGroup.Properties["RetentionInDays"]; got != 14.0 {
				t.Errorf("log group RetentionInDays = %v, want 14", got)
			}

			// The code is the function's own <assetDir>/<name>/bootstrap.
			assetPath, _ := fn.Metadata["aws:asset:path"].(string)
			code, err := os.ReadFile(filepath.Join(fx.outdir, assetPath, "bootstrap"))
			if err != nil {
				t.Fatalf("staged code of %s: %v", tt.name, err)
			}
			if got, want := string(code), "dummy "+tt.name; got != want {
				t.Errorf("staged bootstrap of %s holds %q, want %q (from its own asset dir)", tt.name, got, want)
			}
		})
	}
}

// windowEnv is the environment of the windowed pipeline's functions: the
// pipeline exactly as pipeline.json declares it, the views table (and the
// parameter naming its current version, which cmd/replay swaps) and the
// results stream.
func windowEnv(s *TributaryStack) map[string]any {
	return map[string]any{
		EnvPipelineConfig:     pipelineFileJSON(),
		EnvViewsTableName:     ref(logicalID(s.Stack, s.Pipelines.Views)),
		EnvViewsParameterName: ref(logicalID(s.Stack, s.Pipelines.ViewsRegistry.Parameter)),
		EnvViewsRefresh:       fmt.Sprint(ViewsRefreshSeconds),
		EnvOutputStreamName:   ref(logicalID(s.Stack, s.Pipelines.WindowResults)),
	}
}

// pipelineFileJSON is pipelines/pageviews.json compacted: what
// PIPELINE_CONFIG must hold, byte for byte.
func pipelineFileJSON() string {
	raw, err := os.ReadFile(filepath.Join(repoPipelinesDir, "pageviews.json"))
	if err != nil {
		panic(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		panic(err)
	}
	return out.String()
}

func TestRolesHaveNoManagedPolicies(t *testing.T) {
	for id, r := range fx.tmpl.ofType("AWS::IAM::Role") {
		if mp := r.Properties["ManagedPolicyArns"]; mp != nil {
			t.Errorf("role %s has managed policies %v; functions get least-privilege inline grants only", id, mp)
		}
	}
}

func TestStreamMappings(t *testing.T) {
	s := fx.stack
	failures := logicalID(s.Stack, s.Quarantine.Failures)
	aggregateID, _ := fx.tmpl.function(t, FunctionAggregate)
	quarantineID, _ := fx.tmpl.function(t, FunctionQuarantine)

	tests := []struct {
		name  string
		fnID  string
		props map[string]any
	}{
		{
			name: "aggregate on events",
			fnID: aggregateID,
			props: map[string]any{
				// Two pipelines: through its own consumer (TestPipelinesFromFiles).
				"EventSourceArn":                 getAtt(logicalID(fx.stack.Stack, pageviews(fx.stack).Aggregate.Consumer), "ConsumerARN"),
				"BatchSize":                      500.0,
				"MaximumBatchingWindowInSeconds": 5.0,
				"StartingPosition":               "TRIM_HORIZON",
				"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
				"BisectBatchOnFunctionError":     true,
				"MaximumRetryAttempts":           3.0,
				"MaximumRecordAgeInSeconds":      3600.0,
				"DestinationConfig":              map[string]any{"OnFailure": map[string]any{"Destination": getAtt(failures, "Arn")}},
				"ParallelizationFactor":          nil,
				"TumblingWindowInSeconds":        DefaultFlushInterval.Seconds(),
				"FilterCriteria":                 nil,
			},
		},
		{
			name: "quarantine on failures",
			fnID: quarantineID,
			props: map[string]any{
				"EventSourceArn":        getAtt(failures, "Arn"),
				"BatchSize":             10.0,
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
				"ScalingConfig":         map[string]any{"MaximumConcurrency": 2.0},
				// SQS mappings have no on-failure destination: the queue's
				// redrive policy moves a message to the DLQ.
				"DestinationConfig": nil,
				"StartingPosition":  nil,
			},
		},
	}
	// The worker's two mappings (Tasks, TasksFifo) are TestWorkerMappings';
	// the cdc mapping on the profiles table's stream is TestProfilesCDC's and
	// timeline's two (tweets, follows) are TestTimelines'; enrich's (through
	// its enhanced fan-out consumer) is TestEnrichment's; join's and
	// detect's are TestStreamJoin's and TestDetection's; publish's and
	// project's are TestEventSourcing's; statuscodes' is TestStreamHandler's;
	// archive's is TestArchive's. And each further pipeline's aggregate one
	// more.
	if got, want := len(fx.tmpl.ofType("AWS::Lambda::EventSourceMapping")), len(tests)+12+len(fx.stack.Pipelines.Pipelines)-1; got != want {
		t.Errorf("template has %d event source mappings, want %d", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fx.tmpl.mappingOf(t, tt.fnID)
			assertProps(t, tt.name, m.Properties, tt.props)
		})
	}
}

// TestEveryStreamMappingIsBounded holds for every Kinesis or DynamoDB
// Streams mapping in the stack, including those of pipelines added later: a
// poison record must end on the Failures queue instead of blocking its shard.
// The archive function's retries and record age are its own (TestArchive):
// it writes any bytes, so no record is poison to it, and a batch it gave up
// on would be a hole in the archive that a rebuild cannot see; it retries
// for as long as the stream keeps the records, on its own consumer, where
// a stuck batch holds back no other function (its iterator age alarms).
func TestEveryStreamMappingIsBounded(t *testing.T) {
	s := fx.stack
	failures := getAtt(logicalID(s.Stack, s.Quarantine.Failures), "Arn")
	archiveID, _ := fx.tmpl.function(t, FunctionArchive)
	n := 0
	for id, m := range fx.tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if _, stream := m.Properties["StartingPosition"]; !stream {
			continue // SQS
		}
		n++
		p := m.Properties
		if !slices.Contains(asList(p["FunctionResponseTypes"]), any("ReportBatchItemFailures")) {
			t.Errorf("%s: FunctionResponseTypes %v lacks ReportBatchItemFailures", id, p["FunctionResponseTypes"])
		}
		if p["BisectBatchOnFunctionError"] != true {
			t.Errorf("%s: BisectBatchOnFunctionError = %v, want true", id, p["BisectBatchOnFunctionError"])
		}
		archive := reflect.DeepEqual(p["FunctionName"], ref(archiveID))
		if r, ok := p["MaximumRetryAttempts"].(float64); !archive && (!ok || r < 0 || r > 10) {
			t.Errorf("%s: MaximumRetryAttempts = %v, want 0-10", id, p["MaximumRetryAttempts"])
		}
		if a, ok := p["MaximumRecordAgeInSeconds"].(float64); !archive && (!ok || a < 60 || a > 86400) {
			t.Errorf("%s: MaximumRecordAgeInSeconds = %v, want 60-86400", id, p["MaximumRecordAgeInSeconds"])
		}
		want := map[string]any{"OnFailure": map[string]any{"Destination": failures}}
		if !reflect.DeepEqual(p["DestinationConfig"], want) {
			t.Errorf("%s: DestinationConfig = %v, want on-failure to the Failures queue", id, p["DestinationConfig"])
		}
	}
	if n == 0 {
		t.Fatal("no stream mappings in the stack")
	}
}

func TestGrants(t *testing.T) {
	s := fx.stack
	events := logicalID(s.Stack, s.Events) + ".Arn"
	views := logicalID(s.Stack, s.Pipelines.Views) + ".Arn"
	openIndex := views + "/index/" + ViewsOpenIndex
	results := logicalID(s.Stack, s.Pipelines.WindowResults) + ".Arn"
	quarantine := logicalID(s.Stack, s.Quarantine.Table) + ".Arn"
	failures := logicalID(s.Stack, s.Quarantine.Failures) + ".Arn"
	dlq := logicalID(s.Stack, s.Quarantine.FailuresDLQ) + ".Arn"

	tests := []struct {
		name   string
		fn     *GoFunction
		allow  []string
		forbid []string
	}{
		{
			name: FunctionIngest,
			fn:   s.Ingest.Function,
			allow: []string{
				"kinesis:PutRecords " + events,
			},
			forbid: []string{
				"kinesis:GetRecords " + events,
				"dynamodb:UpdateItem " + views,
				"dynamodb:PutItem " + quarantine,
				"sqs:SendMessage " + failures,
				"kinesis:PutRecords " + results,
			},
		},
		{
			name: FunctionAggregate,
			fn:   pageviews(s).Aggregate.GoFunction,
			allow: []string{
				"kinesis:GetRecords " + events,
				"kinesis:GetShardIterator " + events,
				"kinesis:DescribeStream " + events,
				"kinesis:ListShards " + events,
				"sqs:SendMessage " + failures,
				"dynamodb:GetItem " + views,
				"dynamodb:UpdateItem " + views,
				"dynamodb:Query " + views,
				"dynamodb:Query " + openIndex,
				"dynamodb:DeleteItem " + views, // a window listing, once its windows are published
				"kinesis:PutRecords " + results,
			},
			forbid: []string{
				"kinesis:PutRecords " + events,
				"kinesis:GetRecords " + results,
				"dynamodb:Scan " + views,
				"dynamodb:UpdateItem " + openIndex,
				"dynamodb:PutItem " + quarantine,
				"dynamodb:DeleteItem " + quarantine,
				"sqs:ReceiveMessage " + failures,
				"sqs:SendMessage " + dlq,
			},
		},
		{
			name: FunctionQuarantine,
			fn:   s.Quarantine.Function.GoFunction,
			allow: []string{
				"sqs:ReceiveMessage " + failures,
				"sqs:DeleteMessage " + failures,
				"sqs:ChangeMessageVisibility " + failures,
				"sqs:GetQueueAttributes " + failures,
				"kinesis:GetShardIterator " + events,
				"kinesis:GetRecords " + events,
				"dynamodb:PutItem " + quarantine,
				"dynamodb:BatchWriteItem " + quarantine,
				"dynamodb:UpdateItem " + quarantine,
			},
			forbid: []string{
				// It names the shard from the on-failure message and only
				// writes items (TestLeastPrivilege has its exact grants).
				"kinesis:DescribeStream " + events,
				"dynamodb:DeleteItem " + quarantine,
				"kinesis:PutRecords " + events,
				"dynamodb:UpdateItem " + views,
				"dynamodb:PutItem " + views,
				"sqs:SendMessage " + failures,
				"kinesis:PutRecords " + results,
			},
		},
		{
			// The ticker finalizes windows and emits them; it reads the
			// events stream only to know a shard has nothing left to
			// process, and has no failure queue.
			name: FunctionTicker,
			fn:   pageviews(s).Ticker,
			allow: []string{
				"kinesis:GetShardIterator " + events,
				"kinesis:GetRecords " + events,
				"dynamodb:GetItem " + views,
				"dynamodb:UpdateItem " + views,
				"dynamodb:Query " + views,
				"dynamodb:Query " + openIndex,
				"dynamodb:DeleteItem " + views, // a window listing, once its windows are published
				"kinesis:PutRecords " + results,
			},
			forbid: []string{
				"kinesis:PutRecords " + events,
				"sqs:SendMessage " + failures,
				"dynamodb:PutItem " + quarantine,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fx.tmpl.grants(logicalID(s.Stack, tt.fn.Role))
			logs := logicalID(s.Stack, tt.fn.LogGroup) + ".Arn"
			for _, g := range append(tt.allow, "logs:CreateLogStream "+logs, "logs:PutLogEvents "+logs) {
				if !got[g] {
					t.Errorf("role lacks %s", g)
				}
			}
			for _, g := range tt.forbid {
				if got[g] {
					t.Errorf("role allows %s, which %s does not need", g, tt.name)
				}
			}
			for g := range got {
				if action, resource, _ := strings.Cut(g, " "); strings.Contains(action, "*") || resource == "*" {
					t.Errorf("role has wildcard grant %s", g)
				}
			}
		})
	}
}

func TestQueues(t *testing.T) {
	s := fx.stack
	failuresID := logicalID(s.Stack, s.Quarantine.Failures)
	dlqID := logicalID(s.Stack, s.Quarantine.FailuresDLQ)
	_, quarantine := fx.tmpl.function(t, FunctionQuarantine)

	failures := fx.tmpl.Resources[failuresID].Properties
	vis, _ := failures["VisibilityTimeout"].(float64)
	timeout, _ := quarantine.Properties["Timeout"].(float64)
	if timeout == 0 || vis < 6*timeout {
		t.Errorf("Failures VisibilityTimeout = %v, want >= 6 x quarantine timeout %v", vis, timeout)
	}
	want := map[string]any{"deadLetterTargetArn": getAtt(dlqID, "Arn"), "maxReceiveCount": 5.0}
	if !reflect.DeepEqual(failures["RedrivePolicy"], want) {
		t.Errorf("Failures RedrivePolicy = %v, want %v", failures["RedrivePolicy"], want)
	}

	for _, id := range []string{failuresID, dlqID} {
		q := fx.tmpl.Resources[id].Properties
		assertProps(t, id, q, map[string]any{
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 1209600.0,
		})
		if !deniesInsecureTransport(id) {
			t.Errorf("queue %s has no policy denying requests without TLS", id)
		}
	}
}

func deniesInsecureTransport(queueID string) bool {
	for _, p := range fx.tmpl.ofType("AWS::SQS::QueuePolicy") {
		if !reflect.DeepEqual(p.Properties["Queues"], []any{ref(queueID)}) {
			continue
		}
		doc := p.Properties["PolicyDocument"].(map[string]any)
		for _, st := range asList(doc["Statement"]) {
			st := st.(map[string]any)
			cond, _ := json.Marshal(st["Condition"])
			if st["Effect"] == "Deny" && string(cond) == `{"Bool":{"aws:SecureTransport":"false"}}` {
				return true
			}
		}
	}
	return false
}

func TestTables(t *testing.T) {
	s := fx.stack
	attr := func(name string) any { return map[string]any{"AttributeName": name, "AttributeType": "S"} }
	keys := func(hash, rng string) any {
		return []any{
			map[string]any{"AttributeName": hash, "KeyType": "HASH"},
			map[string]any{"AttributeName": rng, "KeyType": "RANGE"},
		}
	}
	ttl := map[string]any{"AttributeName": "expiresAt", "Enabled": true}
	tests := []struct {
		name  string
		id    string
		props map[string]any
	}{
		{
			// package state's schema (state.CreateTable): the sparse index
			// of open windows is what the ticker finalizes from.
			name: "Views",
			id:   logicalID(s.Stack, s.Pipelines.Views),
			props: map[string]any{
				"KeySchema":            keys("pk", "sk"),
				"AttributeDefinitions": []any{attr("pk"), attr("sk"), attr("openIn"), attr("openUntil")},
				"GlobalSecondaryIndexes": []any{map[string]any{
					"IndexName":  "open",
					"KeySchema":  keys("openIn", "openUntil"),
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				}},
				"TimeToLiveSpecification": ttl,
			},
		},
		{
			name: "Quarantine",
			id:   logicalID(s.Stack, s.Quarantine.Table),
			props: map[string]any{
				"KeySchema":               keys("source", "sequenceNumber"),
				"AttributeDefinitions":    []any{attr("source"), attr("sequenceNumber")},
				"GlobalSecondaryIndexes":  nil,
				"TimeToLiveSpecification": ttl,
			},
		},
	}
	tests = append(tests, workerTables(s)...)
	tests = append(tests, ingestTables(s)...)
	// The per-minute Counts table of the first pipeline is gone with it; the
	// profiles table (CDC source) is TestProfilesCDC's, the timelines
	// tables TestTimelines', the join table TestEnrichment's; the
	// stream join's state table and CEP's rules and state tables are
	// TestStreamJoin's and TestDetection's; event sourcing's four
	// TestEventSourcing's; statuscodes' state table TestStreamHandler's.
	if got := len(fx.tmpl.ofType("AWS::DynamoDB::Table")); got != len(tests)+14 {
		t.Errorf("template has %d tables, want %d (Views, Quarantine, Idempotency, Results, IngestRequests, Profiles, Tweets, Follows, Timelines, TimelineFanOut, JoinState, the join's State, Rules, the CEP's State, event sourcing's four, and statuscodes' State)", got, len(tests)+14)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.props["BillingMode"] = "PAY_PER_REQUEST"
			tt.props["PointInTimeRecoverySpecification"] = map[string]any{"PointInTimeRecoveryEnabled": true}
			assertProps(t, tt.name, fx.tmpl.Resources[tt.id].Properties, tt.props)
		})
	}
}

func TestStreams(t *testing.T) {
	s := fx.stack
	tests := []struct {
		name   string
		id     string
		shards float64
	}{
		{"Events", logicalID(s.Stack, s.Events), 2},
		{"WindowResults", logicalID(s.Stack, s.Pipelines.WindowResults), 1},
		{"Enriched", logicalID(s.Stack, s.Enrichment.Enriched), 1},
		{"Joins", logicalID(s.Stack, s.Joins[0].Joins), 1},
		{"Matches", logicalID(s.Stack, s.Detections[0].Matches), 1},
		{"ShowEvents", logicalID(s.Stack, s.EventSourcing.Stream), 1},
		{"StatusCodes results", logicalID(s.Stack, s.StatusCodes.Output), 1},
	}
	if got := len(fx.tmpl.ofType("AWS::Kinesis::Stream")); got != len(tests) {
		t.Errorf("template has %d streams, want %d", got, len(tests))
	}
	for _, tt := range tests {
		assertProps(t, tt.name, fx.tmpl.Resources[tt.id].Properties, map[string]any{
			"ShardCount":        tt.shards,
			"StreamModeDetails": map[string]any{"StreamMode": "PROVISIONED"},
			"StreamEncryption":  map[string]any{"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"},
		})
	}
}

func TestIngestURLDefaultsToIAM(t *testing.T) {
	ingestID, _ := fx.tmpl.function(t, FunctionIngest)
	rulesID, _ := fx.tmpl.function(t, FunctionRules)
	urls := fx.tmpl.ofType("AWS::Lambda::Url")
	commandsID, _ := fx.tmpl.function(t, FunctionCommands)
	if len(urls) != 3 {
		t.Fatalf("template has %d function URLs, want 3 (ingest's, the rules function's and event sourcing's commands)", len(urls))
	}
	targets := map[string]bool{}
	for id, u := range urls {
		if u.Properties["AuthType"] != "AWS_IAM" {
			t.Errorf("function URL %s has AuthType %v, want AWS_IAM", id, u.Properties["AuthType"])
		}
		targets[resourceName(u.Properties["TargetFunctionArn"])] = true
	}
	if !targets[ingestID+".Arn"] || !targets[rulesID+".Arn"] || !targets[commandsID+".Arn"] {
		t.Errorf("function URLs target %v, want ingest, rules and commands", keys(targets))
	}
	for id, p := range fx.tmpl.ofType("AWS::Lambda::Permission") {
		if p.Properties["Principal"] == "*" {
			t.Errorf("permission %s lets anyone invoke %v", id, p.Properties["FunctionName"])
		}
	}
}

func TestOutputs(t *testing.T) {
	s := fx.stack
	urlID := logicalID(s.Stack, s.Ingest.URL)
	want := map[string]any{
		"IngestUrl":               getAtt(urlID, "FunctionUrl"),
		"EventsStreamName":        ref(logicalID(s.Stack, s.Events)),
		"ViewsTableName":          ref(logicalID(s.Stack, s.Pipelines.Views)),
		"WindowResultsStreamName": ref(logicalID(s.Stack, s.Pipelines.WindowResults)),
		"QuarantineTableName":     ref(logicalID(s.Stack, s.Quarantine.Table)),
		"FailuresQueueUrl":        ref(logicalID(s.Stack, s.Quarantine.Failures)),
		"FailuresDlqUrl":          ref(logicalID(s.Stack, s.Quarantine.FailuresDLQ)),
	}
	if _, ok := fx.tmpl.Outputs["CountsTableName"]; ok {
		t.Error("output CountsTableName is still there; the Counts table is gone")
	}
	for name, w := range want {
		o, ok := fx.tmpl.Outputs[name]
		if !ok {
			t.Errorf("output %s missing", name)
			continue
		}
		if !reflect.DeepEqual(o.Value, w) {
			t.Errorf("output %s = %v, want %v", name, o.Value, w)
		}
	}
}

func TestNagAwsSolutionsClean(t *testing.T) {
	for _, e := range fx.nagError {
		t.Errorf("cdk-nag error: %s", e)
	}
	for _, w := range fx.nagWarn {
		t.Errorf("cdk-nag warning: %s", w)
	}
	// Every suppression carries its own reason.
	for id, r := range fx.tmpl.Resources {
		for _, s := range nagSuppressions(r) {
			if len(s.Reason) < 40 {
				t.Errorf("%s: suppression of %s has no specific reason: %q", id, s.ID, s.Reason)
			}
		}
	}
}

type nagSuppression struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func nagSuppressions(r cfnResource) []nagSuppression {
	raw, _ := json.Marshal(r.Metadata["cdk_nag"])
	var md struct {
		Rules []nagSuppression `json:"rules_to_suppress"`
	}
	_ = json.Unmarshal(raw, &md)
	return md.Rules
}

// TestNagCatchesFindings shows the nag test above can fail: a queue without
// TLS enforcement and a traced function (wildcard X-Ray grant) in a stack of
// their own. The queue's finding must surface; the function's is suppressed
// with a reason.
func TestNagCatchesFindings(t *testing.T) {
	outdir := t.TempDir()
	app := newTestApp(outdir, nil)
	stack := awscdk.NewStack(app, jsii.String("NagProbe"), nil)
	awssqs.NewQueue(stack, jsii.String("PlainHTTPQueue"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_SQS_MANAGED})
	assets := t.TempDir()
	writeDummyAssets(assets)
	fn := NewGoFunction(stack, "Traced", GoFunctionProps{Name: FunctionIngest, AssetDir: assets, Tracing: true})
	addNag(app)

	errs, _ := nagFindings(stack)
	if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "AwsSolutions-SQS4") }) {
		t.Errorf("nag errors %v lack AwsSolutions-SQS4 for a queue without enforceSSL", errs)
	}
	for _, e := range errs {
		if strings.Contains(e, "AwsSolutions-IAM5") {
			t.Errorf("traced function's X-Ray grant is not suppressed: %s", e)
		}
	}
	policy := fn.Role.Node().FindChild(jsii.String("DefaultPolicy")).Node().DefaultChild().(awscdk.CfnResource)
	sups := nagSuppressions(cfnResource{Metadata: map[string]any{"cdk_nag": policy.GetMetadata(jsii.String("cdk_nag"))}})
	if len(sups) != 1 || sups[0].ID != "AwsSolutions-IAM5" || !strings.Contains(sups[0].Reason, "X-Ray") {
		t.Errorf("traced function's policy suppressions = %+v, want one AwsSolutions-IAM5 naming X-Ray", sups)
	}
}

func TestNewTributaryStackRejects(t *testing.T) {
	complete := t.TempDir()
	writeDummyAssets(complete)
	assets := t.TempDir()
	writeDummyAssets(assets)
	if err := os.Remove(filepath.Join(assets, FunctionAggregate, "bootstrap")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		context map[string]any
		props   *TributaryStackProps
		want    string
	}{
		{"missing bootstrap", nil, &TributaryStackProps{AssetDir: assets},
			filepath.Join(assets, FunctionAggregate, "bootstrap") + " does not exist"},
		// A misspelt key is named beside the missing binaries, not hidden
		// behind them (a synth before the functions are built).
		{"misspelt key with a missing bootstrap", map[string]any{"tributary:flushIntervalSecond": 60.0}, &TributaryStackProps{AssetDir: assets},
			"context tributary:flushIntervalSecond: unknown key; did you mean tributary:flushIntervalSeconds?"},
		{"unknown auth type", map[string]any{ContextIngestAuth: "COGNITO", ContextAssetDir: complete}, nil,
			`tributary:ingestAuth "COGNITO": want AWS_IAM or HMAC`},
		{"non-string context", map[string]any{ContextAssetDir: 42.0}, nil,
			"context tributary:assetDir: got 42 (float64), want a string"},
		{"flush interval not a number", map[string]any{ContextFlushInterval: "1m", ContextAssetDir: complete}, nil,
			`context tributary:flushIntervalSeconds: "1m" is not a number of seconds`},
		{"flush interval above Lambda's 15 minutes", map[string]any{ContextFlushInterval: 901.0, ContextAssetDir: complete}, nil,
			"context tributary:flushIntervalSeconds: 901 is not a whole number of seconds between 0 and 900"},
		{"fractional flush interval", map[string]any{ContextFlushInterval: "1.5", ContextAssetDir: complete}, nil,
			"context tributary:flushIntervalSeconds: 1.5 is not a whole number"},
		{"views read capacity without write capacity", map[string]any{ContextViewsReadCapacity: "50", ContextAssetDir: complete}, nil,
			"context tributary:viewsReadCapacity: set without tributary:viewsWriteCapacity"},
		{"views read capacity not a number, without write capacity", map[string]any{ContextViewsReadCapacity: "lots", ContextAssetDir: complete}, nil,
			`context tributary:viewsReadCapacity: "lots" is not a number`},
		{"views write capacity past the table quota", map[string]any{ContextViewsWriteCapacity: 40001.0, ContextAssetDir: complete}, nil,
			"context tributary:viewsWriteCapacity: 40001 is not a whole number between 0 and 40000"},
		{"pipelines dir that does not exist", map[string]any{ContextPipelinesDir: filepath.Join(complete, "pipeline"), ContextAssetDir: complete}, nil,
			"context tributary:pipelinesDir: " + filepath.Join(complete, "pipeline") + " is not a directory of pipeline files"},
		{"pipelines dir that is a file", map[string]any{ContextPipelinesDir: filepath.Join(complete, FunctionIngest, "bootstrap"), ContextAssetDir: complete}, nil,
			"context tributary:pipelinesDir: " + filepath.Join(complete, FunctionIngest, "bootstrap") + " is not a directory of pipeline files"},
		{"pipeline without windows", nil, &TributaryStackProps{AssetDir: complete, Pipelines: []pipeline.File{{Path: "p.json", JSON: []byte(`{"name": "p"}`)}}},
			"p.json: windows: at least one window is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := newTestApp(t.TempDir(), tt.context)
			_, err := NewTributaryStack(app, StackID, tt.props)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewTributaryStack error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func cdcEnv(s *TributaryStack) map[string]any {
	return withQuarantine(s, map[string]any{"EVENTS_STREAM_NAME": ref(logicalID(s.Stack, s.Events)), "ENTITY_KEY_ATTRIBUTE": ProfilesPartitionKey})
}

// withQuarantine is env plus the quarantine table's name, which the
// functions that set records aside get.
// withEvents adds the events stream a ticker reads its shards' backlog on.
func withEvents(s *TributaryStack, env map[string]any) map[string]any {
	env[EnvEventsStreamName] = ref(logicalID(s.Stack, s.Events))
	return env
}

func withQuarantine(s *TributaryStack, env map[string]any) map[string]any {
	env[EnvQuarantineTableName] = ref(logicalID(s.Stack, s.Quarantine.Table))
	return env
}
