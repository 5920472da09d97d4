package tributary

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// ResultLogMessage is the msg of the JSON log line the functions that run a
// pipeline write for every final window, correction and retraction
// (aggregate.ResultLogMessage; package aggregate's output.go documents the
// fields). The queries below spell the fields out rather than import
// package aggregate (and the SDK clients it brings into the CDK app), and a
// test checks them against output.go.
const ResultLogMessage = "window result"

// The fields of a result line the queries read.
const (
	fieldResultType = "resultType"
	fieldPipeline   = "pipeline"
	fieldKey        = "key"
	fieldWindow     = "window"
	fieldCountDelta = "countDelta"
)

// ResultsQuery names one of a pipeline's saved Logs Insights queries.
type ResultsQuery string

// The saved queries of every pipeline.
const (
	// QueryResultsOfKey: every result of one key (a query parameter) over
	// the time range picked in the console.
	QueryResultsOfKey ResultsQuery = "results"
	// QueryTopKeys: the keys with the most events in the time range (the
	// console's default, one hour).
	QueryTopKeys ResultsQuery = "topKeys"
	// QueryRecordPath: every log line of every function that mentions one
	// event id (a query parameter), in time order.
	QueryRecordPath ResultsQuery = "recordPath"
	// QuerySetAside: records set aside, quarantined or refused, and why.
	QuerySetAside ResultsQuery = "setAside"
)

// resultsQueries lists the queries in the order docs/deploy.md and
// the dashboard name them.
var resultsQueries = []ResultsQuery{QueryResultsOfKey, QueryTopKeys, QueryRecordPath, QuerySetAside}

// queryNames are the saved queries' names: a folder per pipeline under
// Tributary in the console's Saved queries.
func queryNames(pipeline string) map[ResultsQuery]string {
	return map[ResultsQuery]string{
		QueryResultsOfKey: "Tributary/" + pipeline + "/results of a key over a time range",
		QueryTopKeys:      "Tributary/" + pipeline + "/top keys by count in the last hour",
		QueryRecordPath:   "Tributary/" + pipeline + "/a record's path by event id",
		QuerySetAside:     "Tributary/" + pipeline + "/records set aside or quarantined, and why",
	}
}

// Query parameters ({{name}} in a saved query; the console asks for them).
const (
	paramKey     = "key"
	paramEventID = "eventId"
)

// setAsideMessages matches the msg of every line that says a record was
// given up on: set aside by its function (package setaside), copied to
// quarantine from a failed batch, unreadable, a poison record, an event id
// reused with other content, a record a join or CDC could not use.
const setAsideMessages = `/(?i)set aside|quarantin|poison|refused|not fully readable|unparseable|cannot be joined|cannot become a changelog|not applied/`

// valueFields are the fields a result line carries for p's aggregates, in
// the order a reader looks for them (aggregate.appendResult writes them).
func valueFields(p *pipeline.Config) []string {
	has := p.Aggregates.Aggregates.Has
	var out []string
	if has(agg.Count) {
		out = append(out, "count")
	}
	for _, a := range []struct {
		name string
		a    agg.Aggregate
	}{{"sum", agg.Sum}, {"mean", agg.Mean}, {"min", agg.Min}, {"max", agg.Max}} {
		if has(a.a) {
			out = append(out, a.name)
		}
	}
	if has(agg.Quantiles) {
		qs := p.Aggregates.Quantiles
		if len(qs) == 0 {
			qs = agg.DefaultQuantiles
		}
		for _, q := range qs {
			out = append(out, quantileField(q))
		}
	}
	if has(agg.Distinct) {
		out = append(out, "distinct")
	}
	return out
}

// quantileField is the log field of quantile q: agg.QuantileName with "."
// as "_" (aggregate.QuantileField): 0.5 → p50, 0.999 → p99_9.
func quantileField(q float64) string {
	return strings.ReplaceAll(agg.QuantileName(q), ".", "_")
}

// counts reports whether p's result lines carry count and countDelta.
func counts(p *pipeline.Config) bool { return p.Aggregates.Aggregates.Has(agg.Count) }

