package tributary

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// tokenText writes a template value as text, with ${Id} for a Ref and
// ${Id.Attr} for a Fn::GetAtt, joining Fn::Join: what the dashboard body or
// a rule body reads like once deployed.
func tokenText(tb testing.TB, v any) string {
	tb.Helper()
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range asList(j[1]) {
				parts = append(parts, tokenText(tb, p))
			}
			return strings.Join(parts, j[0].(string))
		}
		if id, ok := x["Ref"]; ok {
			return fmt.Sprintf("${%v}", id)
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok {
			return fmt.Sprintf("${%v.%v}", ga[0], ga[1])
		}
	}
	tb.Fatalf("cannot write %v as text", v)
	return ""
}

// dashboardBody is a Dashboard resource's body, parsed.
type dashboardBody struct {
	Widgets []struct {
		Type       string `json:"type"`
		Width      int    `json:"width"`
		Properties struct {
			Title    string  `json:"title"`
			Metrics  [][]any `json:"metrics"`
			Query    string  `json:"query"`
			Markdown string  `json:"markdown"`
		} `json:"properties"`
	} `json:"widgets"`
}

func parseDashboard(t *testing.T, r cfnResource) dashboardBody {
	t.Helper()
	text := tokenText(t, r.Properties["DashboardBody"])
	var b dashboardBody
	if err := json.Unmarshal([]byte(text), &b); err != nil {
		t.Fatalf("dashboard body is not JSON: %v\n%s", err, text)
	}
	return b
}

// metricKeys are the metrics of a dashboard's metric widgets as
// "<namespace> <name> <dim>=<value>,... <stat>", with the widget titles
// each is on.
func metricKeys(t *testing.T, b dashboardBody) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, w := range b.Widgets {
		if w.Type != "metric" {
			continue
		}
		for _, m := range w.Properties.Metrics {
			var names []string
			stat := ""
			for _, part := range m {
				switch p := part.(type) {
				case string:
					if p == "." || p == "..." {
						t.Fatalf("widget %q uses the %q shorthand; the local dashboard reads full metric arrays: %v", w.Properties.Title, p, m)
					}
					names = append(names, p)
				case map[string]any:
					stat, _ = p["stat"].(string)
				}
			}
			if len(names) < 2 || len(names)%2 != 0 {
				t.Fatalf("widget %q: metric %v is not [namespace, name, dim, value, ...]", w.Properties.Title, m)
			}
			var dims []string
			for i := 2; i < len(names); i += 2 {
				dims = append(dims, names[i]+"="+names[i+1])
			}
			sort.Strings(dims)
			k := fmt.Sprintf("%s %s %s %s", names[0], names[1], strings.Join(dims, ","), stat)
			out[k] = append(out[k], w.Properties.Title)
		}
	}
	return out
}

// functionLogGroupIDs maps each function name to its log group's logical id.
func functionLogGroupIDs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range FunctionNames {
		_, fn := fx.tmpl.function(t, name)
		lc, _ := fn.Properties["LoggingConfig"].(map[string]any)
		id, ok := lc["LogGroup"].(map[string]any)["Ref"].(string)
		if !ok {
			t.Fatalf("function %s: LoggingConfig %v names no log group of the stack", name, lc)
		}
		if fx.tmpl.Resources[id].Type != "AWS::Logs::LogGroup" {
			t.Fatalf("function %s logs to %s, a %s", name, id, fx.tmpl.Resources[id].Type)
		}
		out[name] = id
	}
	return out
}

