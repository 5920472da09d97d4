package tributary

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Context keys of the operational settings (cdk.json, or cdk synth/deploy
// -c key=value). docs/deploy.md ("Alarms, retention and what
// `cdk destroy` keeps") lists each with its default.
const (
	// ContextAlarmEmail is an email address subscribed to the alarm topic;
	// none if unset (subscribe later in the SNS console or with the CLI).
	ContextAlarmEmail = "tributary:alarmEmail"
	// ContextEventsRetentionHours is how long the events stream keeps a
	// record: DefaultEventsRetention if unset, 24-8760.
	ContextEventsRetentionHours = "tributary:eventsRetentionHours"
	// ContextReservedConcurrencyPrefix + <function name> (one of
	// FunctionNames) is that function's reserved concurrency; none if unset.
	ContextReservedConcurrencyPrefix = "tributary:reservedConcurrency."
	// ContextAlarmPrefix + <kind> + "." + threshold, periodSeconds or
	// evaluationPeriods overrides one setting of every alarm of a kind
	// (see AlarmKinds).
	ContextAlarmPrefix = "tributary:alarm."
)

// Events stream retention. Kinesis bills retention beyond 24 hours and up
// to 7 days at one flat rate per shard-hour, whatever the number of hours,
// so the default takes the whole week it pays for: a failure noticed on a
// Monday can still be quarantined with its data from the stream.
const (
	DefaultEventsRetention = 7 * 24 * time.Hour
	minEventsRetention     = 24 * time.Hour
	maxEventsRetention     = 8760 * time.Hour
)

// The ticker's asynchronous invocations: a failed tick is retried (a retry
// that overlaps the next scheduled tick is safe, as aggregate already
// finalizes windows concurrently with ticks: every write is fenced), and a
// tick that still fails, or that Lambda could not run within
// tickerMaxEventAge, is described on the TickerFailures queue.
// tickerMaxEventAge leaves room for Lambda's two retries (about one and two
// minutes after a failure) of a tick that times out each time.
const (
	tickerRetryAttempts = 2
	tickerMaxEventAge   = 10 * time.Minute
)

// maxReservedConcurrency bounds the reserved concurrency a context value may
// ask for (Lambda's own limit is the account's concurrency, checked at
// deploy).
const maxReservedConcurrency = 10000

// alarmThresholdMax is, by kind, the most its metric can be: a threshold
// above it would make an alarm that never fires. alarmThresholdWhy says why.
var (
	alarmThresholdMax = map[AlarmKind]float64{
		AlarmLateDropped: 100,
		AlarmIteratorAge: float64(maxStreamMaxRecordAge / time.Millisecond),
	}
	alarmThresholdWhy = map[AlarmKind]string{
		AlarmLateDropped: "a percentage",
		AlarmIteratorAge: "in ms; a mapping sends no record older than its MaximumRecordAge, at most 7 days",
	}
)

// alarmLookBack is how far back CloudWatch lets an alarm with periods of
// period look (Period x EvaluationPeriods): a day for periods under an
// hour, 7 days for longer ones; what says it, and the rule, in words.
func alarmLookBack(period time.Duration) (max time.Duration, what string) {
	if period < time.Hour {
		return 24 * time.Hour, "a day, which CloudWatch refuses for periods under an hour"
	}
	return 7 * 24 * time.Hour, "7 days, which CloudWatch refuses"
}

// OpsSettings are the operational settings of the stack, read from context
// by OpsSettingsFromContext.
type OpsSettings struct {
	// AlarmEmail is subscribed to the alarm topic; none if empty.
	AlarmEmail string
	// EventsRetention is the events stream's retention period.
	EventsRetention time.Duration
	// ReservedConcurrency by function name; a function not listed has none.
	ReservedConcurrency map[string]int
	// Alarms is every alarm kind's threshold, period and evaluation count.
	Alarms map[AlarmKind]AlarmSpec
}

var emailRE = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)

