// Command quarantine consumes the failures queue (the on-failure destination
// of the stream consumers), fetches the failed records from their stream and
// keeps them in the DynamoDB table named by QUARANTINE_TABLE_NAME. The logic
// is in package quarantine.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/quarantine"
)

func main() {
	table := requireEnv("QUARANTINE_TABLE_NAME", "the DynamoDB table failed records are kept in")
	// AWS_ENDPOINT_URL, when set (the local runner), points every client at the stand-in.
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("loading the AWS configuration: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := quarantine.New(kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg), table,
		quarantine.WithDynamoDBStreams(dynamodbstreams.NewFromConfig(cfg)),
		quarantine.WithMetrics(metrics.New(os.Stdout, "quarantine")),
		quarantine.WithLogger(log))
	lambda.Start(h.Handle)
}

func requireEnv(name, what string) string {
	v := os.Getenv(name)
	if v == "" {
		fail("environment variable %s is not set (%s)", name, what)
	}
	return v
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "quarantine: "+format+"\n", args...)
	os.Exit(1)
}