// TestPipelineDashboard: the stack has one dashboard for its one pipeline,
// named after it, holding every metric issue 12 lists, each on the
// metric, dimension and statistic its emitter and AWS use: events in and
// out and invocations of every function; errors, throttles and duration
// p50/p99 of every function; iterator age of every stream consumer; the
// pipeline's watermark lag, late records, corrections, duplicates; records
// set aside and quarantined; the depth of every failure queue; the read and
// write units of every table; and log widgets over the results.
func TestPipelineDashboard(t *testing.T) {
	dashboards := fx.tmpl.ofType("AWS::CloudWatch::Dashboard")
	if want := len(fx.stack.Pipelines.Pipelines) + len(fx.stack.Joins) + len(fx.stack.Detections); len(dashboards) != want || len(fx.stack.OperatorDashboards) != len(fx.stack.Joins)+len(fx.stack.Detections) {
		t.Fatalf("%d dashboards, want %d: one per pipeline file (aggregation, join, CEP)", len(dashboards), want)
	}
	var body dashboardBody
	names := map[string]bool{}
	for _, d := range dashboards {
		name := tokenText(t, d.Properties["DashboardName"])
		names[name] = true
		if name == StackID+"-pageviews" {
			body = parseDashboard(t, d)
		}
	}
	if !names[StackID+"-pageviews"] || !names[StackID+"-checkouts"] {
		t.Fatalf("dashboards %v, want <stack>-pageviews and <stack>-checkouts", names)
	}
	got := metricKeys(t, body)
	s := fx.stack
	fnID := func(name string) string {
		id, _ := fx.tmpl.function(t, name)
		return id
	}
	// Every function of the stack, a pipeline's with its Pipeline
	// dimension on its own metrics.
	var want []string
	for id, fn := range fx.tmpl.ofType("AWS::Lambda::Function") {
		name, _ := fn.Metadata[FunctionMetadataKey].(string)
		dims := "Function=" + name
		if p, ok := fn.Metadata[PipelineMetadataKey].(string); ok {
			dims += ",Pipeline=" + p
		}
		dim := "FunctionName=${" + id + "}"
		want = append(want, "AWS/Lambda Errors "+dim+" Sum", "AWS/Lambda Throttles "+dim+" Sum", "AWS/Lambda Invocations "+dim+" Sum",
			"AWS/Lambda Duration "+dim+" p50", "AWS/Lambda Duration "+dim+" p99")
		for _, m := range append(append([]string{}, FunctionFlows[name].In...), FunctionFlows[name].Out...) {
			want = append(want, "Tributary "+m+" "+dims+" Sum")
		}
		if fx.tmpl.streamMappingsOf(id) > 0 {
			want = append(want, "AWS/Lambda IteratorAge "+dim+" Maximum", "Tributary RecordsSetAside "+dims+" Sum")
		}
	}
	if len(FunctionFlows[FunctionSnapshot].In)+len(FunctionFlows[FunctionSnapshot].Out) != 0 {
		t.Error("snapshot has no EMF metrics; FunctionFlows should not list any")
	}
	for _, name := range []string{FunctionAggregate, FunctionEnrich, FunctionCDC, FunctionTimeline, FunctionJoin, FunctionDetect, FunctionPublish, FunctionProject, FunctionStatusCodes} {
		if fx.tmpl.streamMappingsOf(fnID(name)) == 0 {
			t.Errorf("%s has no stream mapping", name)
		}
	}
	// The pipeline's own row, pageviews' only: aggregate consumes the
	// stream; the ticker only finalizes, which can correct and retract
	// sessions.
	const pv = ",Pipeline=pageviews"
	want = append(want, "Tributary WatermarkLagMs Function=aggregate"+pv+" Maximum", "Tributary WatermarkLagMs Function=aggregate"+pv+" p50",
		"Tributary Corrections Function=ticker"+pv+" Sum", "Tributary Retractions Function=ticker"+pv+" Sum")
	for _, m := range []string{"LateDropped", "Corrections", "Retractions", "DuplicatesSuppressed", "DuplicateConflicts", "DuplicatesSkipped"} {
		want = append(want, "Tributary "+m+" Function=aggregate"+pv+" Sum")
	}
	want = append(want, "Tributary RecordsQuarantined Function=quarantine Sum", "Tributary RecordsMissing Function=quarantine Sum")
	// The archive's chain problems beside the records set aside, and the
	// bytes it wrote beside the tables' capacity (its records and objects
	// are its flow, above).
	want = append(want, "Tributary ChainHeadsUnreadable Function=archive Sum", "Tributary ChainRestarts Function=archive Sum",
		"Tributary BytesWritten Function=archive Sum")
	for _, q := range []string{logicalID(s.Stack, s.Quarantine.Failures), logicalID(s.Stack, s.Quarantine.FailuresDLQ), logicalID(s.Stack, s.Work.TasksDLQ),
		logicalID(s.Stack, s.Work.TasksFifoDLQ), logicalID(s.Stack, s.TickerFailures),
		logicalID(s.Stack, pageviews(s).TickerFailures), logicalID(s.Stack, s.Pipelines.Pipeline("checkouts").TickerFailures)} {
		want = append(want, "AWS/SQS ApproximateNumberOfMessagesVisible QueueName=${"+q+".QueueName} Maximum")
	}
	tables := fx.tmpl.ofType("AWS::DynamoDB::Table")
	if len(tables) < 9 {
		t.Errorf("%d tables in the template; the stack has at least 9", len(tables))
	}
	for id := range tables {
		want = append(want, "AWS/DynamoDB ConsumedReadCapacityUnits TableName=${"+id+"} Sum", "AWS/DynamoDB ConsumedWriteCapacityUnits TableName=${"+id+"} Sum")
	}
	for _, k := range want {
		if got[k] == nil {
			t.Errorf("the dashboard has no %s", k)
		}
	}
	wantSet := map[string]bool{}
	for _, k := range want {
		wantSet[k] = true
	}
	for k, titles := range got {
		if !wantSet[k] {
			t.Errorf("the dashboard shows %s (in %v), which no test expects", k, titles)
		}
	}

	// The iterator ages are labelled by the mappings' sources.
	ages := map[string]string{}
	for _, w := range body.Widgets {
		for _, m := range w.Properties.Metrics {
			if len(m) > 1 && m[1] == "IteratorAge" {
				ages[fmt.Sprint(m[3])] = fmt.Sprint(m[len(m)-1].(map[string]any)["label"])
			}
		}
	}
	for name, label := range map[string]string{
		FunctionAggregate: "aggregate[pageviews] ← Events (enhanced fan-out)", FunctionEnrich: "enrich ← Events (enhanced fan-out)",
		FunctionCDC: "cdc ← ProfilesCDC/Profiles (DynamoDB stream)", FunctionTimeline: "timeline ← Timelines/Follows (DynamoDB stream), Timelines/Tweets (DynamoDB stream)",
	} {
		if got := ages["${"+fnID(name)+"}"]; got != label {
			t.Errorf("iterator age of %s is labelled %q, want %q", name, got, label)
		}
	}

	// The results, from the logs: top keys and the latest results over the
	// pipeline's functions' log groups, what was set aside over every
	// function's.
	groups := functionLogGroupIDs(t)
	source := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString("SOURCE '${" + groups[n] + "}' | ")
		}
		return b.String()
	}
	logs := map[string]string{}
	texts := 0
	for _, w := range body.Widgets {
		switch w.Type {
		case "log":
			logs[w.Properties.Title] = w.Properties.Query
		case "text":
			texts++
			for _, name := range queryNames("pageviews") {
				if !strings.Contains(w.Properties.Markdown, name) {
					t.Errorf("the dashboard's text does not name the saved query %q", name)
				}
			}
		}
	}
	if texts != 1 {
		t.Errorf("%d text widgets, want 1", texts)
	}
	results := source(FunctionAggregate, FunctionTicker)
	// Every function's group, in stackFunctions' order (by label).
	var allSources strings.Builder
	for _, fn := range stackFunctions(fx.stack.Stack) {
		allSources.WriteString("SOURCE '${" + logicalID(fx.stack.Stack, fn.fn.LogGroup()) + "}' | ")
	}
	for title, prefix := range map[string]string{
		"pageviews: top keys by events (tumbling:1m0s windows)":              results + QueryString(pageviews(fx.stack).Config, QueryTopKeys),
		"pageviews: latest window results (final, corrections, retractions)": results + "fields @timestamp, resultType, key, window, start, revision, count, sum, mean, min, max, p50, p99\n| filter msg = \"window result\" and pipeline = \"pageviews\"",
		"records set aside or quarantined, and why":                          allSources.String() + QueryString(pageviews(fx.stack).Config, QuerySetAside),
	} {
		q, ok := logs[title]
		if !ok {
			t.Errorf("no log widget %q; log widgets: %v", title, logs)
			continue
		}
		if !strings.HasPrefix(q, prefix) {
			t.Errorf("log widget %q:\n query %q\n want it to start %q", title, q, prefix)
		}
	}
	if len(logs) != 3 {
		t.Errorf("%d log widgets, want 3", len(logs))
	}
	for _, o := range []string{"PageviewsDashboardName", "PageviewsDashboardUrl"} {
		if _, ok := fx.tmpl.Outputs[o]; !ok {
			t.Errorf("no output %s", o)
		}
	}
}

