package tributary

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
	// QueueMaxMessageBytes is a NewQueueWithDLQ queue's MaximumMessageSize
	// (SQS's default, said outright), and DeadLetterMaxMessageBytes its
	// dead-letter queue's (SQS's largest): a message dead-lettered with
	// its reason attributes always fits.
	QueueMaxMessageBytes      = 256 << 10
	DeadLetterMaxMessageBytes = 1 << 20
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
	// FIFO makes the queue and its dead-letter queue FIFO queues (SQS wants
	// a FIFO queue's DLQ to be FIFO too; CDK gives both names ending in
	// .fifo), with content-based deduplication for producers that send no
	// MessageDeduplicationId.
	FIFO bool
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
	var fifo, dedup *bool
	if props.FIFO {
		fifo, dedup = jsii.Bool(true), jsii.Bool(true)
	}
	dlq := awssqs.NewQueue(scope, jsii.String(id+"Dlq"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(maxQueueRetention),
		Fifo:            fifo,
		// Room for the reason a consumer adds when it dead-letters a
		// message itself (package worker): a message as large as the
		// source takes still fits with its attributes.
		MaxMessageSizeBytes: jsii.Number(DeadLetterMaxMessageBytes),
	})
	return awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		MaxMessageSizeBytes:       jsii.Number(QueueMaxMessageBytes),
		Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:                jsii.Bool(true),
		RetentionPeriod:           seconds(maxQueueRetention),
		VisibilityTimeout:         seconds(VisibilityTimeoutFor(props.ConsumerTimeout, props.ConsumerBatchingWindow)),
		Fifo:                      fifo,
		ContentBasedDeduplication: dedup,
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

// QueueSourceProps configures one more queue of a QueueFunction (AddQueue).
type QueueSourceProps struct {
	// Queue is the queue to consume, with a dead-letter queue and a
	// visibility timeout as QueueFunctionProps.Queue. Required.
	Queue awssqs.Queue
	// BatchSize is DefaultQueueBatchSize if zero (at most 10 on a FIFO queue).
	BatchSize int
	// MaxBatchingWindow as in QueueFunctionProps; not allowed on a FIFO queue.
	MaxBatchingWindow time.Duration
	// MaxConcurrency as in QueueFunctionProps.
	MaxConcurrency int
}

// NewQueueFunction creates a QueueFunction under scope.
func NewQueueFunction(scope constructs.Construct, id string, props QueueFunctionProps) *QueueFunction {
	if props.Queue == nil {
		panic(fmt.Sprintf("QueueFunction %q: Queue is required", id))
	}
	src := QueueSourceProps{Queue: props.Queue, BatchSize: props.BatchSize, MaxBatchingWindow: props.MaxBatchingWindow, MaxConcurrency: props.MaxConcurrency}
	timeout := props.Function.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	checkQueueSource(id, timeout, src)
	fn := NewGoFunction(scope, id, props.Function)
	q := &QueueFunction{GoFunction: fn, Queue: props.Queue}
	q.Source = q.AddQueue(src)
	return q
}

// AddQueue makes the function consume one more queue, with its own event
// source mapping (ReportBatchItemFailures, as the first), and returns the
// event source. It panics on the same misconfigurations as NewQueueFunction.
func (q *QueueFunction) AddQueue(props QueueSourceProps) awslambda.IEventSource {
	checkQueueSource(*q.Node().Id(), q.Timeout, props)
	batch := props.BatchSize
	if batch == 0 {
		batch = DefaultQueueBatchSize
	}
	// SqsEventSource grants the function ReceiveMessage, DeleteMessage,
	// ChangeMessageVisibility, GetQueueAttributes and GetQueueUrl on the queue.
	src := awslambdaeventsources.NewSqsEventSource(props.Queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(batch)),
		MaxBatchingWindow:       seconds(props.MaxBatchingWindow),
		MaxConcurrency:          optionalNumber(props.MaxConcurrency),
		ReportBatchItemFailures: jsii.Bool(true),
	})
	q.Function.AddEventSource(src)
	return src
}

func checkQueueSource(id string, timeout time.Duration, props QueueSourceProps) {
	if props.Queue == nil {
		panic(fmt.Sprintf("QueueFunction %q: Queue is required", id))
	}
	if props.Queue.DeadLetterQueue() == nil {
		panic(fmt.Sprintf("QueueFunction %q: queue %s has no dead-letter queue", id, *props.Queue.Node().Path()))
	}
	if props.MaxConcurrency != 0 && (props.MaxConcurrency < 2 || props.MaxConcurrency > 1000) {
		panic(fmt.Sprintf("QueueFunction %q: MaxConcurrency %d is outside 2-1000", id, props.MaxConcurrency))
	}
	if props.Queue.Fifo() != nil && *props.Queue.Fifo() {
		if props.BatchSize > 10 {
			panic(fmt.Sprintf("QueueFunction %q: BatchSize %d on FIFO queue %s; Lambda allows at most 10", id, props.BatchSize, *props.Queue.Node().Path()))
		}
		if props.MaxBatchingWindow != 0 {
			panic(fmt.Sprintf("QueueFunction %q: FIFO queue %s cannot have a MaxBatchingWindow (Lambda does not support one)", id, *props.Queue.Node().Path()))
		}
	}
	want := VisibilityTimeoutFor(timeout, props.MaxBatchingWindow)
	if got := queueVisibility(props.Queue); got < want {
		panic(fmt.Sprintf("QueueFunction %q: queue %s has visibility timeout %v, want at least %v (6 x timeout %v + batching window %v)",
			id, *props.Queue.Node().Path(), got, want, timeout, props.MaxBatchingWindow))
	}
}

// queueVisibility reads the visibility timeout q was created with.
func queueVisibility(q awssqs.Queue) time.Duration {
	cfn, ok := q.Node().DefaultChild().(awssqs.CfnQueue)
	if !ok || cfn.VisibilityTimeout() == nil {
		return sqsDefaultVisibility
	}
	return time.Duration(*cfn.VisibilityTimeout()) * time.Second
}
