package tributary

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// alarmKey names an alarm by what it watches: "<namespace> <metric>
// <dimension>=<value>", the value as resourceName writes it.
func alarmKey(p map[string]any) string {
	var dims []string
	for _, d := range asList(p["Dimensions"]) {
		d := d.(map[string]any)
		dims = append(dims, fmt.Sprintf("%v=%s", d["Name"], resourceName(d["Value"])))
	}
	if p["MetricName"] == nil {
		return "math " + fmt.Sprint(mathExpression(p)) + mathDimensions(p)
	}
	return fmt.Sprintf("%v %v %s", p["Namespace"], p["MetricName"], strings.Join(dims, ","))
}

// mathDimensions are the dimensions of a metric-math alarm's first metric,
// " Function=aggregate,Pipeline=pageviews", to tell per-pipeline alarms
// apart.
func mathDimensions(p map[string]any) string {
	for _, m := range asList(p["Metrics"]) {
		if ms, ok := m.(map[string]any)["MetricStat"].(map[string]any); ok {
			var dims []string
			for _, d := range asList(ms["Metric"].(map[string]any)["Dimensions"]) {
				d := d.(map[string]any)
				dims = append(dims, fmt.Sprintf("%v=%v", d["Name"], d["Value"]))
			}
			sort.Strings(dims)
			return " " + strings.Join(dims, ",")
		}
	}
	return ""
}

// mathExpression is the expression of a metric-math alarm.
func mathExpression(p map[string]any) string {
	for _, m := range asList(p["Metrics"]) {
		if e, ok := m.(map[string]any)["Expression"].(string); ok {
			return e
		}
	}
	return ""
}

// alarmsByKey maps every alarm of tmpl by alarmKey; two alarms on one
// metric fail the test.
func alarmsByKey(t *testing.T, tmpl cfnTemplate) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, a := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		k := alarmKey(a.Properties)
		if out[k] != nil {
			t.Errorf("two alarms watch %s (one is %s)", k, id)
		}
		out[k] = a.Properties
	}
	return out
}

// wantAlarm is one alarm the stack must have.
type wantAlarm struct {
	key       string // alarmKey
	kind      AlarmKind
	statistic string
}

