package tributary

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// MetricsNamespace and MetricsDimension are where the functions' own
// metrics are (package metrics: EMF, namespace Tributary, dimension
// Function whose value is the name each main passes to metrics.New, the
// same as the function's FunctionMetadataKey; a pipeline's functions
// publish under {Function, Pipeline} instead, MetricsPipelineDimension).
const (
	MetricsNamespace = "Tributary"
	MetricsDimension = "Function"
)

// AlarmKind names a kind of alarm; the context keys
// tributary:alarm.<kind>.threshold, .periodSeconds and .evaluationPeriods
// override its AlarmSpec.
type AlarmKind string

// The alarm kinds. Every alarm compares with >= its threshold, treats
// missing data as not breaching (no invocations, no failures), and needs
// EvaluationPeriods breaching periods in a row.
const (
	// AlarmIteratorAge: AWS/Lambda IteratorAge (maximum, milliseconds) of
	// each function with a Kinesis or DynamoDB Streams mapping.
	AlarmIteratorAge AlarmKind = "iteratorAge"
	// AlarmErrors: AWS/Lambda Errors (sum) of each function.
	AlarmErrors AlarmKind = "errors"
	// AlarmThrottles: AWS/Lambda Throttles (sum) of each function.
	AlarmThrottles AlarmKind = "throttles"
	// AlarmQueueDepth: AWS/SQS ApproximateNumberOfMessagesVisible (maximum)
	// of each failure queue (FailureQueues).
	AlarmQueueDepth AlarmKind = "queueDepth"
	// AlarmSetAside: Tributary RecordsSetAside (sum) of each function with
	// a stream mapping, and of quarantine: records (for quarantine,
	// failures-queue messages) it could never process and set aside.
	AlarmSetAside AlarmKind = "setAside"
	// AlarmQuarantined: Tributary RecordsQuarantined (sum) of quarantine.
	AlarmQuarantined AlarmKind = "quarantined"
	// AlarmRecordsMissing: Tributary RecordsMissing (sum) of quarantine:
	// failed records no longer in their stream.
	AlarmRecordsMissing AlarmKind = "recordsMissing"
	// AlarmLateDropped: percentage of a pipeline's records its aggregate
	// dropped as late, 100 x LateDropped / RecordsIn per period, one alarm
	// per pipeline (dimensions Function and Pipeline).
	AlarmLateDropped AlarmKind = "lateDroppedPercent"
	// AlarmWindowsExpired: Tributary WindowsExpired (sum) of each
	// pipeline's aggregate and ticker: windows whose item the table's TTL
	// deleted before a watermark made them final, whose results are lost.
	AlarmWindowsExpired AlarmKind = "windowsExpired"
	// AlarmIngestThrottles: Tributary Throttles (sum) of ingest: records
	// Kinesis refused for lack of shard capacity.
	AlarmIngestThrottles AlarmKind = "ingestThrottles"
	// AlarmIngestDropped: Tributary Dropped (sum) of ingest: events a
	// drop route discarded under throttling.
	AlarmIngestDropped AlarmKind = "ingestDropped"
	// AlarmArchiveChain: Tributary ChainHeadsUnreadable + ChainRestarts
	// (sums) of archive: chain heads it could not read, or that gave a
	// batch no link, so an archive object has an unknown link.
	AlarmArchiveChain AlarmKind = "archiveChain"
	// AlarmEventLogDamaged: Tributary EventLogDamaged (sum) of commands:
	// requests answered 500 because a show's event log holds an item no
	// command can read (docs/event-sourcing.md says how to repair it).
	AlarmEventLogDamaged AlarmKind = "eventLogDamaged"
)

// AlarmSpec is when an alarm of one kind fires.
type AlarmSpec struct {
	Threshold         float64
	Period            time.Duration
	EvaluationPeriods int
}

// AlarmKindInfo is an alarm kind with its defaults and its meaning.
type AlarmKindInfo struct {
	Kind    AlarmKind
	Default AlarmSpec
	// Meaning says what fires it and what to do, as the table in docs/deploy.md
	// and the alarms' descriptions say it.
	Meaning string
}

