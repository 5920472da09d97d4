package tributary

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// operatorMetrics are the own metrics (package keyed) of a join's or a
// detection's stream function, by {Function, Pipeline}: how far its
// watermark is behind, the records it dropped as late, and the producer
// copies and redeliveries it suppressed.
var operatorMetrics = []string{"LateDropped", "DuplicatesSuppressed", "DuplicateConflicts", "DuplicatesSkipped"}

// OperatorDashboardProps configures NewOperatorDashboard.
type OperatorDashboardProps struct {
	// Name, Kind and Path are the file's: the dashboard is named
	// <stack name>-<Name>. Required.
	Name string
	Kind pipeline.Kind
	Path string
	// Summary is a sentence on what it does, atop the dashboard.
	Summary string
	// Functions are its functions, in scope's stack. Required.
	Functions []*GoFunction
	// Tables are its own tables, whose consumed capacity it shows.
	Tables []awsdynamodb.ITable
}

// OperatorDashboard is what a person opens to see one join or detection.
type OperatorDashboard struct {
	constructs.Construct
	Name      string
	Dashboard awscloudwatch.Dashboard
}

// NewOperatorDashboard adds under scope, in a construct id, the dashboard
// of one join or detection declared in a pipeline file, as NewDashboard
// does for an aggregation: per function, its invocations and events in and
// out, errors, throttles and duration p50/p99, the iterator age of its
// stream mapping; the watermark lag, late records and duplicates of its
// stream function (by {Function, Pipeline}); records set aside; its
// tables' consumed capacity. It adds the stack outputs <Name>DashboardName
// and <Name>DashboardUrl, and fails when a function is not in scope's
// stack.
func NewOperatorDashboard(scope constructs.Construct, id string, props OperatorDashboardProps) (*OperatorDashboard, error) {
	if props.Name == "" || len(props.Functions) == 0 {
		return nil, fmt.Errorf("operator dashboard %s: Name and Functions are required", id)
	}
	stack := awscdk.Stack_Of(scope)
	fns := stackFunctions(stack)
	var mine []stackFunction
	for _, want := range props.Functions {
		ref := resolvedJSON(stack, want.Function.FunctionName())
		i := slices.IndexFunc(fns, func(f stackFunction) bool { return f.ref == ref })
		if i < 0 {
			return nil, fmt.Errorf("%s %s dashboard: its function %s is not in stack %s", props.Kind, props.Name, *want.Node().Path(), *stack.StackName())
		}
		mine = append(mine, fns[i])
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &OperatorDashboard{Construct: c, Name: props.Name}
	d.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   awscdk.Fn_Join(jsii.String("-"), &[]*string{stack.StackName(), jsii.String(props.Name)}),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
	var names []string
	for _, fn := range mine {
		names = append(names, fn.label())
	}
	md := fmt.Sprintf("# %s %s\nDeclared in `%s` (kind `%s`), run by %s. %s", kindTitle(props.Kind), props.Name, props.Path, props.Kind, strings.Join(names, " and "), props.Summary)
	d.Dashboard.AddWidgets(awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{Markdown: jsii.String(md), Width: jsii.Number(24), Height: jsii.Number(2)}))

	w := &widgets{stack: stack, fns: mine}
	for _, row := range w.flows() {
		d.Dashboard.AddWidgets(row...)
	}
	var lag, counts, aside []awscloudwatch.IMetric
	for _, fn := range mine {
		if !hasStreamMapping(stack, fn) {
			continue
		}
		lag = append(lag, own(metricWatermark, fn, "Maximum"), own(metricWatermark, fn, "p50"))
		for _, m := range operatorMetrics {
			counts = append(counts, own(m, fn, "Sum"))
		}
		aside = append(aside, own(metricSetAside, fn, "Sum"))
	}
	var errs, throttles []awscloudwatch.IMetric
	for _, fn := range mine {
		errs = append(errs, fn.fn.MetricErrors(opts("Sum", fn.label())))
		throttles = append(throttles, fn.fn.MetricThrottles(opts("Sum", fn.label())))
	}
	d.Dashboard.AddWidgets(
		graph(props.Name+": watermark lag (ms behind processing time, max and p50)", 8, lag),
		graph(props.Name+": late records dropped, duplicates suppressed, conflicts, redeliveries skipped", 8, counts),
		graph(props.Name+": records set aside (never processable)", 8, aside),
	)
	d.Dashboard.AddWidgets(
		graph("errors (failed invocations)", 12, errs),
		graph("throttles (invocations refused)", 12, throttles),
	)
	d.Dashboard.AddWidgets(w.latency()...)
	var reads, writes []awscloudwatch.IMetric
	for _, t := range props.Tables {
		label := constructLabel(stack, t)
		reads = append(reads, t.MetricConsumedReadCapacityUnits(opts("Sum", label)))
		writes = append(writes, t.MetricConsumedWriteCapacityUnits(opts("Sum", label)))
	}
	if len(reads) > 0 {
		d.Dashboard.AddWidgets(
			graph("DynamoDB read units consumed (per minute)", 12, reads),
			graph("DynamoDB write units consumed (per minute)", 12, writes),
		)
	}

	exported := exportedName(props.Name)
	output(stack, exported+"DashboardName", d.Dashboard.DashboardName(), fmt.Sprintf("CloudWatch dashboard of %s %s", props.Kind, props.Name))
	output(stack, exported+"DashboardUrl", awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://"), stack.Region(), jsii.String(".console.aws.amazon.com/cloudwatch/home?region="), stack.Region(),
		jsii.String("#dashboards/dashboard/"), d.Dashboard.DashboardName(),
	}), fmt.Sprintf("open the dashboard of %s %s in the console", props.Kind, props.Name))
	return d, nil
}

// kindTitle heads an operator's dashboard.
func kindTitle(k pipeline.Kind) string {
	switch k {
	case pipeline.KindJoin:
		return "Join"
	case pipeline.KindCEP:
		return "Detection"
	}
	return "Pipeline"
}
