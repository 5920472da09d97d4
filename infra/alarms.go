package main

import (
	"regexp"
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Dead-letter queue depth alarms: AWS/SQS publishes every queue's
// ApproximateNumberOfMessagesVisible each minute for free; one message in a
// DLQ means a failure no retry fixed (or a permanent one a consumer
// dead-lettered with its reason), which someone must look at and redrive.
const (
	dlqAlarmPeriod    = 60 // seconds: the metric's own resolution
	dlqAlarmThreshold = 1  // messages
)

// alarmIDSanitizer keeps what a construct id may hold from a node path.
var alarmIDSanitizer = regexp.MustCompile(`[^A-Za-z0-9]`)

// AlarmOnDeadLetterQueues adds, for every queue in stack that is another
// queue's dead-letter queue, an alarm on its AWS/SQS
// ApproximateNumberOfMessagesVisible (maximum over a minute ≥ 1, missing
// data not breaching) that triggers actions. It walks the constructs, so it
// covers queues added by any construct, and is safe to call more than once:
// a DLQ that already has its alarm is skipped. It returns the alarms it
// added, ordered by construct path.
func AlarmOnDeadLetterQueues(stack awscdk.Stack, actions ...awscloudwatch.IAlarmAction) []awscloudwatch.Alarm {
	dlqs := map[string]awssqs.IQueue{} // by node path
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		q, ok := c.(awssqs.Queue)
		if !ok || q.DeadLetterQueue() == nil || q.DeadLetterQueue().Queue == nil {
			continue
		}
		dlq := q.DeadLetterQueue().Queue
		dlqs[*dlq.Node().Path()] = dlq
	}
	paths := make([]string, 0, len(dlqs))
	for p := range dlqs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var alarms []awscloudwatch.Alarm
	for _, path := range paths {
		dlq := dlqs[path]
		id := alarmIDSanitizer.ReplaceAllString(path, "") + "DepthAlarm"
		if stack.Node().TryFindChild(jsii.String(id)) != nil {
			continue
		}
		metric := dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period:    awscdk.Duration_Seconds(jsii.Number(dlqAlarmPeriod)),
			Statistic: jsii.String("Maximum"),
		})
		alarm := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			Metric:             metric,
			Threshold:          jsii.Number(dlqAlarmThreshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			AlarmDescription: jsii.String("Messages are waiting in dead-letter queue " + path +
				": read the reason (go run ./cmd/redrive -dlq <name> -dry-run), fix the cause, then redrive them"),
		})
		if len(actions) > 0 {
			alarm.AddAlarmAction(actions...)
		}
		alarms = append(alarms, alarm)
	}
	return alarms
}
