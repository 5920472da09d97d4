package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Defaults for queues and QueueFunctionProps fields left zero.
const (
	DefaultQueueBatchSize       = 10
	DefaultQueueMaxReceiveCount = 5
	// sqsDefaultVisibility is SQS's visibility timeout when none is set.
	sqsDefaultVisibility = 30 * time.Second
	maxQueueRetention    = 14 * 24 * time.Hour
)

// VisibilityTimeoutFor is the visibility timeout a queue needs when a
// function with the given timeout and batching window consumes it: six times
// the timeout plus the batching window, as the Lambda developer guide
// advises, so that a message is not redelivered to a second consumer while
// the first one (and Lambda's retries of throttled invokes) still holds it.
func VisibilityTimeoutFor(functionTimeout, maxBatchingWindow time.Duration) time.Duration {
	return 6*functionTimeout + maxBatchingWindow
}

// QueueWithDLQProps configures NewQueueWithDLQ.
type QueueWithDLQProps struct {
	// ConsumerTimeout is the timeout of the function that consumes the queue;
	// the visibility timeout is VisibilityTimeoutFor(ConsumerTimeout,
	// ConsumerBatchingWindow). Required.
	ConsumerTimeout time.Duration
	// ConsumerBatchingWindow is the consumer mapping's MaxBatchingWindow.
	ConsumerBatchingWindow time.Duration
	// MaxReceiveCount is how many receives a message gets before it moves to
	// the DLQ; DefaultQueueMaxReceiveCount if zero.
	MaxReceiveCount int
}

// NewQueueWithDLQ creates queue <id> and its dead-letter queue <id>Dlq in
// scope, both encrypted with SQS-managed keys, refusing non-TLS requests and
// keeping messages for 14 days (the maximum: these queues hold failures
// someone has to look at).
func NewQueueWithDLQ(scope constructs.Construct, id string, props QueueWithDLQProps) awssqs.Queue {
	if props.ConsumerTimeout <= 0 {
		panic(fmt.Sprintf("queue %q: ConsumerTimeout is required", id))
	}
	receives := props.MaxReceiveCount
	if receives == 0 {
		receives = DefaultQueueMaxReceiveCount
	}
	dlq := awssqs.NewQueue(scope, jsii.String(id+"Dlq"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(maxQueueRetention),
	})
	return awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   seconds(maxQueueRetention),
		VisibilityTimeout: seconds(VisibilityTimeoutFor(props.ConsumerTimeout, props.ConsumerBatchingWindow)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(receives)),
		},
	})
}

// QueueFunctionProps configures a Lambda function consuming an SQS queue.
type QueueFunctionProps struct {
	// Function configures the consumer function.
	Function GoFunctionProps
	// Queue is the queue to consume. It must have a dead-letter queue (a
	// message the function keeps failing on goes there after the queue's
	// maxReceiveCount) and a visibility timeout of at least
	// VisibilityTimeoutFor(function timeout, MaxBatchingWindow): see
	// NewQueueWithDLQ.
	Queue awssqs.Queue
	// BatchSize is DefaultQueueBatchSize if zero.
	BatchSize int
	// MaxBatchingWindow is how long Lambda gathers messages before invoking;
	// unset if zero.
	MaxBatchingWindow time.Duration
	// MaxConcurrency caps the concurrent invocations the mapping makes
	// (ScalingConfig.MaximumConcurrency, 2-1000); unset if zero.
	MaxConcurrency int
}

// QueueFunction is a GoFunction with its SQS event source mapping, which
// reports batch item failures (the handler returns the ids of the messages
// it could not process; the others are deleted), and the permission to
// consume the queue.
type QueueFunction struct {
	*GoFunction
	// Queue is the consumed queue.
	Queue awssqs.Queue
	// Source is the event source.
	Source awslambda.IEventSource
}

// NewQueueFunction creates a QueueFunction under scope.
func NewQueueFunction(scope constructs.Construct, id string, props QueueFunctionProps) *QueueFunction {
	if props.Queue == nil {
		panic(fmt.Sprintf("QueueFunction %q: Queue is required", id))
	}
	if props.Queue.DeadLetterQueue() == nil {
		panic(fmt.Sprintf("QueueFunction %q: queue %s has no dead-letter queue", id, *props.Queue.Node().Path()))
	}
	if props.MaxConcurrency != 0 && (props.MaxConcurrency < 2 || props.MaxConcurrency > 1000) {
		panic(fmt.Sprintf("QueueFunction %q: MaxConcurrency %d is outside 2-1000", id, props.MaxConcurrency))
	}
	batch := props.BatchSize
	if batch == 0 {
		batch = DefaultQueueBatchSize
	}

	timeout := props.Function.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	want := VisibilityTimeoutFor(timeout, props.MaxBatchingWindow)
	if got := queueVisibility(props.Queue); got < want {
		panic(fmt.Sprintf("QueueFunction %q: queue %s has visibility timeout %v, want at least %v (6 x timeout %v + batching window %v)",
			id, *props.Queue.Node().Path(), got, want, timeout, props.MaxBatchingWindow))
	}

	fn := NewGoFunction(scope, id, props.Function)

	// SqsEventSource grants the function ReceiveMessage, DeleteMessage,
	// ChangeMessageVisibility, GetQueueAttributes and GetQueueUrl on the queue.
	src := awslambdaeventsources.NewSqsEventSource(props.Queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(batch)),
		MaxBatchingWindow:       seconds(props.MaxBatchingWindow),
		MaxConcurrency:          optionalNumber(props.MaxConcurrency),
		ReportBatchItemFailures: jsii.Bool(true),
	})
	fn.Function.AddEventSource(src)
	return &QueueFunction{GoFunction: fn, Queue: props.Queue, Source: src}
}

// queueVisibility reads the visibility timeout q was created with.
func queueVisibility(q awssqs.Queue) time.Duration {
	cfn, ok := q.Node().DefaultChild().(awssqs.CfnQueue)
	if !ok || cfn.VisibilityTimeout() == nil {
		return sqsDefaultVisibility
	}
	return time.Duration(*cfn.VisibilityTimeout()) * time.Second
}
