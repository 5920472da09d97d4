package tributary

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// dashboardPeriod is the period of every metric on the dashboards: the
// resolution of the AWS/Lambda, AWS/SQS and AWS/DynamoDB metrics, and of
// the functions' EMF metrics as CloudWatch stores them.
const dashboardPeriod = time.Minute

// FunctionFlow names a function's own metrics (namespace Tributary,
// dimension Function) that count what it takes in and what it puts out, as
// its package emits them with metrics.Add.
type FunctionFlow struct {
	In, Out []string
}

// FunctionFlows are the events in and out of each function, by name. A
// function missing here (snapshot: no EMF metrics) shows its invocations
// only.
var FunctionFlows = map[string]FunctionFlow{
	FunctionIngest:     {In: []string{"EventsIn"}, Out: []string{"Accepted", "Dropped", "EventsRejected", "EventsFailed"}},
	FunctionAggregate:  {In: []string{"RecordsIn"}, Out: []string{"WindowsFinalized", "OutputRecords", "Filtered", "PoisonRecords"}},
	FunctionTicker:     {Out: []string{"WindowsFinalized", "OutputRecords"}},
	FunctionQuarantine: {In: []string{"MessagesIn"}, Out: []string{"RecordsQuarantined", "RecordsMissing"}},
	FunctionWorker:     {In: []string{"MessagesIn"}, Out: []string{"Processed", "Duplicates", "DeadLettered"}},
	FunctionCDC:        {In: []string{"ChangesIn"}, Out: []string{"ChangelogRecords", "Tombstones"}},
	FunctionTimeline:   {In: []string{"TweetsIn", "FollowsIn"}, Out: []string{"ViewWrites"}},
	FunctionEnrich:     {In: []string{"RecordsIn"}, Out: []string{"Enriched", "BadRecords"}},
	FunctionCommands:   {Out: []string{"CommandsAccepted", "CommandsRefused", "CommandsInvalid", "CommandConflicts", "CommandsReplayed"}},
	FunctionPublish:    {In: []string{"EventsIn"}, Out: []string{"EventsPublished", "Erasures"}},
	FunctionProject:    {In: []string{"EventsIn"}, Out: []string{"EventsApplied"}},
	FunctionArchive:    {In: []string{"RecordsArchived"}, Out: []string{"ObjectsWritten"}},
}

// metricArchiveBytes is the bytes the archive function wrote to S3
// (package archive's MetricBytesWritten), gzip'd.
const metricArchiveBytes = "BytesWritten"

// Pipeline metrics of the functions that run a pipeline (package
// aggregate), shown per pipeline.
var (
	// pipelineLateMetrics: late records dropped, final windows corrected,
	// merged sessions retracted.
	pipelineLateMetrics = []string{"LateDropped", "Corrections", "Retractions"}
	// pipelineDuplicateMetrics: producer copies suppressed by event id,
	// ids reused with other content (refused), and records Lambda
	// redelivered that the fences skipped.
	pipelineDuplicateMetrics = []string{"DuplicatesSuppressed", "DuplicateConflicts", "DuplicatesSkipped"}
)

// Metric names of failures, shown for every function that emits them.
const (
	metricSetAside    = "RecordsSetAside"
	metricQuarantined = "RecordsQuarantined"
	metricMissing     = "RecordsMissing"
	metricWatermark   = "WatermarkLagMs"
)

// DashboardProps configures NewDashboard.
type DashboardProps struct {
	// Pipeline is the pipeline (of NewPipelines) the dashboard, queries
	// and rule are about. Required.
	Pipeline *Pipeline
}

// Dashboard is what a person opens to see one pipeline: the CloudWatch
// dashboard, the saved Logs Insights queries and the Contributor Insights
// rule for top keys.
type Dashboard struct {
	constructs.Construct
	Pipeline *Pipeline
	// Dashboard is named <stack name>-<pipeline name>.
	Dashboard awscloudwatch.Dashboard
	// Queries are the saved Logs Insights queries (logs.go), by
	// ResultsQuery.
	Queries map[ResultsQuery]awslogs.CfnQueryDefinition
	// TopKeys is the Contributor Insights rule over the results' log lines
	// (nil when the pipeline's outputs.log is false: no such lines).
	TopKeys awscloudwatch.CfnInsightRule
	// ResultLogGroups are the log groups of the pipeline's functions, where
	// its results are logged; FunctionLogGroups every function's.
	ResultLogGroups, FunctionLogGroups []awslogs.ILogGroup
}