// topKeysWindow is the window kind top keys are counted over: one whose
// windows do not overlap, so each event counts once — the first tumbling
// window, else the first session window (its retractions subtract what a
// merge replaced), else the first window. The result lines carry
// WindowSpec.ID.
func topKeysWindow(p *pipeline.Config) string {
	for _, kind := range []pipeline.WindowKind{pipeline.Tumbling, pipeline.Session} {
		for _, w := range p.Windows {
			if w.Kind == kind {
				return w.ID()
			}
		}
	}
	return p.Windows[0].ID()
}

// resultsFilter selects p's result lines.
func resultsFilter(p *pipeline.Config) string {
	return fmt.Sprintf(`filter msg = %q and %s = %q`, ResultLogMessage, fieldPipeline, p.Name)
}

// QueryString is the Logs Insights query of kind q for pipeline p.
func QueryString(p *pipeline.Config, q ResultsQuery) string {
	switch q {
	case QueryResultsOfKey:
		fields := append([]string{"@timestamp", fieldResultType, fieldWindow, "start", "end", "revision"}, valueFields(p)...)
		return strings.Join([]string{
			"fields " + strings.Join(fields, ", "),
			resultsFilter(p) + fmt.Sprintf(` and %s = "{{%s}}"`, fieldKey, paramKey),
			"sort start asc",
			"limit 10000",
		}, "\n| ")
	case QueryTopKeys:
		lines := []string{resultsFilter(p) + fmt.Sprintf(` and %s = %q`, fieldWindow, topKeysWindow(p))}
		if counts(p) {
			lines = append(lines, fmt.Sprintf("stats sum(%s) as events, count(*) as results by %s", fieldCountDelta, fieldKey), "sort events desc")
		} else {
			lines = append(lines, "stats count(*) as results by "+fieldKey, "sort results desc")
		}
		return strings.Join(append(lines, "limit 20"), "\n| ")
	case QueryRecordPath:
		return strings.Join([]string{
			"fields @timestamp, @log, level, msg, key, id, shard, sequenceNumber, field, reason, error",
			fmt.Sprintf(`filter @message like "{{%s}}"`, paramEventID),
			"sort @timestamp asc",
			"limit 1000",
		}, "\n| ")
	case QuerySetAside:
		return strings.Join([]string{
			"fields @timestamp, @log, msg, function, source, shard, sequenceNumber, messageId, field, kind, reason, condition, error",
			"filter msg like " + setAsideMessages,
			"sort @timestamp desc",
			"limit 1000",
		}, "\n| ")
	}
	panic(fmt.Sprintf("unknown results query %q", q))
}

// newResultsQueries saves p's queries: the results ones over the log
// groups of the functions that run p, the others over every function's.
func newResultsQueries(scope constructs.Construct, p *pipeline.Config, results, all []awslogs.ILogGroup) map[ResultsQuery]awslogs.CfnQueryDefinition {
	names := queryNames(p.Name)
	out := map[ResultsQuery]awslogs.CfnQueryDefinition{}
	for _, q := range resultsQueries {
		if !p.Outputs.Log && readsResults(q) {
			continue // no result lines to read
		}
		groups, params := results, []any(nil)
		switch q {
		case QueryResultsOfKey:
			params = []any{&awslogs.CfnQueryDefinition_QueryParameterProperty{Name: jsii.String(paramKey), DefaultValue: jsii.String("user-1"),
				Description: jsii.String("the key whose results to show (keys are case-sensitive)")}}
		case QueryRecordPath:
			groups = all
			params = []any{&awslogs.CfnQueryDefinition_QueryParameterProperty{Name: jsii.String(paramEventID), DefaultValue: jsii.String("e1"),
				Description: jsii.String("the event id (the envelope's id) whose path to follow")}}
		case QuerySetAside:
			groups = all
		}
		props := &awslogs.CfnQueryDefinitionProps{
			Name:          jsii.String(names[q]),
			QueryString:   jsii.String(QueryString(p, q)),
			LogGroupNames: logGroupNames(groups),
		}
		if params != nil {
			props.Parameters = params
		}
		out[q] = awslogs.NewCfnQueryDefinition(scope, jsii.String(exportedName(string(q))+"Query"), props)
	}
	return out
}

// readsResults says q reads the result lines (outputs.log).
func readsResults(q ResultsQuery) bool { return q == QueryResultsOfKey || q == QueryTopKeys }

