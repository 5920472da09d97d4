// Command worker consumes the tasks queues (standard and FIFO): it runs each
// task once per task id, keeping idempotency records in the DynamoDB table
// named by IDEMPOTENCY_TABLE_NAME and results in RESULTS_TABLE_NAME, and
// sends tasks that fail permanently to their queue's dead-letter queue with
// the reason. The logic is in package worker.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/idempotency"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/worker"
)

func main() {
	m := lambdamain.Main{Function: "worker"}
	idemTable := m.RequireTable("IDEMPOTENCY_TABLE_NAME", "the DynamoDB table of idempotency records")
	results := m.RequireTable("RESULTS_TABLE_NAME", "the DynamoDB table task results are written to")
	// Keys are prefixed with the function's name, as Powertools does.
	function := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if function == "" {
		function = "worker"
	}
	cfg := m.AWSConfig()
	db := dynamodb.NewFromConfig(cfg)
	store, err := idempotency.New(db, idemTable, worker.IdempotencyConfig(function))
	if err != nil {
		m.Fail("%v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := worker.New(store, db, results,
		worker.WithMetrics(metrics.New(os.Stdout, "worker")),
		worker.WithLogger(log),
		// Permanent failures go to the source queue's DLQ with their reason.
		worker.WithDeadLetters(worker.NewDeadLetters(sqs.NewFromConfig(cfg), function)),
		// One log stream per execution environment, as Lambda names them.
		worker.WithEnvironment(os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME")))
	lambda.Start(lambdamain.Typed(stream.EventSQS, h.Handle))
}