// NewDashboard adds under scope, in a construct id, the dashboard of one
// pipeline over what the stack holds when it is called (call it once per
// pipeline, after the functions, queues and tables exist: the repository's
// stack calls it after NewOperations): per function, its events in and
// out, errors, throttles and duration p50/p99; per stream mapping, the
// iterator age; the pipeline's watermark lag, late records and
// corrections, duplicates suppressed (its own functions' metrics, by
// {Function, Pipeline}); records set aside and quarantined, and the
// archive's chain heads unreadable or restarted; the depth of every
// failure queue; the consumed capacity of every table and the bytes the
// archive wrote; and the window results from the logs. It adds the
// saved queries (a folder Tributary/<pipeline>), the top-keys rule, and
// the stack outputs <Pipeline>DashboardName and <Pipeline>DashboardUrl.
// A pipeline whose outputs.log is false logs no result: its dashboard,
// queries and rule leave out what reads result lines (the results of a
// key, top keys, latest results) and keep the rest.
// It fails when the pipeline's functions are not in scope's stack or a
// function has no log group of its own (the queries name log groups).
func NewDashboard(scope constructs.Construct, id string, props DashboardProps) (*Dashboard, error) {
	x := props.Pipeline
	if x == nil {
		return nil, fmt.Errorf("dashboard %s: Pipeline is required", id)
	}
	stack := awscdk.Stack_Of(scope)
	fns := stackFunctions(stack)
	var own []stackFunction
	for _, want := range []*GoFunction{x.Aggregate.GoFunction, x.Ticker} {
		ref := resolvedJSON(stack, want.Function.FunctionName())
		i := slices.IndexFunc(fns, func(f stackFunction) bool { return f.ref == ref })
		if i < 0 {
			return nil, fmt.Errorf("pipeline %s dashboard: its function %s is not in stack %s", x.Name, *want.Node().Path(), *stack.StackName())
		}
		own = append(own, fns[i])
	}
	groups := map[string]awslogs.ILogGroup{}
	for _, fn := range fns {
		lg, err := functionLogGroup(stack, fn)
		if err != nil {
			return nil, err
		}
		groups[fn.ref] = lg
	}
	cfg := x.Config
	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &Dashboard{Construct: c, Pipeline: x}
	for _, fn := range own {
		d.ResultLogGroups = append(d.ResultLogGroups, groups[fn.ref])
	}
	for _, fn := range fns {
		d.FunctionLogGroups = append(d.FunctionLogGroups, groups[fn.ref])
	}

	w := &widgets{stack: stack, fns: fns, pipe: cfg, pipeFns: own}
	d.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   awscdk.Fn_Join(jsii.String("-"), &[]*string{stack.StackName(), jsii.String(cfg.Name)}),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
	d.Dashboard.AddWidgets(w.intro())
	for _, row := range w.flows() {
		d.Dashboard.AddWidgets(row...)
	}
	d.Dashboard.AddWidgets(w.pipeline()...)
	d.Dashboard.AddWidgets(w.failures()...)
	d.Dashboard.AddWidgets(w.latency()...)
	d.Dashboard.AddWidgets(w.capacity()...)
	d.Queries = newResultsQueries(c, cfg, d.ResultLogGroups, d.FunctionLogGroups)
	if cfg.Outputs.Log {
		d.TopKeys = newTopKeysRule(c, cfg, d.ResultLogGroups)
	}
	d.Dashboard.AddWidgets(resultsLogWidgets(cfg, d.ResultLogGroups, d.FunctionLogGroups)...)

	exported := exportedName(cfg.Name)
	output(stack, exported+"DashboardName", d.Dashboard.DashboardName(), fmt.Sprintf("CloudWatch dashboard of pipeline %s", cfg.Name))
	output(stack, exported+"DashboardUrl", awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://"), stack.Region(), jsii.String(".console.aws.amazon.com/cloudwatch/home?region="), stack.Region(),
		jsii.String("#dashboards/dashboard/"), d.Dashboard.DashboardName(),
	}), fmt.Sprintf("open the dashboard of pipeline %s in the console", cfg.Name))
	return d, nil
}

