package main

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// dlqAlarms maps each DLQ depth alarm's queue (its QueueName dimension's
// logical id) to the alarm's properties.
func dlqAlarms(t *testing.T, tmpl cfnTemplate) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, a := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		p := a.Properties
		if p["MetricName"] != "ApproximateNumberOfMessagesVisible" {
			continue
		}
		dims := asList(p["Dimensions"])
		if len(dims) != 1 {
			t.Fatalf("alarm %s dimensions %v, want QueueName only", id, dims)
		}
		d := dims[0].(map[string]any)
		if d["Name"] != "QueueName" {
			t.Fatalf("alarm %s dimension %v, want QueueName", id, d)
		}
		out[strings.TrimSuffix(resourceName(d["Value"]), ".QueueName")] = p
	}
	return out
}

// TestAlarmOnDeadLetterQueues: every queue that is some queue's DLQ — at
// the top of the stack or deep in a construct — gets one depth alarm on the
// native AWS/SQS metric; queues that are not DLQs get none; calling again
// adds nothing; actions are attached.
func TestAlarmOnDeadLetterQueues(t *testing.T) {
	app := newTestApp(t.TempDir(), nil)
	addNag(app)
	stack := awscdk.NewStack(app, jsii.String("AlarmsTest"), nil)
	tasks := NewQueueWithDLQ(stack, "Jobs", QueueWithDLQProps{ConsumerTimeout: time.Minute})
	nested := constructs.NewConstruct(stack, jsii.String("Team"))
	fifo := NewQueueWithDLQ(nested, "Orders", QueueWithDLQProps{ConsumerTimeout: time.Minute, FIFO: true})
	plain := awssqs.NewQueue(stack, jsii.String("Plain"), nil)
	topic := awssns.NewTopic(stack, jsii.String("Oncall"), nil)

	alarms := AlarmOnDeadLetterQueues(stack, awscloudwatchactions.NewSnsAction(topic))
	if again := AlarmOnDeadLetterQueues(stack); len(again) != 0 {
		t.Errorf("a second call added %d alarms, want 0", len(again))
	}
	if len(alarms) != 2 {
		t.Fatalf("%d alarms, want 2 (one per DLQ)", len(alarms))
	}
	got := dlqAlarms(t, templateOf(stack))
	want := []string{logicalID(stack, tasks.DeadLetterQueue().Queue), logicalID(stack, fifo.DeadLetterQueue().Queue)}
	sort.Strings(want)
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("alarms on queues %v, want the DLQs %v (not %s, %s or %s)", ids, want,
			logicalID(stack, tasks), logicalID(stack, fifo), logicalID(stack, plain))
	}
	errs, warns := nagFindings(stack)
	for _, f := range append(errs, warns...) {
		if strings.Contains(f, "DepthAlarm") {
			t.Errorf("cdk-nag finding on a depth alarm: %s", f)
		}
	}
	for id, p := range got {
		t.Run(id, func(t *testing.T) {
			assertProps(t, "alarm on "+id, p, map[string]any{
				"Namespace":          "AWS/SQS",
				"Statistic":          "Maximum",
				"Period":             60.0,
				"Threshold":          1.0,
				"EvaluationPeriods":  1.0,
				"ComparisonOperator": "GreaterThanOrEqualToThreshold",
				"TreatMissingData":   "notBreaching",
				"AlarmActions":       []any{ref(logicalID(stack, topic))},
			})
			if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, "redrive") {
				t.Errorf("description %q does not say what to do", d)
			}
		})
	}
}

// TestEveryDeadLetterQueueOfTheStackIsAlarmed: on the whole Tributary stack,
// each DLQ (tasks, FIFO tasks, stream failures) gets its alarm.
func TestEveryDeadLetterQueueOfTheStackIsAlarmed(t *testing.T) {
	dir := t.TempDir()
	writeDummyAssets(dir)
	app := newTestApp(t.TempDir(), nil)
	s, err := NewTributaryStack(app, StackID, &TributaryStackProps{AssetDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	AlarmOnDeadLetterQueues(s.Stack)
	got := dlqAlarms(t, templateOf(s.Stack))
	tmpl := templateOf(s.Stack)
	var dlqs []string
	for _, q := range tmpl.ofType("AWS::SQS::Queue") {
		if rp, ok := q.Properties["RedrivePolicy"].(map[string]any); ok {
			dlqs = append(dlqs, strings.TrimSuffix(resourceName(rp["deadLetterTargetArn"]), ".Arn"))
		}
	}
	if len(dlqs) < 3 {
		t.Fatalf("the stack has %d queues with a DLQ, want at least 3 (Tasks, TasksFifo, Failures)", len(dlqs))
	}
	for _, dlq := range dlqs {
		if got[dlq] == nil {
			t.Errorf("DLQ %s has no depth alarm", dlq)
		}
	}
	if len(got) != len(dlqs) {
		t.Errorf("%d depth alarms for %d DLQs", len(got), len(dlqs))
	}
}
