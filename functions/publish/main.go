// Command publish is the Lambda on the event store's DynamoDB stream
// (NEW_AND_OLD_IMAGES): it publishes each new event, without its personal
// data, on the Kinesis stream ES_STREAM_NAME, partitioned by aggregate id.
// A change to an event other than an erasure, and a deletion, are set aside
// in the quarantine table (QUARANTINE_TABLE_NAME), without the personal
// data of either image. The logic is in package es.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "publish"}
	streamName := m.RequireStream(es.EnvStreamName, "the Kinesis stream events are published on")
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be published are set aside in")
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	mt := metrics.New(os.Stdout, "publish")
	sink := setaside.New(dynamodb.NewFromConfig(cfg), quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		setaside.WithMetrics(mt), setaside.WithLogger(log))
	p := es.NewPublisher(kinesis.NewFromConfig(cfg), streamName, es.PublishWithSetAside(sink), es.PublishWithMetrics(mt), es.PublishWithLogger(log))
	lambda.Start(lambdamain.Typed(stream.EventDynamoDB, p.Handle))
}