// AlarmKinds lists the alarm kinds with their defaults. The defaults fire
// on the first failure that needs a person (a record set aside, a message
// in a failure queue, a failed invocation: handlers report per-record
// problems as batch item failures and set poison aside, so an invocation
// error is a whole batch failing after the SDK's own retries) and on
// sustained conditions only where a single data point is normal (iterator
// age during a burst, one throttled PutRecords).
var AlarmKinds = []AlarmKindInfo{
	{AlarmIteratorAge, AlarmSpec{300000, time.Minute, 3},
		"a stream consumer is falling behind (oldest record, ms, for 3 minutes); the mappings send records older than an hour to Failures"},
	{AlarmErrors, AlarmSpec{1, 5 * time.Minute, 1},
		"an invocation failed as a whole (crash, timeout, error returned); read the function's log"},
	{AlarmThrottles, AlarmSpec{1, 5 * time.Minute, 1},
		"Lambda refused an invocation: the account's concurrency, or the function's reserved concurrency, is too low"},
	{AlarmQueueDepth, AlarmSpec{dlqAlarmThreshold, dlqAlarmPeriod * time.Second, 1},
		"a failure queue or DLQ holds a message: read it (go run ./cmd/redrive -dlq <name> -dry-run), fix the cause, redrive"},
	{AlarmSetAside, AlarmSpec{1, 5 * time.Minute, 1},
		"a function set records (quarantine: failures-queue messages) aside that can never succeed; they are in the quarantine table with a reason"},
	{AlarmQuarantined, AlarmSpec{1, 5 * time.Minute, 1},
		"quarantine copied the records of a failed batch into the quarantine table"},
	{AlarmRecordsMissing, AlarmSpec{1, 5 * time.Minute, 1},
		"quarantine could not read failed records back: they left the stream's retention and are lost"},
	{AlarmLateDropped, AlarmSpec{1, 5 * time.Minute, 1},
		"the share (%) of aggregate's records dropped as late: producers' clocks or the allowed lateness are off"},
	{AlarmWindowsExpired, AlarmSpec{1, 5 * time.Minute, 1},
		"a window's item expired before a watermark made it final, and its result is lost: the pipeline's retention is shorter than a shard's lag (or a shard stood still); the log line names the key and window"},
	{AlarmIngestThrottles, AlarmSpec{1, time.Minute, 3},
		"Kinesis throttled ingest's PutRecords for 3 minutes in a row: the events stream needs more shards"},
	{AlarmIngestDropped, AlarmSpec{1, 5 * time.Minute, 1},
		"ingest dropped events of a drop route under throttling (by policy, but lost)"},
	{AlarmArchiveChain, AlarmSpec{1, 5 * time.Minute, 1},
		"the archiver met a shard's chain head it could not read (changed by hand, corrupt) or that gave its batch no link (a late duplicate invocation, a head moved by hand), so an object has an unknown link and a hole just before it goes unseen by a rebuild; its log line names the head's key and the shard, docs/archive.md says what to check"},
	{AlarmEventLogDamaged, AlarmSpec{1, 5 * time.Minute, 1},
		"commands answered 500 to a request on a show whose event log holds an item no command can read (an item written by hand, a version missing); the log line names the show, version and attribute, docs/event-sourcing.md says how to repair it"},
}

// alarmKindInfo returns kind's entry of AlarmKinds.
func alarmKindInfo(kind AlarmKind) AlarmKindInfo {
	for _, k := range AlarmKinds {
		if k.Kind == kind {
			return k
		}
	}
	panic(fmt.Sprintf("unknown alarm kind %q", kind))
}

// DefaultAlarmSpecs are AlarmKinds' defaults by kind.
func DefaultAlarmSpecs() map[AlarmKind]AlarmSpec {
	out := map[AlarmKind]AlarmSpec{}
	for _, k := range AlarmKinds {
		out[k.Kind] = k.Default
	}
	return out
}

// Failure queue depth: AWS/SQS publishes every queue's
// ApproximateNumberOfMessagesVisible each minute for free; one message in a
// DLQ or failure destination is a failure no retry fixed, which someone
// must look at and redrive.
const (
	dlqAlarmPeriod    = 60 // seconds: the metric's own resolution
	dlqAlarmThreshold = 1  // messages
)