// TestDashboardMetricsAreEmitted: every Tributary metric the dashboard
// shows is a name some package or function writes (a string literal in
// their Go sources), so no widget stays empty for a typo.
func TestDashboardMetricsAreEmitted(t *testing.T) {
	literals := map[string]bool{}
	lit := regexp.MustCompile(`"([A-Za-z]+)"`)
	for _, dir := range []string{"../../pkg", "../../functions"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range lit.FindAllSubmatch(b, -1) {
				literals[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range fx.tmpl.ofType("AWS::CloudWatch::Dashboard") {
		for k := range metricKeys(t, parseDashboard(t, d)) {
			f := strings.Fields(k)
			if f[0] != MetricsNamespace || literals[f[1]] {
				continue
			}
			t.Errorf("the dashboard shows %s, but no Go source under pkg/ or functions/ names it", k)
		}
	}
}

// TestResultLogFieldsMatchAggregate: the message and the fields the
// queries and the rule select on are the ones package aggregate logs.
func TestResultLogFieldsMatchAggregate(t *testing.T) {
	b, err := os.ReadFile("../../pkg/aggregate/output.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if !strings.Contains(src, fmt.Sprintf("const ResultLogMessage = %q", ResultLogMessage)) {
		t.Errorf("package aggregate does not log results as %q", ResultLogMessage)
	}
	for _, f := range []string{fieldResultType, fieldPipeline, fieldKey, fieldWindow, fieldCountDelta, "start", "end", "revision"} {
		if !strings.Contains(src, fmt.Sprintf("(%q", f)) {
			t.Errorf("package aggregate's result line has no field %q", f)
		}
	}
	for _, f := range []string{"count", "sum", "min", "max", "mean", "distinct"} {
		if !strings.Contains(src, fmt.Sprintf("name(%q)", f)) {
			t.Errorf("package aggregate's result line has no value field %q", f)
		}
	}
	if !strings.Contains(src, `strings.ReplaceAll(name, ".", "_")`) {
		t.Error("package aggregate no longer writes quantile fields with _ for .; quantileField must follow")
	}
}

func TestQuantileField(t *testing.T) {
	for q, want := range map[float64]string{0.5: "p50", 0.99: "p99", 0.999: "p99_9", 0.29: "p29"} {
		if got := quantileField(q); got != want {
			t.Errorf("quantileField(%v) = %q, want %q", q, got, want)
		}
	}
}

// TestDashboardPerPipeline: the dashboard is a function of the pipeline
// config: two pipelines, each run by its own functions, get a dashboard,
// four queries and a rule each, named apart, each over its own functions'
// log groups and metrics; a function without a log group of its own is
// refused, naming it.
func TestDashboardPerPipeline(t *testing.T) {
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Two"), nil)
	assets := t.TempDir()
	writeDummyAssets(assets)
	files := testPipelineFiles(t, map[string]string{
		"pageviews": readRepoPipeline(t, "pageviews"),
		"clicks":    `{"name": "clicks", "windows": [{"kind": "session", "gap": "1m"}, {"kind": "hopping", "size": "2m", "advance": "1m"}], "aggregates": ["sum"], "value": "data.ms", "partitionKeyIsGroupingKey": true}`,
		"quiet":     `{"name": "quiet", "windows": [{"kind": "tumbling", "size": "1m"}], "outputs": {"table": true, "log": false}}`,
	})
	pipes, err := NewPipelines(stack, "Pipelines", PipelinesProps{AssetDir: assets, Files: files, Events: testEventsStream(stack),
		OnFailure: NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range pipes.Pipelines {
		if _, err := NewDashboard(stack, "Pipeline"+exportedName(x.Name), DashboardProps{Pipeline: x}); err != nil {
			t.Fatal(err)
		}
	}
	views, clicks := pipes.Pipeline("pageviews"), pipes.Pipeline("clicks")
	tmpl := templateOf(stack)
	names := map[string]string{}
	for id, d := range tmpl.ofType("AWS::CloudWatch::Dashboard") {
		name := tokenText(t, d.Properties["DashboardName"])
		names[name] = id
		body := parseDashboard(t, d)
		keys := metricKeys(t, body)
		pipe := strings.TrimPrefix(name, "Two-")
		// The intro's commands run as given: cmd/results needs -pipeline
		// when the repository has several, and -follow reads only a
		// pipeline that puts its results on the stream (pageviews).
		for _, w := range body.Widgets {
			if w.Type != "text" {
				continue
			}
			md := w.Properties.Markdown
			if !strings.Contains(md, "go run ./cmd/results -pipeline "+pipe+" -parameter <ViewsParameterName> -key <key>") {
				t.Errorf("dashboard %s's intro does not say how to read its results by key: %s", name, md)
			}
			if follows := strings.Contains(md, "-follow"); follows != (pipe == "pageviews") {
				t.Errorf("dashboard %s's intro offers -follow: %v, want it only for a pipeline with a stream: %s", name, follows, md)
			}
		}
		if pipe == "quiet" {
			// outputs.log false: no widget reads result lines, and the
			// intro says where the results are instead.
			for _, w := range body.Widgets {
				if strings.Contains(w.Properties.Query, "window result") {
					t.Errorf("dashboard %s reads result lines the pipeline does not write: %q", name, w.Properties.Title)
				}
				if w.Type == "text" && (!strings.Contains(w.Properties.Markdown, "Results are not logged") || strings.Contains(w.Properties.Markdown, "top-keys")) {
					t.Errorf("dashboard %s's intro: %s", name, w.Properties.Markdown)
				}
			}
		}
		if keys["Tributary Corrections Function=aggregate,Pipeline="+pipe+" Sum"] == nil {
			t.Errorf("dashboard %s does not show %s's corrections", name, pipe)
		}
		for k, titles := range keys {
			if strings.Contains(k, "Corrections") && !strings.Contains(k, "Pipeline="+pipe+" ") && strings.Contains(strings.Join(titles, ","), "late records") {
				t.Errorf("dashboard %s shows another pipeline's %s in its pipeline row", name, k)
			}
		}
	}
	if len(names) != 3 || names["Two-pageviews"] == "" || names["Two-clicks"] == "" || names["Two-quiet"] == "" {
		t.Errorf("dashboards %v, want one per pipeline", names)
	}
	queries := tmpl.ofType("AWS::Logs::QueryDefinition")
	byName := map[string]cfnResource{}
	for _, q := range queries {
		byName[q.Properties["Name"].(string)] = q
	}
	if len(byName) != 10 {
		t.Errorf("%d saved queries, want 4 per pipeline and 2 for quiet, which logs no result: %v", len(byName), byName)
	}
	for _, name := range []string{"Tributary/quiet/a record's path by event id", "Tributary/quiet/records set aside or quarantined, and why"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no saved query %q", name)
		}
	}
	lg := func(x *Pipeline) any {
		return []any{ref(logicalID(stack, x.Aggregate.LogGroup)), ref(logicalID(stack, x.Ticker.LogGroup))}
	}
	q := byName["Tributary/clicks/results of a key over a time range"]
	if fmt.Sprint(q.Properties["LogGroupNames"]) != fmt.Sprint(lg(clicks)) {
		t.Errorf("clicks' results query reads %v, want only its functions' log groups %v", q.Properties["LogGroupNames"], lg(clicks))
	}
	// No count aggregate: the fields are the pipeline's, top keys count results.
	if s := q.Properties["QueryString"].(string); !strings.HasPrefix(s, "fields @timestamp, resultType, window, start, end, revision, sum\n") {
		t.Errorf("clicks' results query: %q", s)
	}
	if s := byName["Tributary/clicks/top keys by count in the last hour"].Properties["QueryString"].(string); !strings.Contains(s, `window = "session:1m0s"`) ||
		!strings.Contains(s, "stats count(*) as results by key") {
		t.Errorf("clicks' top keys query: %q", s)
	}
	if q := byName["Tributary/pageviews/results of a key over a time range"]; fmt.Sprint(q.Properties["LogGroupNames"]) != fmt.Sprint(lg(views)) {
		t.Errorf("pageviews' results query reads %v", q.Properties["LogGroupNames"])
	}
	rules := tmpl.ofType("AWS::CloudWatch::InsightRule")
	ruleNames := map[string]bool{}
	for _, r := range rules {
		ruleNames[tokenText(t, r.Properties["RuleName"])] = true
	}
	if !ruleNames["Two-pageviews-top-keys"] || !ruleNames["Two-clicks-top-keys"] || len(ruleNames) != 2 {
		t.Errorf("rules %v, want one per pipeline that logs its results", ruleNames)
	}

	// A function logging to a group the stack does not hold is refused.
	app = newTestApp(t.TempDir(), nil)
	stack = awscdk.NewStack(app, jsii.String("NoGroup"), nil)
	pipes, err = NewPipelines(stack, "Pipelines", PipelinesProps{AssetDir: assets, Files: files[:1], Events: testEventsStream(stack),
		OnFailure: NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	fn := awslambda.NewFunction(stack, jsii.String("Bare"), &awslambda.FunctionProps{Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
		Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(assets, "aggregate")), nil)})
	fn.Node().DefaultChild().(awslambda.CfnFunction).AddMetadata(jsii.String(FunctionMetadataKey), jsii.String("bare"))
	_, err = NewDashboard(stack, "P", DashboardProps{Pipeline: pipes.Pipelines[0]})
	if err == nil || !strings.Contains(err.Error(), "function bare has no log group of its own") {
		t.Errorf("a function without its own log group: %v", err)
	}
	// A pipeline of another stack is refused.
	other := awscdk.NewStack(app, jsii.String("Other"), nil)
	if _, err := NewDashboard(other, "Q", DashboardProps{Pipeline: pipes.Pipelines[0]}); err == nil || !strings.Contains(err.Error(), "is not in stack Other") {
		t.Errorf("a pipeline of another stack: %v", err)
	}
}