// stackAlarms lists the alarms issue 10 asks of the Tributary stack s.
func stackAlarms(s *TributaryStack) []wantAlarm {
	var want []wantAlarm
	fns := map[string]*GoFunction{
		FunctionIngest: s.Ingest.Function, FunctionQuarantine: s.Quarantine.Function.GoFunction,
		FunctionWorker: s.Work.Worker.GoFunction, FunctionCDC: s.Profiles.Function.GoFunction,
		FunctionTimeline: s.Timelines.Function.GoFunction, FunctionEnrich: s.Enrichment.Function.GoFunction,
		FunctionSnapshot: s.Snapshot.Function,
		FunctionCommands: s.EventSourcing.CommandsFn, FunctionPublish: s.EventSourcing.Publish.GoFunction,
		FunctionProject: s.EventSourcing.Project.GoFunction, FunctionStatusCodes: s.StatusCodes.Function.GoFunction,
		FunctionArchive: s.Archive.Function.GoFunction,
	}
	for _, name := range FunctionNames {
		if fns[name] == nil {
			continue // a pipeline's, below
		}
		dim := "FunctionName=" + logicalID(s.Stack, fns[name].Function)
		want = append(want,
			wantAlarm{"AWS/Lambda Errors " + dim, AlarmErrors, "Sum"},
			wantAlarm{"AWS/Lambda Throttles " + dim, AlarmThrottles, "Sum"})
	}
	// The stream consumers: their mappings' iterator age, and the records
	// they set aside (metric RecordsSetAside, Function=<name> as each main
	// passes it to metrics.New).
	for _, name := range []string{FunctionEnrich, FunctionCDC, FunctionTimeline, FunctionPublish, FunctionProject, FunctionStatusCodes, FunctionArchive} {
		want = append(want,
			wantAlarm{"AWS/Lambda IteratorAge FunctionName=" + logicalID(s.Stack, fns[name].Function), AlarmIteratorAge, "Maximum"})
		// The archiver keeps every record as it is and sets none aside:
		// an alarm on its RecordsSetAside could never fire.
		if name != FunctionArchive {
			want = append(want, wantAlarm{"Tributary RecordsSetAside Function=" + name, AlarmSetAside, "Sum"})
		}
	}
	// Each join's and detection's functions (one per file, as a
	// pipeline's): errors and throttles, and the stream function's
	// iterator age and records set aside by {Function, Pipeline}.
	type operator struct {
		name, binary string
		stream       *GoFunction
		others       []*GoFunction
	}
	var ops []operator
	for _, j := range s.Joins {
		ops = append(ops, operator{j.Config.Name, FunctionJoin, j.Function.GoFunction, nil})
	}
	for _, d := range s.Detections {
		ops = append(ops, operator{d.Config.Name, FunctionDetect, d.Detect.GoFunction, []*GoFunction{d.Admin}})
	}
	for _, o := range ops {
		for _, fn := range append([]*GoFunction{o.stream}, o.others...) {
			dim := "FunctionName=" + logicalID(s.Stack, fn.Function)
			want = append(want,
				wantAlarm{"AWS/Lambda Errors " + dim, AlarmErrors, "Sum"},
				wantAlarm{"AWS/Lambda Throttles " + dim, AlarmThrottles, "Sum"})
		}
		want = append(want,
			wantAlarm{"AWS/Lambda IteratorAge FunctionName=" + logicalID(s.Stack, o.stream.Function), AlarmIteratorAge, "Maximum"},
			wantAlarm{"Tributary RecordsSetAside Function=" + o.binary + ",Pipeline=" + o.name, AlarmSetAside, "Sum"})
	}
	// Each pipeline's functions: their own errors and throttles, the
	// aggregate's iterator age, and its records set aside and late share
	// by {Function, Pipeline}; each ticker's failure queue.
	queues := []awssqs.IQueue{s.Quarantine.Failures, s.Quarantine.FailuresDLQ, s.Work.TasksDLQ, s.Work.TasksFifoDLQ, s.TickerFailures}
	for _, x := range s.Pipelines.Pipelines {
		for _, fn := range []*GoFunction{x.Aggregate.GoFunction, x.Ticker} {
			dim := "FunctionName=" + logicalID(s.Stack, fn.Function)
			want = append(want,
				wantAlarm{"AWS/Lambda Errors " + dim, AlarmErrors, "Sum"},
				wantAlarm{"AWS/Lambda Throttles " + dim, AlarmThrottles, "Sum"})
		}
		// A window whose result is lost (its item expired first) is
		// counted by whichever of the two finalized it.
		for _, f := range []string{FunctionAggregate, FunctionTicker} {
			want = append(want, wantAlarm{"Tributary WindowsExpired Function=" + f + ",Pipeline=" + x.Name, AlarmWindowsExpired, "Sum"})
		}
		want = append(want,
			wantAlarm{"AWS/Lambda IteratorAge FunctionName=" + logicalID(s.Stack, x.Aggregate.Function), AlarmIteratorAge, "Maximum"},
			wantAlarm{"Tributary RecordsSetAside Function=aggregate,Pipeline=" + x.Name, AlarmSetAside, "Sum"},
			wantAlarm{"math IF(recordsIn > 0, 100 * FILL(lateDropped, 0) / recordsIn, 0) Function=aggregate,Pipeline=" + x.Name, AlarmLateDropped, ""})
		queues = append(queues, x.TickerFailures)
	}
	for _, q := range queues {
		want = append(want, wantAlarm{"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + logicalID(s.Stack, q) + ".QueueName", AlarmQueueDepth, "Maximum"})
	}
	return append(want,
		wantAlarm{"Tributary RecordsQuarantined Function=quarantine", AlarmQuarantined, "Sum"},
		wantAlarm{"Tributary RecordsMissing Function=quarantine", AlarmRecordsMissing, "Sum"},
		// quarantine's messages that are not on-failure records, set aside
		wantAlarm{"Tributary RecordsSetAside Function=quarantine", AlarmSetAside, "Sum"},
		wantAlarm{"Tributary Throttles Function=ingest", AlarmIngestThrottles, "Sum"},
		wantAlarm{"Tributary Dropped Function=ingest", AlarmIngestDropped, "Sum"},
		// the archiver's chain heads it could not read or had to restart
		wantAlarm{"math FILL(unreadable, 0) + FILL(restarts, 0) Function=archive", AlarmArchiveChain, ""},
		// a show's event log no command can read (answered 500): only an
		// operator repairs it
		wantAlarm{"Tributary EventLogDamaged Function=commands", AlarmEventLogDamaged, "Sum"},
	)
}

// TestStackAlarms: the stack alarms on what issue 10 lists — errors and
// throttles of every function, iterator age and records set aside of every
// stream consumer, the depth of every failure queue and DLQ (the ticker's
// included), quarantined and missing records, ingest's throttles and drops,
// aggregate's late share, the archive's chain problems — each on the metric and dimensions the emitter
// uses, with the default threshold, period and evaluation count, and the
// topic as alarm and OK action. No other alarm exists.
func TestStackAlarms(t *testing.T) {
	s := fx.stack
	got := alarmsByKey(t, fx.tmpl)
	want := stackAlarms(s)
	topic := []any{ref(logicalID(s.Stack, s.Ops.Topic))}
	for _, w := range want {
		t.Run(w.key, func(t *testing.T) {
			p := got[w.key]
			if p == nil {
				t.Fatalf("no alarm on %s; alarms: %v", w.key, sortedKeys(got))
			}
			spec := alarmKindInfo(w.kind).Default
			props := map[string]any{
				"Threshold":          spec.Threshold,
				"EvaluationPeriods":  float64(spec.EvaluationPeriods),
				"DatapointsToAlarm":  float64(spec.EvaluationPeriods),
				"ComparisonOperator": "GreaterThanOrEqualToThreshold",
				"TreatMissingData":   "notBreaching",
				"AlarmActions":       topic,
				"OKActions":          topic,
			}
			if w.statistic != "" {
				props["Statistic"] = w.statistic
				props["Period"] = spec.Period.Seconds()
			}
			assertProps(t, w.key, p, props)
			if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, alarmKindInfo(w.kind).Meaning) {
				t.Errorf("description %q does not say what the alarm means and what to do", d)
			}
		})
	}
	if len(got) != len(want) {
		t.Errorf("%d alarms, want %d: %v", len(got), len(want), sortedKeys(got))
	}
}

// TestLateDroppedIsAShare: the late alarm divides aggregate's LateDropped
// by its RecordsIn over the same period, both summed.
func TestLateDroppedIsAShare(t *testing.T) {
	p := alarmsByKey(t, fx.tmpl)["math IF(recordsIn > 0, 100 * FILL(lateDropped, 0) / recordsIn, 0) Function=aggregate,Pipeline=pageviews"]
	if p == nil {
		t.Fatal("no late-dropped alarm")
	}
	stats := mathMetrics(t, p)
	metric := func(name string) any {
		return map[string]any{
			"Metric": map[string]any{"Namespace": "Tributary", "MetricName": name,
				"Dimensions": []any{map[string]any{"Name": "Function", "Value": "aggregate"}, map[string]any{"Name": "Pipeline", "Value": "pageviews"}}},
			"Period": 300.0, "Stat": "Sum",
		}
	}
	want := map[string]any{"recordsIn": metric("RecordsIn"), "lateDropped": metric("LateDropped")}
	if !reflect.DeepEqual(stats, want) {
		t.Errorf("metrics %v, want %v", stats, want)
	}
}

// mathMetrics are a metric-math alarm's metrics by id, each checked to
// return no data (only the expression may).
func mathMetrics(t *testing.T, p map[string]any) map[string]any {
	t.Helper()
	stats := map[string]any{}
	for _, m := range asList(p["Metrics"]) {
		m := m.(map[string]any)
		if ms, ok := m["MetricStat"].(map[string]any); ok {
			stats[m["Id"].(string)] = ms
			if m["ReturnData"] != false {
				t.Errorf("metric %s returns data; only the expression may", m["Id"])
			}
		}
	}
	return stats
}

// TestArchiveChainAlarm: the archive's chain alarm adds the archiver's
// ChainHeadsUnreadable and ChainRestarts (package archive's metrics, by
// Function=archive), each summed over the alarm's period, and fires on
// one in a period, to the topic, a period without invocations not
// breaching.
func TestArchiveChainAlarm(t *testing.T) {
	const key = "math FILL(unreadable, 0) + FILL(restarts, 0) Function=archive"
	p := alarmsByKey(t, fx.tmpl)[key]
	if p == nil {
		t.Fatal("no alarm on the archive's chain problems")
	}
	topic := []any{ref(logicalID(fx.stack.Stack, fx.stack.Ops.Topic))}
	assertProps(t, key, p, map[string]any{"Threshold": 1.0, "EvaluationPeriods": 1.0, "DatapointsToAlarm": 1.0,
		"ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
		"AlarmActions": topic, "OKActions": topic})
	stats := mathMetrics(t, p)
	metric := func(name string) any {
		return map[string]any{
			"Metric": map[string]any{"Namespace": "Tributary", "MetricName": name,
				"Dimensions": []any{map[string]any{"Name": "Function", "Value": "archive"}}},
			"Period": 300.0, "Stat": "Sum",
		}
	}
	want := map[string]any{"unreadable": metric("ChainHeadsUnreadable"), "restarts": metric("ChainRestarts")}
	if !reflect.DeepEqual(stats, want) {
		t.Errorf("metrics %v, want %v", stats, want)
	}
	if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, "docs/archive.md") {
		t.Errorf("description %q does not say where to read what to do", d)
	}
}