// OpsSettingsFromContext reads the operational settings from node's context,
// with their defaults. It fails naming the key on a value of the wrong type
// or out of range, and on a "tributary:" key the stack does not read: one
// under ContextAlarmPrefix or ContextReservedConcurrencyPrefix that names
// no alarm kind, setting or function, or any other misspelt key (a typo
// would otherwise be ignored silently).
func OpsSettingsFromContext(node constructs.Node) (OpsSettings, error) {
	s := OpsSettings{ReservedConcurrency: map[string]int{}, Alarms: map[AlarmKind]AlarmSpec{}}
	var err error
	if s.AlarmEmail, err = contextString(node, ContextAlarmEmail, ""); err != nil {
		return s, err
	}
	if s.AlarmEmail != "" && !emailRE.MatchString(s.AlarmEmail) {
		return s, fmt.Errorf("context %s: %q is not an email address", ContextAlarmEmail, s.AlarmEmail)
	}
	hours, err := contextWhole(node, ContextEventsRetentionHours, DefaultEventsRetention.Hours(),
		minEventsRetention.Hours(), maxEventsRetention.Hours())
	if err != nil {
		return s, err
	}
	s.EventsRetention = time.Duration(hours) * time.Hour

	for _, kind := range AlarmKinds {
		spec := kind.Default
		prefix := ContextAlarmPrefix + string(kind.Kind) + "."
		if spec.Threshold, err = contextFloat(node, prefix+"threshold", spec.Threshold); err != nil {
			return s, err
		}
		if spec.Threshold == 0 {
			return s, fmt.Errorf("context %sthreshold: 0 would put the alarm in ALARM at every data point, a 0 included (it fires at or above the threshold); want above 0", prefix)
		}
		if max, ok := alarmThresholdMax[kind.Kind]; ok && spec.Threshold > max {
			return s, fmt.Errorf("context %sthreshold: %s is above %s, which the metric never exceeds (%s): the alarm could never fire",
				prefix, strconv.FormatFloat(spec.Threshold, 'f', -1, 64), strconv.FormatFloat(max, 'f', -1, 64), alarmThresholdWhy[kind.Kind])
		}
		period, err := contextWhole(node, prefix+"periodSeconds", spec.Period.Seconds(), 60, 86400)
		if err != nil {
			return s, err
		}
		if int(period)%60 != 0 {
			return s, fmt.Errorf("context %speriodSeconds: %v is not a multiple of 60 (the metrics' resolution)", prefix, period)
		}
		spec.Period = time.Duration(period) * time.Second
		evals, err := contextWhole(node, prefix+"evaluationPeriods", float64(spec.EvaluationPeriods), 1, 1440)
		if err != nil {
			return s, err
		}
		spec.EvaluationPeriods = int(evals)
		if max, what := alarmLookBack(spec.Period); spec.Period*time.Duration(spec.EvaluationPeriods) > max {
			return s, fmt.Errorf("context %s*: %d periods of %v look back more than %s",
				prefix, spec.EvaluationPeriods, spec.Period, what)
		}
		s.Alarms[kind.Kind] = spec
	}

	for _, name := range FunctionNames {
		key := ContextReservedConcurrencyPrefix + name
		if v := node.TryGetContext(jsii.String(key)); v == nil || v == "" {
			continue
		}
		n, err := contextWhole(node, key, 0, 0, maxReservedConcurrency)
		if err != nil {
			return s, err
		}
		if n == 0 {
			return s, fmt.Errorf("context %s: 0 would stop %s from ever running (Lambda throttles every invocation; a stream's records would age out into Failures); want 1 to %d, or leave it unset",
				key, name, maxReservedConcurrency)
		}
		s.ReservedConcurrency[name] = int(n)
	}
	return s, unknownContextKeys(node)
}

// contextPrefix starts every context key the stack reads.
const contextPrefix = "tributary:"

// contextKeys are the context keys the stack reads besides those under
// ContextAlarmPrefix and ContextReservedConcurrencyPrefix.
var contextKeys = []string{ContextAssetDir, ContextPipelinesDir, ContextIngestAuth, ContextFlushInterval,
	ContextViewsWriteCapacity, ContextViewsReadCapacity, ContextAlarmEmail, ContextEventsRetentionHours,
	ContextArchiveInfrequentAccessDays, ContextArchiveExpireDays, ContextArchiveBatchingSeconds}