// alarmIDSanitizer keeps what a construct id may hold from a node path.
var alarmIDSanitizer = regexp.MustCompile(`[^A-Za-z0-9]`)

// NewAlarmTopic creates the topic every alarm notifies, encrypted with its
// own key (rotated yearly): CloudWatch cannot publish to a topic encrypted
// with the AWS managed SNS key, so the key's policy lets CloudWatch alarms of
// this account and region use it, and the topic's policy lets them publish,
// and refuses requests without TLS. email, if not empty, is subscribed (AWS
// sends a confirmation mail first).
func NewAlarmTopic(scope constructs.Construct, id, email string) (awssns.Topic, awskms.Key) {
	stack := awscdk.Stack_Of(scope)
	c := constructs.NewConstruct(scope, jsii.String(id))
	alarms := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("arn:"), stack.Partition(), jsii.String(":cloudwatch:"), stack.Region(), jsii.String(":"), stack.Account(), jsii.String(":alarm:*"),
	})
	fromAlarms := &map[string]any{
		"StringEquals": map[string]any{"aws:SourceAccount": stack.Account()},
		"ArnLike":      map[string]any{"aws:SourceArn": alarms},
	}
	cloudwatch := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
	key := awskms.NewKey(c, jsii.String("Key"), &awskms.KeyProps{
		Description:       jsii.String("Encrypts the Tributary alarm topic; CloudWatch alarms of this account may use it to publish"),
		EnableKeyRotation: jsii.Bool(true),
		// It protects notifications in flight only: nothing to keep once
		// the topic is gone.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		PendingWindow: awscdk.Duration_Days(jsii.Number(7)),
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublishToTheEncryptedTopic"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: fromAlarms,
	}), nil)
	topic := awssns.NewTopic(c, jsii.String("Topic"), &awssns.TopicProps{
		DisplayName: jsii.String("Tributary alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: fromAlarms,
	}))
	if email != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(email), nil))
	}
	return topic, key
}

// alarmActionsAspect adds the topic as alarm and OK action of every
// CloudWatch alarm under the scope it is applied to.
type alarmActionsAspect struct {
	action  awscloudwatch.IAlarmAction
	visited map[string]bool
}

// Visit implements awscdk.IAspect.
func (a *alarmActionsAspect) Visit(node constructs.IConstruct) {
	alarm, ok := node.(awscloudwatch.Alarm)
	if !ok || a.visited[*alarm.Node().Path()] {
		return
	}
	a.visited[*alarm.Node().Path()] = true
	alarm.AddAlarmAction(a.action)
	alarm.AddOkAction(a.action)
}

// SendAlarmsTo makes topic the alarm and OK action of every CloudWatch alarm
// in stack, including alarms added after this call (an aspect, applied at
// synthesis). Do not add topic to an alarm yourself: it would be there
// twice.
func SendAlarmsTo(stack awscdk.Stack, topic awssns.ITopic) {
	awscdk.Aspects_Of(stack).Add(&alarmActionsAspect{action: awscloudwatchactions.NewSnsAction(topic), visited: map[string]bool{}},
		&awscdk.AspectOptions{Priority: awscdk.AspectPriority_MUTATING()})
}

