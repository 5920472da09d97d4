// Command cdc is the Lambda on the profiles table's DynamoDB stream
// (NEW_AND_OLD_IMAGES): it writes each change as a changelog record to the
// Kinesis stream named by EVENTS_STREAM_NAME, partitioned by the entity key
// attribute ENTITY_KEY_ATTRIBUTE (default userId). The logic is in package cdc.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

func main() {
	m := lambdamain.Main{Function: "cdc"}
	streamName := m.RequireEnv("EVENTS_STREAM_NAME", "the Kinesis stream changelog records are written to")
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	opts := append(cdc.EnvOptions(os.Getenv), cdc.WithMetrics(metrics.New(os.Stdout, "cdc")), cdc.WithLogger(log))
	h := cdc.New(kinesis.NewFromConfig(cfg), streamName, opts...)
	lambda.Start(h.Handle)
}
