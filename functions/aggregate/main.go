// Command aggregate is the Kinesis consumer that counts events per key per
// event-time minute into the DynamoDB table named by COUNTS_TABLE_NAME. The
// logic is in package count.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/count"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

func main() {
	table := requireEnv("COUNTS_TABLE_NAME", "the DynamoDB table counts are written to")
	// AWS_ENDPOINT_URL, when set (the local runner), points every client at the stand-in.
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("loading the AWS configuration: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := count.New(dynamodb.NewFromConfig(cfg), table,
		count.WithMetrics(metrics.New(os.Stdout, "aggregate")),
		count.WithLogger(log))
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
	fmt.Fprintf(os.Stderr, "aggregate: "+format+"\n", args...)
	os.Exit(1)
}