// NewAlarms adds to stack the alarms of AlarmKinds, with specs by kind
// (DefaultAlarmSpecs for a kind missing from specs), over what the stack
// holds when it is called: errors and throttles of every function;
// iterator age and records set aside of every function with a stream
// mapping; the depth of every failure queue; quarantine's quarantined,
// missing and set-aside records; each pipeline's late share; ingest's throttles and
// drops; the archive's chain problems. A pipeline's functions (PipelineMetadataKey) get alarms of their
// own, ids "Aggregate<Pipeline>ErrorsAlarm" and so on, and their own
// metrics are read per pipeline ({Function, Pipeline}); errors, throttles
// and iterator age are Lambda's, per function and so per pipeline too.
// Functions are found by their FunctionMetadataKey, so a function or queue
// added before the call gets its alarms without more code. It is safe to
// call more than once: an alarm that exists is not added again. It returns
// the alarms it added, ordered by construct id.
func NewAlarms(stack awscdk.Stack, specs map[AlarmKind]AlarmSpec) []awscloudwatch.Alarm {
	a := &alarmMaker{stack: stack, specs: specs}
	fns := stackFunctions(stack)
	byName := map[string]stackFunction{}
	for _, fn := range fns {
		byName[fn.name] = fn
		id := fn.idPrefix()
		a.add(id+"ErrorsAlarm", AlarmErrors, fn.label(), fn.fn.MetricErrors(a.opts(AlarmErrors, "Sum")))
		a.add(id+"ThrottlesAlarm", AlarmThrottles, fn.label(), fn.fn.MetricThrottles(a.opts(AlarmThrottles, "Sum")))
		if fn.name == FunctionAggregate && fn.pipeline != "" {
			a.lateDropped(id, fn)
		}
		if (fn.name == FunctionAggregate || fn.name == FunctionTicker) && fn.pipeline != "" {
			a.add(id+"WindowsExpiredAlarm", AlarmWindowsExpired, fn.label(), a.own("WindowsExpired", fn, AlarmWindowsExpired))
		}
		if !hasStreamMapping(stack, fn) {
			continue
		}
		a.add(id+"IteratorAgeAlarm", AlarmIteratorAge, fn.label(), fn.fn.Metric(jsii.String("IteratorAge"), a.opts(AlarmIteratorAge, "Maximum")))
		// The archiver keeps every record as it is and sets none aside:
		// an alarm on its RecordsSetAside could never fire (its own
		// archiveChain alarm watches what can go wrong there).
		if fn.name != FunctionArchive {
			a.add(id+"SetAsideAlarm", AlarmSetAside, fn.label(), a.own("RecordsSetAside", fn, AlarmSetAside))
		}
	}
	for _, q := range FailureQueues(stack) {
		path := *q.Node().Path()
		a.add(alarmIDSanitizer.ReplaceAllString(path, "")+"DepthAlarm", AlarmQueueDepth, path,
			q.MetricApproximateNumberOfMessagesVisible(a.opts(AlarmQueueDepth, "Maximum")))
	}
	if fn, ok := byName[FunctionQuarantine]; ok {
		a.add("QuarantineQuarantinedAlarm", AlarmQuarantined, FunctionQuarantine, a.own("RecordsQuarantined", fn, AlarmQuarantined))
		// Quarantine reads a queue, not a stream, but it sets aside the
		// failures-queue messages that can never be quarantined (not an
		// on-failure record, a field over its bound): alarmed as every
		// stream consumer's set-aside records are.
		a.add("QuarantineSetAsideAlarm", AlarmSetAside, FunctionQuarantine, a.own("RecordsSetAside", fn, AlarmSetAside))
		a.add("QuarantineRecordsMissingAlarm", AlarmRecordsMissing, FunctionQuarantine, a.own("RecordsMissing", fn, AlarmRecordsMissing))
	}
	if fn, ok := byName[FunctionIngest]; ok {
		a.add("IngestKinesisThrottlesAlarm", AlarmIngestThrottles, FunctionIngest, a.own("Throttles", fn, AlarmIngestThrottles))
		a.add("IngestDroppedEventsAlarm", AlarmIngestDropped, FunctionIngest, a.own("Dropped", fn, AlarmIngestDropped))
	}
	if fn, ok := byName[FunctionArchive]; ok {
		a.archiveChain(fn)
	}
	if fn, ok := byName[FunctionCommands]; ok {
		a.add("CommandsEventLogDamagedAlarm", AlarmEventLogDamaged, FunctionCommands, a.own("EventLogDamaged", fn, AlarmEventLogDamaged))
	}
	sort.Slice(a.added, func(i, j int) bool { return *a.added[i].Node().Id() < *a.added[j].Node().Id() })
	return a.added
}

// hasStreamMapping reports whether a Kinesis or DynamoDB Streams mapping
// invokes fn.
func hasStreamMapping(stack awscdk.Stack, fn stackFunction) bool {
	for _, m := range mappingsOf(stack, fn) {
		if m.stream {
			return true
		}
	}
	return false
}

// alarmMaker creates the alarms of NewAlarms.
type alarmMaker struct {
	stack awscdk.Stack
	specs map[AlarmKind]AlarmSpec
	added []awscloudwatch.Alarm
}

