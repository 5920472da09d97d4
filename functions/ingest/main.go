// Command ingest is the Lambda behind the events Function URL: it validates
// envelopes and writes them to the Kinesis stream named by
// EVENTS_STREAM_NAME, under the load policy its route declares in
// INGEST_ROUTES (buffer, backpressure or drop; default: backpressure on /).
// The logic is in package ingest.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

func main() {
	streamName := requireEnv("EVENTS_STREAM_NAME", "the Kinesis stream events are written to")
	// AWS_ENDPOINT_URL, when set (the local runner), points every client at the stand-in.
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("loading the AWS configuration: %v", err)
	}
	opts, err := ingest.EnvOptions(os.Getenv)
	if err != nil {
		fail("%v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := ingest.New(kinesis.NewFromConfig(cfg), streamName,
		append(opts, ingest.WithMetrics(metrics.New(os.Stdout, "ingest")), ingest.WithLogger(log))...)
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
	fmt.Fprintf(os.Stderr, "ingest: "+format+"\n", args...)
	os.Exit(1)
}
