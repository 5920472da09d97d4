package tributary

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionReceipts is the example SQS function of your own
// (examples/functions/receipts, on package handler's Tasks) that the
// example app deploys with NewTaskHandler.
const FunctionReceipts = "receipts"

// TaskHandlerProps configures NewTaskHandler.
type TaskHandlerProps struct {
	// Name is the function's asset name: its code is
	// <AssetDir>/<Name>/bootstrap (for example "receipts"). Required.
	Name string
	// AssetDir holds <Name>/bootstrap. If empty, the context value
	// ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// Description is the Lambda function's description.
	Description string
	// Timeout is the function's timeout; DefaultTimeout if zero. The
	// queue's visibility timeout follows it (VisibilityTimeoutFor).
	Timeout time.Duration
	// MemoryMB is the function's memory; DefaultMemoryMB if zero.
	MemoryMB int
	// FIFO makes the tasks queue and its dead-letter queue FIFO queues
	// (order per message group; content-based deduplication).
	FIFO bool
	// BatchSize is the mapping's batch size; DefaultQueueBatchSize if zero
	// (at most 10 on a FIFO queue).
	BatchSize int
	// MaxConcurrency caps the mapping's concurrent invocations (2-1000);
	// unset if zero.
	MaxConcurrency int
	// MaxReceiveCount is how many receives a message that keeps failing
	// gets before SQS moves it to the dead-letter queue;
	// DefaultQueueMaxReceiveCount if zero. A message that can never
	// succeed does not wait for it: the function sends it there at once,
	// with its reason.
	MaxReceiveCount int
}

// TaskHandler is an SQS function of your own (package handler's Tasks)
// with what its guarantees need: its tasks queue and that queue's
// dead-letter queue, an idempotency table (package idempotency's schema,
// TTL on expiration), the mapping (batch item failures), the variables
// handler.TasksFromEnv reads, and grants of exactly the calls the handler
// makes.
type TaskHandler struct {
	// Queue is where producers send the tasks' envelopes.
	Queue awssqs.Queue
	// DLQ holds the messages set aside (with their reason) and those that
	// kept failing past MaxReceiveCount.
	DLQ awssqs.IQueue
	// Idempotency keeps each event id's record and stored result.
	Idempotency awsdynamodb.Table
	// Function consumes Queue.
	Function *QueueFunction
}

// NewTaskHandler creates a task handler function and its resources under
// a construct of its own, id.
func NewTaskHandler(scope constructs.Construct, id string, props TaskHandlerProps) (*TaskHandler, error) {
	if !assetNameRE.MatchString(props.Name) {
		return nil, fmt.Errorf("TaskHandler %q: Name %q is not an asset name (lower-case letters, digits, '-')", id, props.Name)
	}
	if props.FIFO && props.BatchSize > 10 {
		return nil, fmt.Errorf("TaskHandler %q: BatchSize %d on a FIFO queue; Lambda allows at most 10", id, props.BatchSize)
	}
	if props.MaxConcurrency != 0 && (props.MaxConcurrency < 2 || props.MaxConcurrency > 1000) {
		return nil, fmt.Errorf("TaskHandler %q: MaxConcurrency %d is outside 2-1000", id, props.MaxConcurrency)
	}
	if props.Timeout < 0 || props.MaxReceiveCount < 0 || props.BatchSize < 0 {
		return nil, fmt.Errorf("TaskHandler %q: Timeout, BatchSize and MaxReceiveCount must not be negative", id)
	}
	assetDir, err := assetDirOf(constructs.Node_Of(scope), props.AssetDir)
	if err != nil {
		return nil, fmt.Errorf("TaskHandler %q: %w", id, err)
	}
	if err := CheckAssets(assetDir, []string{props.Name}); err != nil {
		return nil, fmt.Errorf("TaskHandler %q: %w", id, err)
	}
	timeout := props.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	h := &TaskHandler{}
	h.Queue = NewQueueWithDLQ(c, "Tasks", QueueWithDLQProps{ConsumerTimeout: timeout, MaxReceiveCount: props.MaxReceiveCount, FIFO: props.FIFO})
	h.DLQ = h.Queue.DeadLetterQueue().Queue
	h.Idempotency = newIdempotencyTable(c, "Idempotency")
	desc := props.Description
	if desc == "" {
		desc = fmt.Sprintf("Task handler %s (package handler): runs each task of its queue once per event id, sets the ones that can never succeed aside on its dead-letter queue", props.Name)
	}
	h.Function = NewQueueFunction(c, "Function", QueueFunctionProps{
		Function: GoFunctionProps{
			Name:        props.Name,
			AssetDir:    assetDir,
			Description: desc,
			Environment: map[string]*string{EnvIdempotencyTableName: h.Idempotency.TableName()},
			Timeout:     timeout,
			MemoryMB:    props.MemoryMB,
		},
		Queue:          h.Queue,
		BatchSize:      props.BatchSize,
		MaxConcurrency: props.MaxConcurrency,
	})
	// The dead-letter sender finds the DLQ through the source queue's
	// RedrivePolicy (no variable needed).
	grantIdempotency(h.Function.Role, h.Idempotency)
	grantDeadLetters(h.Function.Role, []awssqs.IQueue{h.Queue}, []awssqs.IQueue{h.DLQ})
	awscdk.NewCfnOutput(c, jsii.String("QueueUrl"), &awscdk.CfnOutputProps{
		Value: h.Queue.QueueUrl(), Description: jsii.String(fmt.Sprintf("SQS queue of %s's tasks", props.Name)),
	})
	awscdk.NewCfnOutput(c, jsii.String("DlqUrl"), &awscdk.CfnOutputProps{
		Value: h.DLQ.QueueUrl(), Description: jsii.String(fmt.Sprintf("SQS dead-letter queue of %s's tasks set aside or failed", props.Name)),
	})
	awscdk.NewCfnOutput(c, jsii.String("IdempotencyTableName"), &awscdk.CfnOutputProps{
		Value: h.Idempotency.TableName(), Description: jsii.String(fmt.Sprintf("DynamoDB table of %s's idempotency records", props.Name)),
	})
	return h, nil
}