// functionLogGroup is fn's own log group (LoggingConfig.LogGroup), which
// every GoFunction has; a function without one would log to a group the
// stack does not hold, which no saved query could name.
func functionLogGroup(stack awscdk.Stack, fn stackFunction) (awslogs.ILogGroup, error) {
	cfg := resolvedJSON(stack, fn.cfn.LoggingConfig())
	if cfg == "null" || !strings.Contains(strings.ToLower(cfg), "loggroup") {
		return nil, fmt.Errorf("function %s has no log group of its own (LoggingConfig.LogGroup): create it with NewGoFunction", fn.label())
	}
	return fn.fn.LogGroup(), nil
}

// widgets builds the dashboard's widgets from the stack.
type widgets struct {
	stack   awscdk.Stack
	fns     []stackFunction
	pipe    *pipeline.Config
	pipeFns []stackFunction // the pipeline's own: aggregate, ticker
}

func period() awscdk.Duration { return awscdk.Duration_Seconds(jsii.Number(dashboardPeriod.Seconds())) }

// own is a function's own metric (namespace Tributary, fn.dimensions():
// Function, and Pipeline for a pipeline's function).
func own(metric string, fn stackFunction, statistic string) awscloudwatch.Metric {
	dims := fn.dimensions()
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricsNamespace),
		MetricName:    jsii.String(metric),
		DimensionsMap: &dims,
		Statistic:     jsii.String(statistic),
		Period:        period(),
		Label:         jsii.String(fn.label() + " " + metric),
	})
}

func opts(statistic, label string) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Statistic: jsii.String(statistic), Period: period(), Label: jsii.String(label)}
}

func graph(title string, width float64, left []awscloudwatch.IMetric, right ...awscloudwatch.IMetric) awscloudwatch.IWidget {
	p := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Width: jsii.Number(width), Height: jsii.Number(6), Left: &left, Period: period()}
	if len(right) > 0 {
		p.Right = &right
	}
	return awscloudwatch.NewGraphWidget(p)
}

func (w *widgets) intro() awscloudwatch.IWidget {
	var kinds, runBy []string
	for _, win := range w.pipe.Windows {
		kinds = append(kinds, "`"+win.ID()+"`")
	}
	for _, fn := range w.pipeFns {
		runBy = append(runBy, fn.name)
	}
	q := queryNames(w.pipe.Name)
	if !w.pipe.Outputs.Log {
		md := fmt.Sprintf(`# Pipeline %s
Windows %s over events of types %s, key `+"`%s`"+`, run by %s. Results are not logged (`+"`outputs.log`"+` is false).
**Saved queries** (Logs Insights → Saved queries): *%s*, *%s*.
%s`,
			w.pipe.Name, strings.Join(kinds, ", "), eventTypesText(w.pipe), w.pipe.Key, strings.Join(runBy, " and "),
			q[QueryRecordPath], q[QuerySetAside], terminalText(w.pipe))
		return awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Markdown: jsii.String(md), Width: jsii.Number(24), Height: jsii.Number(4)})
	}
	md := fmt.Sprintf(`# Pipeline %s
Windows %s over events of types %s, key `+"`%s`"+`, run by %s. Every final window, correction and retraction is logged by them as one JSON line (`+"`msg = \"%s\"`"+`, key and values as fields).
**Saved queries** (Logs Insights → Saved queries): *%s*, *%s*, *%s*, *%s*. **Top keys**: Contributor Insights rule *%s-%s-top-keys*.
%s`,
		w.pipe.Name, strings.Join(kinds, ", "), eventTypesText(w.pipe), w.pipe.Key, strings.Join(runBy, " and "), ResultLogMessage,
		q[QueryResultsOfKey], q[QueryTopKeys], q[QueryRecordPath], q[QuerySetAside], *w.stack.StackName(), w.pipe.Name, terminalText(w.pipe))
	return awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Markdown: jsii.String(md), Width: jsii.Number(24), Height: jsii.Number(4)})
}

