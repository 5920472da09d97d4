// Command quarantine consumes the failures queue (the on-failure destination
// of the stream consumers), fetches the failed records from their stream and
// keeps them in the DynamoDB table named by QUARANTINE_TABLE_NAME (a
// DynamoDB stream record without its personal attribute). The logic is in
// package quarantine.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/quarantine"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "quarantine"}
	table := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table failed records are kept in")
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := quarantine.New(kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg), table,
		quarantine.WithDynamoDBStreams(dynamodbstreams.NewFromConfig(cfg)),
		quarantine.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		quarantine.WithMetrics(metrics.New(os.Stdout, "quarantine")),
		quarantine.WithLogger(log))
	lambda.Start(lambdamain.Typed(stream.EventSQS, h.Handle))
}
