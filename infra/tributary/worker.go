package tributary

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionWorker is the tasks worker (functions/worker).
const FunctionWorker = "worker"

// Environment variables of the worker, read by functions/worker.
const (
	EnvIdempotencyTableName = "IDEMPOTENCY_TABLE_NAME"
	EnvResultsTableName     = "RESULTS_TABLE_NAME"
)

// The worker's tables: package idempotency's record schema (partition key
// id, TTL on expiration) and package worker's results (partition key taskId).
const (
	idempotencyKeyAttribute = "id"
	idempotencyTTLAttribute = "expiration"
	resultsKeyAttribute     = "taskId"
)

// Worker sizing: tasks are expensive, so batches are small and the mapping's
// MaximumConcurrency caps how many invocations share the load.
const (
	workerTimeout        = 60 * time.Second
	workerMemoryMB       = 512
	workerBatchSize      = 5
	workerMaxConcurrency = 10
)

// The calls the worker makes: package idempotency's recordStore (PutItem,
// UpdateItem, DeleteItem, GetItem) on the idempotency table; package
// worker's resultStore (UpdateItem, and GetItem for a task's data.after) on
// the results table; and package worker's deadLetterAPI, which reads a
// source queue's RedrivePolicy (GetQueueUrl, GetQueueAttributes) and sends
// permanent failures to its dead-letter queue (GetQueueUrl, SendMessage).
// Keep them in step with those interfaces: a missing action works locally,
// where permissions are not enforced, and fails in AWS.
var (
	idempotencyTableActions = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem"}
	resultsTableActions     = []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}
	sourceQueueActions      = []string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes"}
	deadLetterQueueActions  = []string{"sqs:GetQueueUrl", "sqs:SendMessage"}
)

// WorkerResources is the tasks part of the topology: the Tasks queue and its
// FIFO sibling (each with a dead-letter queue), the worker consuming both,
// and its tables.
type WorkerResources struct {
	Tasks        awssqs.Queue
	TasksDLQ     awssqs.IQueue
	TasksFifo    awssqs.Queue
	TasksFifoDLQ awssqs.IQueue
	Idempotency  awsdynamodb.Table
	Results      awsdynamodb.Table
	Worker       *QueueFunction
}

// newIdempotencyTable creates a table of package idempotency's record
// schema (partition key id, TTL on expiration), on demand, with
// point-in-time recovery. Retained and deletion-protected like every table
// (ProtectState): its records stop a task's side effect from running twice
// for an hour, across a redeploy too.
func newIdempotencyTable(scope constructs.Construct, id string) awsdynamodb.Table {
	return awsdynamodb.NewTable(scope, jsii.String(id), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(idempotencyKeyAttribute), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(idempotencyTTLAttribute),
	})
}

// grantIdempotency lets role make package idempotency's calls on table.
func grantIdempotency(role awsiam.IRole, table awsdynamodb.ITable) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(idempotencyTableActions...),
		Resources: &[]*string{table.TableArn()},
	}))
}

// grantDeadLetters lets role make package worker's DeadLetters calls: read
// the sources' RedrivePolicy and send to their dead-letter queues.
func grantDeadLetters(role awsiam.IRole, sources, dlqs []awssqs.IQueue) {
	arns := func(qs []awssqs.IQueue) *[]*string {
		out := make([]*string, len(qs))
		for i, q := range qs {
			out[i] = q.QueueArn()
		}
		return &out
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(sourceQueueActions...),
		Resources: arns(sources),
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(deadLetterQueueActions...),
		Resources: arns(dlqs),
	}))
}

// addWorker creates the worker's queues, tables and function in s.
func (s *TributaryStack) addWorker(assetDir string) {
	stack := s.Stack
	w := &WorkerResources{}
	w.Idempotency = newIdempotencyTable(stack, "Idempotency")
	w.Results = awsdynamodb.NewTable(stack, jsii.String("Results"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(resultsKeyAttribute), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})

	w.Tasks = NewQueueWithDLQ(stack, "Tasks", QueueWithDLQProps{ConsumerTimeout: workerTimeout})
	w.TasksDLQ = w.Tasks.DeadLetterQueue().Queue
	w.TasksFifo = NewQueueWithDLQ(stack, "TasksFifo", QueueWithDLQProps{ConsumerTimeout: workerTimeout, FIFO: true})
	w.TasksFifoDLQ = w.TasksFifo.DeadLetterQueue().Queue

	w.Worker = NewQueueFunction(stack, "WorkerFn", QueueFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionWorker,
			AssetDir:    assetDir,
			Description: "Runs expensive tasks from the tasks queues, each task's side effect once per task id",
			Environment: map[string]*string{
				EnvIdempotencyTableName: w.Idempotency.TableName(),
				EnvResultsTableName:     w.Results.TableName(),
			},
			Timeout:  workerTimeout,
			MemoryMB: workerMemoryMB,
		},
		Queue:          w.Tasks,
		BatchSize:      workerBatchSize,
		MaxConcurrency: workerMaxConcurrency,
	})
	w.Worker.AddQueue(QueueSourceProps{
		Queue:          w.TasksFifo,
		BatchSize:      workerBatchSize,
		MaxConcurrency: workerMaxConcurrency,
	})
	grantIdempotency(w.Worker.Role, w.Idempotency)
	w.Worker.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(resultsTableActions...),
		Resources: &[]*string{w.Results.TableArn()},
	}))
	grantDeadLetters(w.Worker.Role, []awssqs.IQueue{w.Tasks, w.TasksFifo}, []awssqs.IQueue{w.TasksDLQ, w.TasksFifoDLQ})

	output(stack, "TasksQueueUrl", w.Tasks.QueueUrl(), "SQS queue of tasks for the worker")
	output(stack, "TasksDlqUrl", w.TasksDLQ.QueueUrl(), "SQS dead-letter queue of tasks the worker kept failing on")
	output(stack, "TasksFifoQueueUrl", w.TasksFifo.QueueUrl(), "SQS FIFO queue of tasks for the worker (order per message group)")
	output(stack, "TasksFifoDlqUrl", w.TasksFifoDLQ.QueueUrl(), "SQS FIFO dead-letter queue of the FIFO tasks queue")
	output(stack, "IdempotencyTableName", w.Idempotency.TableName(), "DynamoDB table of the worker's idempotency records")
	output(stack, "ResultsTableName", w.Results.TableName(), "DynamoDB table of task results (taskId; executions counts side effects)")
	s.Work = w
}