// terminalText is how the intro says to read p's results from a terminal
// (docs/results.md): by key from the views table, and, when p puts them on
// the WindowResults stream, as they arrive.
func terminalText(p *pipeline.Config) string {
	text := "From a terminal: `go run ./cmd/results -pipeline " + p.Name + " -parameter <ViewsParameterName> -key <key>`"
	if !p.Outputs.Stream {
		return text + " (the stack output names the parameter)."
	}
	return text + ", and `go run ./cmd/results -pipeline " + p.Name + " -follow -stream <WindowResultsStreamName>` to watch them arrive (the stack outputs name both)."
}

func eventTypesText(p *pipeline.Config) string {
	if len(p.EventTypes) == 0 {
		return "any"
	}
	return "`" + strings.Join(p.EventTypes, "`, `") + "`"
}

// flows are the events in and out of every function, three to a row: its
// own in and out metrics (left axis) and its invocations (right axis).
func (w *widgets) flows() [][]awscloudwatch.IWidget {
	var rows [][]awscloudwatch.IWidget
	var row []awscloudwatch.IWidget
	for _, fn := range w.fns {
		flow := FunctionFlows[fn.name]
		var left []awscloudwatch.IMetric
		for _, m := range flow.In {
			left = append(left, own(m, fn, "Sum"))
		}
		for _, m := range flow.Out {
			left = append(left, own(m, fn, "Sum"))
		}
		invocations := fn.fn.MetricInvocations(opts("Sum", fn.label()+" invocations"))
		title := fn.label() + ": events in and out (per minute)"
		if len(left) == 0 {
			row = append(row, graph(fn.label()+": invocations (per minute)", 8, []awscloudwatch.IMetric{invocations}))
		} else {
			row = append(row, graph(title, 8, left, invocations))
		}
		if len(row) == 3 {
			rows, row = append(rows, row), nil
		}
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	return rows
}

// pipeline is the pipeline's own row: watermark lag, late records and
// corrections, duplicates suppressed. The functions that consume the stream
// (aggregate) report all of them; the others (the ticker, which finalizes
// idle shards' windows) only the corrections and retractions they make.
func (w *widgets) pipeline() []awscloudwatch.IWidget {
	var lag, late, dups []awscloudwatch.IMetric
	for _, fn := range w.pipeFns {
		consumer := hasStreamMapping(w.stack, fn)
		for _, m := range pipelineLateMetrics {
			if consumer || m != "LateDropped" {
				late = append(late, own(m, fn, "Sum"))
			}
		}
		if !consumer {
			continue
		}
		lag = append(lag, own(metricWatermark, fn, "Maximum"), own(metricWatermark, fn, "p50"))
		for _, m := range pipelineDuplicateMetrics {
			dups = append(dups, own(m, fn, "Sum"))
		}
	}
	return []awscloudwatch.IWidget{
		graph(w.pipe.Name+": watermark lag (ms behind processing time, max and p50)", 8, lag),
		graph(w.pipe.Name+": late records dropped, windows corrected, sessions retracted", 8, late),
		graph(w.pipe.Name+": duplicates suppressed (producer copies), conflicts (id reused), redeliveries skipped", 8, dups),
	}
}

// failures: records set aside and quarantined, the archive's chain
// problems, failure queue depths, errors and throttles.
func (w *widgets) failures() []awscloudwatch.IWidget {
	var aside, errs, throttles []awscloudwatch.IMetric
	for _, fn := range w.fns {
		if hasStreamMapping(w.stack, fn) {
			aside = append(aside, own(metricSetAside, fn, "Sum"))
		}
		if fn.name == FunctionQuarantine {
			aside = append(aside, own(metricQuarantined, fn, "Sum"), own(metricMissing, fn, "Sum"))
		}
		if fn.name == FunctionArchive {
			aside = append(aside, own(metricChainHeadsUnreadable, fn, "Sum"), own(metricChainRestarts, fn, "Sum"))
		}
		errs = append(errs, fn.fn.MetricErrors(opts("Sum", fn.label())))
		throttles = append(throttles, fn.fn.MetricThrottles(opts("Sum", fn.label())))
	}
	var depth []awscloudwatch.IMetric
	for _, q := range FailureQueues(w.stack) {
		depth = append(depth, q.MetricApproximateNumberOfMessagesVisible(opts("Maximum", constructLabel(w.stack, q))))
	}
	return []awscloudwatch.IWidget{
		graph("records set aside (never processable) and quarantined; archive chain heads unreadable or restarted", 6, aside),
		graph("failure queue and DLQ depth (messages)", 6, depth),
		graph("errors (failed invocations)", 6, errs),
		graph("throttles (invocations refused)", 6, throttles),
	}
}

// latency: duration p50 and p99 of every function, iterator age of every
// stream mapping (Lambda reports it per function; the label names the
// mapping's sources).
func (w *widgets) latency() []awscloudwatch.IWidget {
	var p50, p99, age []awscloudwatch.IMetric
	sources := sourceLabels(w.stack)
	for _, fn := range w.fns {
		p50 = append(p50, fn.fn.MetricDuration(opts("p50", fn.label())))
		p99 = append(p99, fn.fn.MetricDuration(opts("p99", fn.label())))
		var from []string
		for _, m := range mappingsOf(w.stack, fn) {
			if m.stream {
				label, ok := sources[m.source]
				if !ok {
					label = "?"
				}
				from = append(from, label)
			}
		}
		if len(from) > 0 {
			sort.Strings(from)
			age = append(age, fn.fn.Metric(jsii.String("IteratorAge"), opts("Maximum", fn.label()+" ← "+strings.Join(from, ", "))))
		}
	}
	return []awscloudwatch.IWidget{
		graph("duration p50 (ms)", 8, p50),
		graph("duration p99 (ms)", 8, p99),
		graph("iterator age per stream mapping (ms, max)", 8, age),
	}
}

// capacity: read and write units every table consumed, and the bytes the
// archive function wrote to S3 if the stack has one.
func (w *widgets) capacity() []awscloudwatch.IWidget {
	var reads, writes, archived []awscloudwatch.IMetric
	for _, t := range stackTables(w.stack) {
		label := constructLabel(w.stack, t)
		reads = append(reads, t.MetricConsumedReadCapacityUnits(opts("Sum", label)))
		writes = append(writes, t.MetricConsumedWriteCapacityUnits(opts("Sum", label)))
	}
	for _, fn := range w.fns {
		if fn.name == FunctionArchive {
			archived = append(archived, own(metricArchiveBytes, fn, "Sum"))
		}
	}
	if len(archived) == 0 {
		return []awscloudwatch.IWidget{
			graph("DynamoDB read units consumed (per minute)", 12, reads),
			graph("DynamoDB write units consumed (per minute)", 12, writes),
		}
	}
	return []awscloudwatch.IWidget{
		graph("DynamoDB read units consumed (per minute)", 8, reads),
		graph("DynamoDB write units consumed (per minute)", 8, writes),
		graph("archive: bytes written to S3 (gzip'd, per minute)", 8, archived),
	}
}

// stackTables lists the DynamoDB tables of stack, by construct path.
func stackTables(stack awscdk.Stack) []awsdynamodb.Table {
	var out []awsdynamodb.Table
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if t, ok := c.(awsdynamodb.Table); ok {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].Node().Path() < *out[j].Node().Path() })
	return out
}

