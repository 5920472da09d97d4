package tributary

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
)

// Lambda's defaults for an asynchronous invocation without an
// EventInvokeConfig: two retries of a failed attempt, events kept six hours.
const (
	defaultAsyncRetryAttempts = 2
	defaultAsyncMaxEventAge   = 6 * time.Hour
)

// cronFinest is how often a cron schedule fires at most: EventBridge's
// finest granularity.
const cronFinest = time.Minute

var rateRE = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// scheduleEvery is how often an EventBridge ScheduleExpression fires at
// most: its rate, or cronFinest for a cron expression; 0 for an
// expression it does not know.
func scheduleEvery(expr string) time.Duration {
	if strings.HasPrefix(expr, "cron(") {
		return cronFinest
	}
	m := rateRE.FindStringSubmatch(expr)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[m[2][0]]
	return time.Duration(n) * unit
}

// maxScheduledErrors is the most AWS/Lambda Errors fn can count in one
// period when only EventBridge schedules invoke it (no event source
// mapping, no function URL, no permission for another principal): every
// scheduled event that can still be attempted in the period — those due in
// it and in the event age before it — failing on every attempt, the first
// and its retries. why says how it is reached. ok is false when something
// else may invoke fn, or a schedule's rate is unknown: then nothing in the
// stack bounds its errors.
func maxScheduledErrors(stack awscdk.Stack, fn stackFunction, period time.Duration) (max float64, why string, ok bool) {
	if len(mappingsOf(stack, fn)) > 0 || hasFunctionURL(stack, fn) || invokedByOtherThanEvents(stack, fn) {
		return 0, "", false
	}
	retries, age := asyncRetries(stack, fn)
	var events float64
	var rates []string
	for _, every := range scheduleRates(stack, fn) {
		if every <= 0 {
			return 0, "", false
		}
		events += float64((period+age)/every) + 1
		rates = append(rates, "every "+every.String())
	}
	if events == 0 {
		return 0, "", false
	}
	why = fmt.Sprintf("it runs only on its schedule, %s: at most %v ticks can be attempted in one period, those due in it and in the %v before it that Lambda may still run, each at most %d times",
		strings.Join(rates, ", "), events, age, 1+retries)
	return events * float64(1+retries), why, true
}

// scheduleRates lists how often each EventBridge rule targeting fn fires
// at most (0 for a schedule it cannot read); none for a rule without a
// schedule.
func scheduleRates(stack awscdk.Stack, fn stackFunction) []time.Duration {
	arn := resolvedJSON(stack, fn.fn.FunctionArn())
	var out []time.Duration
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		rule, ok := c.(awsevents.CfnRule)
		if !ok || !ruleTargets(stack, rule, arn) {
			continue
		}
		expr := ""
		if rule.ScheduleExpression() != nil {
			expr = *rule.ScheduleExpression()
		}
		out = append(out, scheduleEvery(expr))
	}
	return out
}

// ruleTargets reports whether one of rule's targets is arn (resolved).
func ruleTargets(stack awscdk.Stack, rule awsevents.CfnRule, arn string) bool {
	var targets []map[string]any
	if err := json.Unmarshal([]byte(resolvedJSON(stack, rule.Targets())), &targets); err != nil {
		return false
	}
	for _, t := range targets {
		for k, v := range t {
			if raw, _ := json.Marshal(v); strings.EqualFold(k, "arn") && string(raw) == arn {
				return true
			}
		}
	}
	return false
}

// asyncRetries are fn's asynchronous retry attempts and maximum event
// age: its EventInvokeConfig's, else Lambda's defaults.
func asyncRetries(stack awscdk.Stack, fn stackFunction) (int, time.Duration) {
	retries, age := defaultAsyncRetryAttempts, defaultAsyncMaxEventAge
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		cfg, ok := c.(awslambda.CfnEventInvokeConfig)
		if !ok || resolvedJSON(stack, cfg.FunctionName()) != fn.ref {
			continue
		}
		if n := cfg.MaximumRetryAttempts(); n != nil {
			retries = int(*n)
		}
		if s := cfg.MaximumEventAgeInSeconds(); s != nil {
			age = time.Duration(*s) * time.Second
		}
	}
	return retries, age
}

// hasFunctionURL reports whether fn has a function URL.
func hasFunctionURL(stack awscdk.Stack, fn stackFunction) bool {
	arn := resolvedJSON(stack, fn.fn.FunctionArn())
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if u, ok := c.(awslambda.CfnUrl); ok && (resolvedJSON(stack, u.TargetFunctionArn()) == arn || resolvedJSON(stack, u.TargetFunctionArn()) == fn.ref) {
			return true
		}
	}
	return false
}

// invokedByOtherThanEvents reports whether a permission on fn lets a
// principal other than EventBridge invoke it.
func invokedByOtherThanEvents(stack awscdk.Stack, fn stackFunction) bool {
	arn := resolvedJSON(stack, fn.fn.FunctionArn())
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		p, ok := c.(awslambda.CfnPermission)
		if !ok {
			continue
		}
		if name := resolvedJSON(stack, p.FunctionName()); name != arn && name != fn.ref {
			continue
		}
		if p.Principal() == nil || *p.Principal() != "events.amazonaws.com" {
			return true
		}
	}
	return false
}