func (a *alarmMaker) spec(kind AlarmKind) AlarmSpec {
	if s, ok := a.specs[kind]; ok {
		return s
	}
	return alarmKindInfo(kind).Default
}

// opts are the metric options of kind: its period and statistic.
func (a *alarmMaker) opts(kind AlarmKind, statistic string) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{
		Period:    awscdk.Duration_Seconds(jsii.Number(a.spec(kind).Period.Seconds())),
		Statistic: jsii.String(statistic),
	}
}

// lateDropped adds the alarm on the share of a pipeline's records its
// aggregate dropped as late, on {Function, Pipeline}.
func (a *alarmMaker) lateDropped(id string, fn stackFunction) {
	spec := a.spec(AlarmLateDropped)
	a.add(id+"LateDroppedAlarm", AlarmLateDropped, fn.label(), awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		// The share, not the count: some lateness is normal under the drop
		// policy and a count grows with traffic, while a rising share
		// means clocks or the allowed lateness are off. A period without
		// records is 0.
		Expression: jsii.String("IF(recordsIn > 0, 100 * FILL(lateDropped, 0) / recordsIn, 0)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"recordsIn":   a.own("RecordsIn", fn, AlarmLateDropped),
			"lateDropped": a.own("LateDropped", fn, AlarmLateDropped),
		},
		Label:  jsii.String(fn.label() + ": % of records dropped as late"),
		Period: awscdk.Duration_Seconds(jsii.Number(spec.Period.Seconds())),
	}))
}

// Package archive's chain-problem metrics (MetricChainHeadsUnreadable,
// MetricChainRestarts).
const (
	metricChainHeadsUnreadable = "ChainHeadsUnreadable"
	metricChainRestarts        = "ChainRestarts"
)

// archiveChain adds the alarm on the archive's chain problems: either
// leaves an object with an unknown link, so one alarm on their sum.
func (a *alarmMaker) archiveChain(fn stackFunction) {
	spec := a.spec(AlarmArchiveChain)
	a.add("ArchiveChainAlarm", AlarmArchiveChain, fn.label(), awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		// The archiver writes both each invocation; FILL keeps the sum
		// whole should one be missing from a period.
		Expression: jsii.String("FILL(unreadable, 0) + FILL(restarts, 0)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"unreadable": a.own(metricChainHeadsUnreadable, fn, AlarmArchiveChain),
			"restarts":   a.own(metricChainRestarts, fn, AlarmArchiveChain),
		},
		Label:  jsii.String(fn.label() + ": chain heads unreadable or restarted"),
		Period: awscdk.Duration_Seconds(jsii.Number(spec.Period.Seconds())),
	}))
}

// own is the function's own metric name (namespace Tributary, dimensions
// fn.dimensions(): per pipeline for a pipeline's function), summed over
// kind's period.
func (a *alarmMaker) own(name string, fn stackFunction, kind AlarmKind) awscloudwatch.Metric {
	dims := fn.dimensions()
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricsNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &dims,
		Period:        awscdk.Duration_Seconds(jsii.Number(a.spec(kind).Period.Seconds())),
		Statistic:     jsii.String("Sum"),
	})
}

func (a *alarmMaker) add(id string, kind AlarmKind, subject string, metric awscloudwatch.IMetric) {
	if a.stack.Node().TryFindChild(jsii.String(id)) != nil {
		return
	}
	spec := a.spec(kind)
	info := alarmKindInfo(kind)
	alarm := awscloudwatch.NewAlarm(a.stack, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             metric,
		Threshold:          jsii.Number(spec.Threshold),
		EvaluationPeriods:  jsii.Number(float64(spec.EvaluationPeriods)),
		DatapointsToAlarm:  jsii.Number(float64(spec.EvaluationPeriods)),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		AlarmDescription: jsii.String(fmt.Sprintf("Tributary %s, %s: %s (threshold %v per %v, %d period(s); context %s%s.*)",
			kind, subject, info.Meaning, spec.Threshold, spec.Period, spec.EvaluationPeriods, ContextAlarmPrefix, kind)),
	})
	a.added = append(a.added, alarm)
}