// TestTickerFailureAlarms: a failing ticker is seen twice over — its
// Errors, and its failure destination's depth.
func TestTickerFailureAlarms(t *testing.T) {
	s := fx.stack
	got := alarmsByKey(t, fx.tmpl)
	topic := []any{ref(logicalID(s.Stack, s.Ops.Topic))}
	for _, k := range []string{
		"AWS/Lambda Errors FunctionName=" + logicalID(s.Stack, pageviews(s).Ticker.Function),
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + logicalID(s.Stack, pageviews(s).TickerFailures) + ".QueueName",
	} {
		p := got[k]
		if p == nil {
			t.Errorf("no alarm on %s", k)
			continue
		}
		assertProps(t, k, p, map[string]any{"Threshold": 1.0, "AlarmActions": topic, "OKActions": topic})
	}
}

// TestAlarmTopic: the topic is encrypted with its own rotated key, which
// CloudWatch alarms of this account may use (they cannot publish to a
// topic under the AWS managed key); the topic refuses requests without TLS
// and lets those alarms publish; no subscription unless one is configured.
func TestAlarmTopic(t *testing.T) {
	s := fx.stack
	topicID, keyID := logicalID(s.Stack, s.Ops.Topic), logicalID(s.Stack, s.Ops.TopicKey)
	assertProps(t, "topic", fx.tmpl.Resources[topicID].Properties, map[string]any{"KmsMasterKeyId": getAtt(keyID, "Arn")})
	key := fx.tmpl.Resources[keyID].Properties
	assertProps(t, "key", key, map[string]any{"EnableKeyRotation": true})
	cond := func(st map[string]any) bool {
		c := st["Condition"].(map[string]any)
		return c["StringEquals"].(map[string]any)["aws:SourceAccount"] != nil &&
			strings.Contains(resourceName(c["ArnLike"].(map[string]any)["aws:SourceArn"]), ":cloudwatch:")
	}
	var keyGrant bool
	for _, st := range asList(key["KeyPolicy"].(map[string]any)["Statement"]) {
		st := st.(map[string]any)
		if reflect.DeepEqual(st["Principal"], map[string]any{"Service": "cloudwatch.amazonaws.com"}) {
			keyGrant = reflect.DeepEqual(st["Action"], []any{"kms:Decrypt", "kms:GenerateDataKey*"}) && cond(st)
		}
	}
	if !keyGrant {
		t.Errorf("key policy does not let CloudWatch alarms of this account decrypt and generate data keys: %v", key["KeyPolicy"])
	}
	var publish, tls bool
	for _, p := range fx.tmpl.ofType("AWS::SNS::TopicPolicy") {
		if !reflect.DeepEqual(p.Properties["Topics"], []any{ref(topicID)}) {
			continue
		}
		for _, st := range asList(p.Properties["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			switch {
			case st["Effect"] == "Allow" && reflect.DeepEqual(st["Principal"], map[string]any{"Service": "cloudwatch.amazonaws.com"}):
				publish = st["Action"] == "sns:Publish" && cond(st)
			case st["Effect"] == "Deny" && fmt.Sprint(st["Condition"]) == "map[Bool:map[aws:SecureTransport:false]]":
				tls = true
			}
		}
	}
	if !publish || !tls {
		t.Errorf("topic policy: CloudWatch publish %v, TLS only %v; want both", publish, tls)
	}
	if n := len(fx.tmpl.ofType("AWS::SNS::Subscription")); n != 0 {
		t.Errorf("%d subscriptions without %s", n, ContextAlarmEmail)
	}
	if o := fx.tmpl.Outputs["AlarmTopicArn"]; !reflect.DeepEqual(o.Value, ref(topicID)) {
		t.Errorf("output AlarmTopicArn = %v, want the topic", o.Value)
	}
}

