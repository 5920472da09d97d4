// Command ingest is the Lambda behind the events Function URL: it validates
// envelopes and writes them to the Kinesis stream named by
// EVENTS_STREAM_NAME, under the load policy its route declares in
// INGEST_ROUTES (buffer, backpressure or drop; default: backpressure on /).
// With INGEST_IDEMPOTENCY_TABLE it honours the Idempotency-Key header; with
// INGEST_AUTH=HMAC it checks every request's signature against the secret
// INGEST_SECRET_ARN names. The logic is in package ingest.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "ingest"}
	streamName := m.RequireStream("EVENTS_STREAM_NAME", "the Kinesis stream events are written to")
	cfg := m.AWSConfig()
	opts, err := ingest.EnvOptions(context.Background(), os.Getenv, ingest.Clients{
		DynamoDB:       dynamodb.NewFromConfig(cfg),
		SecretsManager: secretsmanager.NewFromConfig(cfg),
	})
	if err != nil {
		m.Fail("%v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h := ingest.New(kinesis.NewFromConfig(cfg), streamName,
		append(opts, ingest.WithMetrics(metrics.New(os.Stdout, "ingest")), ingest.WithLogger(log))...)
	lambda.Start(lambdamain.Typed(stream.EventFunctionURL, h.Handle))
}