func logGroupNames(groups []awslogs.ILogGroup) *[]any {
	out := make([]any, len(groups))
	for i, g := range groups {
		out[i] = g.LogGroupName()
	}
	return &out
}

// newTopKeysRule is the Contributor Insights rule over p's result lines:
// the keys that contribute the most events (the sum of countDelta, so a
// correction adds only what it added) in windows of topKeysWindow; without
// the count aggregate, the keys with the most results.
func newTopKeysRule(scope constructs.Construct, p *pipeline.Config, groups []awslogs.ILogGroup) awscloudwatch.CfnInsightRule {
	stack := awscdk.Stack_Of(scope)
	filters := []any{
		map[string]any{"Match": "$.msg", "In": []string{ResultLogMessage}},
		map[string]any{"Match": "$." + fieldPipeline, "In": []string{p.Name}},
		map[string]any{"Match": "$." + fieldWindow, "In": []string{topKeysWindow(p)}},
	}
	contribution := map[string]any{"Keys": []string{"$." + fieldKey}, "Filters": filters}
	aggregateOn := "Count"
	if counts(p) {
		// Retractions (negative) are left out: a rule sums what it matches.
		filters = append(filters, map[string]any{"Match": "$." + fieldResultType, "In": []string{"final", "correction"}})
		contribution["Filters"] = filters
		contribution["ValueOf"] = "$." + fieldCountDelta
		aggregateOn = "Sum"
	}
	names := make([]*string, len(groups))
	for i, g := range groups {
		names[i] = g.LogGroupName()
	}
	body := map[string]any{
		"Schema":        map[string]any{"Name": "CloudWatchLogRule", "Version": 1},
		"AggregateOn":   aggregateOn,
		"Contribution":  contribution,
		"LogFormat":     "JSON",
		"LogGroupNames": names,
	}
	return awscloudwatch.NewCfnInsightRule(scope, jsii.String("TopKeysRule"), &awscloudwatch.CfnInsightRuleProps{
		RuleName:  awscdk.Fn_Join(jsii.String("-"), &[]*string{stack.StackName(), jsii.String(p.Name), jsii.String("top-keys")}),
		RuleState: jsii.String("ENABLED"),
		RuleBody:  stack.ToJsonString(body, nil),
	})
}

// resultsLogWidgets are the dashboard's view of the results themselves and
// of the records given up on, from the logs.
func resultsLogWidgets(p *pipeline.Config, results, all []awslogs.ILogGroup) []awscloudwatch.IWidget {
	names := func(groups []awslogs.ILogGroup) *[]*string {
		out := make([]*string, len(groups))
		for i, g := range groups {
			out[i] = g.LogGroupName()
		}
		return &out
	}
	latest := strings.Join([]string{
		"fields @timestamp, " + strings.Join(append([]string{fieldResultType, fieldKey, fieldWindow, "start", "revision"}, valueFields(p)...), ", "),
		resultsFilter(p),
		"sort @timestamp desc",
		"limit 50",
	}, "\n| ")
	setAside := awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{Title: jsii.String("records set aside or quarantined, and why"),
		LogGroupNames: names(all), QueryString: jsii.String(QueryString(p, QuerySetAside)), View: awscloudwatch.LogQueryVisualizationType_TABLE,
		Width: jsii.Number(24), Height: jsii.Number(6)})
	if !p.Outputs.Log {
		return []awscloudwatch.IWidget{setAside}
	}
	return []awscloudwatch.IWidget{
		awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{Title: jsii.String(p.Name + ": top keys by events (" + topKeysWindow(p) + " windows)"),
			LogGroupNames: names(results), QueryString: jsii.String(QueryString(p, QueryTopKeys)), View: awscloudwatch.LogQueryVisualizationType_TABLE,
			Width: jsii.Number(8), Height: jsii.Number(8)}),
		awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{Title: jsii.String(p.Name + ": latest window results (final, corrections, retractions)"),
			LogGroupNames: names(results), QueryString: jsii.String(latest), View: awscloudwatch.LogQueryVisualizationType_TABLE,
			Width: jsii.Number(16), Height: jsii.Number(8)}),
		setAside,
	}
}