// TestNewAlarmsIsGeneric: on a stack of its own, a function, a stream
// consumer and queues added by any construct get their alarms from one
// call, a plain queue gets none, a second call adds nothing, and an alarm
// created after SendAlarmsTo still gets the topic as actions.
func TestNewAlarmsIsGeneric(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	addNag(app)
	stack := awscdk.NewStack(app, jsii.String("Generic"), nil)
	failures := NewQueueWithDLQ(stack, "Jobs", QueueWithDLQProps{ConsumerTimeout: time.Minute})
	nested := constructs.NewConstruct(stack, jsii.String("Team"))
	fifo := NewQueueWithDLQ(nested, "Orders", QueueWithDLQProps{ConsumerTimeout: time.Minute, FIFO: true})
	plain := awssqs.NewQueue(stack, jsii.String("Plain"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
	table := awsdynamodb.NewTable(nested, jsii.String("Source"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
	})
	consumer := NewStreamFunction(nested, "Consumer", StreamFunctionProps{
		Function: GoFunctionProps{Name: FunctionTimeline, AssetDir: assets}, Table: table, OnFailure: failures,
	})
	plainFn := NewGoFunction(stack, "Lone", GoFunctionProps{Name: FunctionSnapshot, AssetDir: assets})
	topic, _ := NewAlarmTopic(stack, "Topic", "")
	SendAlarmsTo(stack, topic)

	added := NewAlarms(stack, DefaultAlarmSpecs())
	if again := NewAlarms(stack, DefaultAlarmSpecs()); len(again) != 0 {
		t.Errorf("a second call added %d alarms, want 0", len(again))
	}
	awscloudwatch.NewAlarm(stack, jsii.String("AddedLater"), &awscloudwatch.AlarmProps{
		Metric:            awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String("Other"), MetricName: jsii.String("Thing")}),
		Threshold:         jsii.Number(1),
		EvaluationPeriods: jsii.Number(1),
	})
	tmpl := templateOf(stack)
	got := alarmsByKey(t, tmpl)
	// The table's stream has no consumer with on-failure here other than
	// Jobs: Jobs is a failure queue twice over (DLQ owner and destination).
	want := []string{
		"AWS/Lambda Errors FunctionName=" + logicalID(stack, consumer.Function),
		"AWS/Lambda Throttles FunctionName=" + logicalID(stack, consumer.Function),
		"AWS/Lambda IteratorAge FunctionName=" + logicalID(stack, consumer.Function),
		"Tributary RecordsSetAside Function=" + FunctionTimeline,
		"AWS/Lambda Errors FunctionName=" + logicalID(stack, plainFn.Function),
		"AWS/Lambda Throttles FunctionName=" + logicalID(stack, plainFn.Function),
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + logicalID(stack, failures) + ".QueueName",
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + logicalID(stack, failures.DeadLetterQueue().Queue) + ".QueueName",
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + logicalID(stack, fifo.DeadLetterQueue().Queue) + ".QueueName",
		"Other Thing ",
	}
	sort.Strings(want)
	if k := sortedKeys(got); !reflect.DeepEqual(k, want) {
		t.Errorf("alarms on\n %v\nwant\n %v\n(none on %s, %s)", k, want, logicalID(stack, plain), logicalID(stack, fifo))
	}
	if len(added) != len(want)-1 {
		t.Errorf("NewAlarms returned %d alarms, want %d", len(added), len(want)-1)
	}
	topicRef := []any{ref(logicalID(stack, topic))}
	for k, p := range got {
		assertProps(t, k, p, map[string]any{"AlarmActions": topicRef, "OKActions": topicRef})
	}
	errs, warns := nagFindings(stack)
	for _, f := range append(errs, warns...) {
		if strings.Contains(f, "Alarm") || strings.Contains(f, "/Topic/") {
			t.Errorf("cdk-nag finding on the alarms or their topic: %s", f)
		}
	}
}

// TestFailureQueues: the failure queues of the stack are its DLQs, the
// stream mappings' on-failure queue and the ticker's asynchronous failure
// destination — not the tasks queues, which hold work.
func TestFailureQueues(t *testing.T) {
	s := fx.stack
	var got []string
	for _, q := range FailureQueues(s.Stack) {
		got = append(got, logicalID(s.Stack, q))
	}
	want := []string{logicalID(s.Stack, s.Quarantine.Failures), logicalID(s.Stack, s.Quarantine.FailuresDLQ), logicalID(s.Stack, s.Work.TasksDLQ),
		logicalID(s.Stack, s.Work.TasksFifoDLQ), logicalID(s.Stack, s.TickerFailures)}
	for _, x := range s.Pipelines.Pipelines {
		want = append(want, logicalID(s.Stack, x.TickerFailures))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("failure queues %v, want %v", got, want)
	}
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := keys(m)
	sort.Strings(out)
	return out
}