// unknownContextKeys fails on a key starting with "tributary:" (in any
// case) that the stack does not read: a misspelt key would otherwise be
// ignored, and its setting silently left at the default.
func unknownContextKeys(node constructs.Node) error {
	known := map[string]bool{}
	for _, key := range contextKeys {
		known[key] = true
	}
	for _, kind := range AlarmKinds {
		for _, setting := range []string{"threshold", "periodSeconds", "evaluationPeriods"} {
			known[ContextAlarmPrefix+string(kind.Kind)+"."+setting] = true
		}
	}
	for _, name := range FunctionNames {
		known[ContextReservedConcurrencyPrefix+name] = true
	}
	all, _ := node.GetAllContext(nil).(map[string]any)
	var unknown []string
	for key := range all {
		if strings.HasPrefix(strings.ToLower(key), contextPrefix) && !known[key] {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	names := make([]string, 0, len(known))
	for key := range known {
		names = append(names, key)
	}
	sort.Strings(names)
	var hints []string
	for _, key := range unknown {
		if near := strictjson.Nearest(key, names); near != "" {
			if len(unknown) == 1 {
				// The message names it already.
				hints = append(hints, fmt.Sprintf("did you mean %s?", near))
				continue
			}
			hints = append(hints, fmt.Sprintf("%s: did you mean %s?", key, near))
		}
	}
	hint := ""
	if len(hints) > 0 {
		hint = "; " + strings.Join(hints, "; ")
	}
	kinds := make([]string, 0, len(AlarmKinds))
	for _, k := range AlarmKinds {
		kinds = append(kinds, string(k.Kind))
	}
	return fmt.Errorf("context %s: unknown key%s (keys: %s, %s<function>, %s<kind>.<setting>; alarm kinds: %s; settings: threshold, periodSeconds, evaluationPeriods; functions: %s)",
		strings.Join(unknown, ", "), hint, strings.Join(contextKeys, ", "), ContextReservedConcurrencyPrefix, ContextAlarmPrefix,
		strings.Join(kinds, ", "), strings.Join(FunctionNames, ", "))
}

// contextFloat is the context value key as a finite number of at least 0: a
// number (cdk.json) or a numeric string (-c); def if unset.
func contextFloat(node constructs.Node, key string, def float64) (float64, error) {
	n, set, err := contextNumber(node, key, "a number")
	if err != nil || !set {
		return def, err
	}
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return 0, fmt.Errorf("context %s: %v is not a number of at least 0", key, n)
	}
	return n, nil
}

// contextNumber reads the context value key: a number (cdk.json) or a
// numeric string (cdk synth -c key=value); set is false when it is unset or
// empty. what names the value wanted in errors ("a number of seconds").
func contextNumber(node constructs.Node, key, what string) (n float64, set bool, err error) {
	switch v := node.TryGetContext(jsii.String(key)).(type) {
	case nil:
		return 0, false, nil
	case float64:
		return v, true, nil
	case string:
		if v == "" {
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false, fmt.Errorf("context %s: %q is not %s", key, v, what)
		}
		return f, true, nil
	default:
		return 0, false, fmt.Errorf("context %s: got %v (%T), want %s", key, v, v, what)
	}
}

// contextWhole is the context value key as a whole number between lo and
// hi; def if unset.
func contextWhole(node constructs.Node, key string, def, lo, hi float64) (float64, error) {
	n, err := contextFloat(node, key, def)
	if err != nil {
		return 0, err
	}
	if n != math.Trunc(n) || n < lo || n > hi {
		return 0, fmt.Errorf("context %s: %v is not a whole number between %v and %v", key, n, lo, hi)
	}
	return n, nil
}

// Operations is what NewOperations adds so that every failure reaches a
// person and the state outlives the stack: the alarm topic (and its key),
// the alarms, and the settings they follow.
type Operations struct {
	Settings OpsSettings
	// Topic is the action of every alarm in the stack (alarm and OK).
	Topic awssns.Topic
	// TopicKey encrypts Topic; CloudWatch may use it to publish.
	TopicKey awskms.Key
	// Alarms are the alarms NewAlarms added, ordered by construct id.
	Alarms []awscloudwatch.Alarm
}

// OperationsProps configures NewOperations.
type OperationsProps struct {
	// Settings are the thresholds, retention and reserved concurrency; if
	// nil, OpsSettingsFromContext of the stack.
	Settings *OpsSettings
	// Quarantine, if set, may read back the failed range of every stream
	// that reports to its Failures queue.
	Quarantine *Quarantine
}

// NewOperations makes every failure in stack reach a person and its state
// outlive the stack, over everything the stack holds when it is called:
// call it last. Every table is retained and deletion-protected and every
// failure queue retained (ProtectState); functions get their reserved
// concurrency (by name, ContextReservedConcurrencyPrefix); quarantine may
// read back the failed ranges of the streams that report to its Failures
// queue (GrantFailedRangeReads); and every function (errors, throttles),
// stream consumer (iterator age, records set aside), failure queue (depth)
// and pipeline (share of late records, per pipeline) gets its alarms
// (NewAlarms), all notifying one encrypted SNS topic (output
// AlarmTopicArn). It fails on a wrong context value or a reserved
// concurrency below an SQS mapping's maximum concurrency.
func NewOperations(stack awscdk.Stack, props OperationsProps) (*Operations, error) {
	var settings OpsSettings
	if props.Settings != nil {
		settings = *props.Settings
	} else {
		var err error
		if settings, err = OpsSettingsFromContext(stack.Node()); err != nil {
			return nil, err
		}
	}
	ops := &Operations{Settings: settings}
	ProtectState(stack)
	if err := ApplyReservedConcurrency(stack, settings.ReservedConcurrency); err != nil {
		return nil, err
	}
	if props.Quarantine != nil {
		GrantFailedRangeReads(stack, props.Quarantine.Failures, props.Quarantine.Function.GoFunction)
	}
	if err := checkIteratorAgeThreshold(stack, settings.Alarms); err != nil {
		return nil, err
	}
	if err := checkErrorsThreshold(stack, settings.Alarms); err != nil {
		return nil, err
	}
	ops.Topic, ops.TopicKey = NewAlarmTopic(stack, "AlarmTopic", settings.AlarmEmail)
	SendAlarmsTo(stack, ops.Topic)
	ops.Alarms = NewAlarms(stack, settings.Alarms)
	output(stack, "AlarmTopicArn", ops.Topic.TopicArn(), "SNS topic every alarm notifies (alarm and OK); subscribe to it")
	return ops, nil
}

// checkIteratorAgeThreshold fails when the iterator age alarm's threshold is
// not below a stream consumer's MaximumRecordAge: Lambda sends that
// consumer no record older than it (older ones go to its on-failure
// destination), so its iterator age never reaches the threshold and its
// alarm could never fire, for the very backlog it is there to report. The
// error names the first such function and its age.
func checkIteratorAgeThreshold(stack awscdk.Stack, specs map[AlarmKind]AlarmSpec) error {
	spec, ok := specs[AlarmIteratorAge]
	if !ok {
		spec = alarmKindInfo(AlarmIteratorAge).Default
	}
	threshold := time.Duration(spec.Threshold * float64(time.Millisecond))
	var (
		lowest time.Duration
		name   string
	)
	for _, fn := range stackFunctions(stack) {
		for _, m := range mappingsOf(stack, fn) {
			if m.stream && m.maxRecordAge > 0 && (lowest == 0 || m.maxRecordAge < lowest) {
				lowest, name = m.maxRecordAge, fn.label()
			}
		}
	}
	if lowest > 0 && threshold >= lowest {
		return fmt.Errorf("context %s%s.threshold: %s ms is not below the MaximumRecordAge of %s's stream mapping (%v, %d ms): Lambda sends it no older record, so its iterator age could never reach the threshold and the alarm never fire; want below %d",
			ContextAlarmPrefix, AlarmIteratorAge, strconv.FormatFloat(spec.Threshold, 'f', -1, 64), name, lowest, lowest.Milliseconds(), lowest.Milliseconds())
	}
	return nil
}

// checkErrorsThreshold fails when the errors alarm's threshold is above
// what a function that only its schedule invokes (a pipeline's ticker) can
// count in one period (maxScheduledErrors): every function's errors alarm
// has that threshold, so that function's alarm could never fire, however
// often its ticks fail. The error names the function with the lowest such
// bound. Other functions' errors follow their traffic, which nothing in
// the stack bounds.
func checkErrorsThreshold(stack awscdk.Stack, specs map[AlarmKind]AlarmSpec) error {
	spec, ok := specs[AlarmErrors]
	if !ok {
		spec = alarmKindInfo(AlarmErrors).Default
	}
	lowest, name, why := math.Inf(1), "", ""
	for _, fn := range stackFunctions(stack) {
		if max, reason, ok := maxScheduledErrors(stack, fn, spec.Period); ok && max < lowest {
			lowest, name, why = max, fn.label(), reason
		}
	}
	if spec.Threshold > lowest {
		return fmt.Errorf("context %s%s.threshold: %s is above %v, the most errors %s can count in a period of %v (%s): its errors alarm could never fire; want at most %v, or a longer %s%s.periodSeconds",
			ContextAlarmPrefix, AlarmErrors, strconv.FormatFloat(spec.Threshold, 'g', -1, 64), lowest, name, spec.Period, why, lowest, ContextAlarmPrefix, AlarmErrors)
	}
	return nil
}

// ApplyReservedConcurrency sets the reserved concurrency of each function
// in stack whose name (its FunctionMetadataKey) is in byName. It fails when
// the value is below the MaximumConcurrency of one of the function's SQS
// mappings: Lambda would throttle the mapping's invocations, and a
// throttled message counts a receive, so it could reach the DLQ without
// having failed.
func ApplyReservedConcurrency(stack awscdk.Stack, byName map[string]int) error {
	var errs []string
	for _, fn := range stackFunctions(stack) {
		n, ok := byName[fn.name]
		if !ok {
			continue
		}
		fn.cfn.SetReservedConcurrentExecutions(jsii.Number(float64(n)))
		for _, m := range mappingsOf(stack, fn) {
			if max := m.maxConcurrency; max > 0 && n < max {
				errs = append(errs, fmt.Sprintf("context %s%s: %d is below the MaximumConcurrency %d of its SQS mapping; "+
					"Lambda would throttle the mapping and messages could reach the DLQ unprocessed", ContextReservedConcurrencyPrefix, fn.name, n, max))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// stackFunction is a Lambda function of the stack with the name the local
// runner, the metrics (their Function dimension) and the context keys know
// it by.
type stackFunction struct {
	name string // FunctionMetadataKey, or the construct path without it
	// pipeline is the PipelineMetadataKey of a pipeline's function; "".
	pipeline string
	fn       awslambda.Function
	cfn      awslambda.CfnFunction
	ref      string // resolved Ref, to match mappings
}

// stackFunctions lists the Lambda functions in stack, ordered by name.
func stackFunctions(stack awscdk.Stack) []stackFunction {
	var out []stackFunction
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		fn, ok := c.(awslambda.Function)
		if !ok {
			continue
		}
		cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
		name, _ := cfn.GetMetadata(jsii.String(FunctionMetadataKey)).(string)
		if name == "" {
			name = *fn.Node().Path()
		}
		pipe, _ := cfn.GetMetadata(jsii.String(PipelineMetadataKey)).(string)
		out = append(out, stackFunction{name: name, pipeline: pipe, fn: fn, cfn: cfn, ref: resolvedJSON(stack, fn.FunctionName())})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].label() < out[j].label() })
	return out
}

// label names the function on dashboards and in alarm descriptions:
// its name, and for a pipeline's function the pipeline's,
// "aggregate[checkouts]".
func (f stackFunction) label() string {
	if f.pipeline == "" {
		return f.name
	}
	return f.name + "[" + f.pipeline + "]"
}

// idPrefix starts the construct ids of the function's alarms:
// "Aggregate", "AggregateCheckouts".
func (f stackFunction) idPrefix() string { return exportedName(f.name) + exportedName(f.pipeline) }

// dimensions of the function's own metrics: {Function} for a function of
// its own, {Function, Pipeline} for a pipeline's (the only set the EMF
// records of aggregate, ticker, join and detect carry:
// MetricsPipelineDimension).
func (f stackFunction) dimensions() map[string]*string {
	d := map[string]*string{MetricsDimension: jsii.String(f.name)}
	if f.pipeline != "" {
		d[MetricsPipelineDimension] = jsii.String(f.pipeline)
	}
	return d
}

// mapping is an event source mapping of the stack, its values resolved.
type mapping struct {
	function       string // resolved FunctionName
	source         string // resolved EventSourceArn
	onFailure      string // resolved on-failure destination; "" if none
	stream         bool   // Kinesis or DynamoDB Streams (has a StartingPosition)
	maxConcurrency int    // SQS ScalingConfig.MaximumConcurrency; 0 if unset
	// maxRecordAge is a stream mapping's MaximumRecordAgeInSeconds; 0 if
	// unset or -1 (records kept until they expire from the stream).
	maxRecordAge time.Duration
}

// stackMappings lists the event source mappings in stack.
func stackMappings(stack awscdk.Stack) []mapping {
	var out []mapping
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		cfn, ok := c.(awslambda.CfnEventSourceMapping)
		if !ok {
			continue
		}
		m := mapping{
			function:  resolvedJSON(stack, cfn.FunctionName()),
			source:    resolvedJSON(stack, cfn.EventSourceArn()),
			onFailure: onFailureDestination(stack, cfn.DestinationConfig()),
			stream:    cfn.StartingPosition() != nil,
		}
		var scaling struct {
			Max float64 `json:"maximumConcurrency"`
		}
		if raw := resolvedJSON(stack, cfn.ScalingConfig()); raw != "null" {
			_ = json.Unmarshal([]byte(raw), &scaling)
			m.maxConcurrency = int(scaling.Max)
		}
		if age := cfn.MaximumRecordAgeInSeconds(); age != nil && *age > 0 {
			m.maxRecordAge = time.Duration(*age) * time.Second
		}
		out = append(out, m)
	}
	return out
}

// mappingsOf lists the mappings that invoke fn.
func mappingsOf(stack awscdk.Stack, fn stackFunction) []mapping {
	var out []mapping
	for _, m := range stackMappings(stack) {
		if m.function == fn.ref {
			out = append(out, m)
		}
	}
	return out
}

// resolvedJSON is v resolved in stack (tokens become Ref, Fn::GetAtt, ...)
// as JSON, so that two references to one resource compare equal.
func resolvedJSON(stack awscdk.Stack, v any) string {
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		return "null"
	}
	raw, err := json.Marshal(stack.Resolve(v))
	if err != nil {
		panic(fmt.Sprintf("resolving %v: %v", v, err))
	}
	return string(raw)
}

// onFailureDestination is the resolved on-failure destination of a
// DestinationConfig (of a mapping or an event invoke config), or "".
func onFailureDestination(stack awscdk.Stack, config any) string {
	var dc map[string]map[string]any
	if err := json.Unmarshal([]byte(resolvedJSON(stack, config)), &dc); err != nil || dc == nil {
		return ""
	}
	for k, v := range dc {
		if strings.EqualFold(k, "onFailure") {
			for k2, d := range v {
				if strings.EqualFold(k2, "destination") {
					raw, _ := json.Marshal(d)
					return string(raw)
				}
			}
		}
	}
	return ""
}

// exportedName is a function name as a construct id prefix: "aggregate" →
// "Aggregate"; a path loses what an id may not hold.
func exportedName(name string) string {
	name = alarmIDSanitizer.ReplaceAllString(name, "")
	if name == "" {
		return name
	}
	return strings.ToUpper(name[:1]) + name[1:]
}