// constructLabel is a construct's path below the stack, without the
// default "Resource"/"Queue" leaves: "Failures", "Work/TasksDlq".
func constructLabel(stack awscdk.Stack, c constructs.IConstruct) string {
	path := strings.TrimPrefix(*c.Node().Path(), *stack.Node().Path()+"/")
	for _, leaf := range []string{"/Resource", "/Queue"} {
		path = strings.TrimSuffix(path, leaf)
	}
	return path
}

// sourceLabels names the sources a stream mapping can have by their
// resolved ARN: Kinesis streams, DynamoDB tables' streams and enhanced
// fan-out consumers.
func sourceLabels(stack awscdk.Stack) map[string]string {
	out := map[string]string{}
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		switch r := c.(type) {
		case awskinesis.Stream:
			out[resolvedJSON(stack, r.StreamArn())] = constructLabel(stack, r)
		case awsdynamodb.Table:
			if r.TableStreamArn() != nil {
				out[resolvedJSON(stack, r.TableStreamArn())] = constructLabel(stack, r) + " (DynamoDB stream)"
			}
		case awskinesis.StreamConsumer:
			out[resolvedJSON(stack, r.StreamConsumerArn())] = constructLabel(stack, r.Stream()) + " (enhanced fan-out)"
		}
	}
	return out
}
