// Command cdc is the Lambda on the profiles table's DynamoDB stream
// (NEW_AND_OLD_IMAGES): it writes each change as a changelog record to the
// Kinesis stream named by EVENTS_STREAM_NAME, partitioned by the entity key
// attribute ENTITY_KEY_ATTRIBUTE (default userId). Changes that can never
// become a changelog record are set aside in the quarantine table
// (QUARANTINE_TABLE_NAME). The logic is in package cdc.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "cdc"}
	streamName := m.RequireStream("EVENTS_STREAM_NAME", "the Kinesis stream changelog records are written to")
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table changes that can never be written are set aside in")
	opts, err := cdc.EnvOptions(os.Getenv)
	if err != nil {
		m.Fail("%v", err)
	}
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	mt := metrics.New(os.Stdout, "cdc")
	sink := setaside.New(dynamodb.NewFromConfig(cfg), quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		setaside.WithMetrics(mt), setaside.WithLogger(log))
	opts = append(opts, cdc.WithMetrics(mt), cdc.WithLogger(log), cdc.WithSetAside(sink))
	h := cdc.New(kinesis.NewFromConfig(cfg), streamName, opts...)
	lambda.Start(lambdamain.Typed(stream.EventDynamoDB, h.Handle))
}
