// Command enrich is the Lambda on the events Kinesis stream that joins
// activity events with the profiles changelog cdc writes to the same stream
// (the stream–table join): it writes one enriched record per activity event
// to the Kinesis stream named by ENRICHED_STREAM_NAME and keeps the join's
// copy of the profiles in the DynamoDB table named by JOIN_TABLE_NAME
// (partition key "pk", a string); an activity event's id suppresses its
// producer's copies for DEDUPE_HORIZON (default 1h, at most 168h; 0s: off).
// Records that can never be joined are set aside in the quarantine table
// (QUARANTINE_TABLE_NAME). The logic is in package enrich.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "enrich"}
	out := m.RequireStream("ENRICHED_STREAM_NAME", "the Kinesis stream enriched records are written to")
	table := m.RequireTable("JOIN_TABLE_NAME", "the DynamoDB table (partition key pk, a string) holding the join's copy of the profiles")
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be joined are set aside in")
	horizon, err := enrich.DedupeHorizonFromEnv(os.LookupEnv)
	if err != nil {
		m.Fail("%v", err)
	}
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	db := dynamodb.NewFromConfig(cfg)
	mt := metrics.New(os.Stdout, "enrich")
	sink := setaside.New(db, quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		setaside.WithMetrics(mt), setaside.WithLogger(log))
	h := enrich.New(db, kinesis.NewFromConfig(cfg), table, out,
		enrich.WithMetrics(mt), enrich.WithLogger(log), enrich.WithSetAside(sink),
		enrich.WithDedupe(enrich.NewLedger(db, table, horizon)))
	lambda.Start(lambdamain.Typed(stream.EventKinesis, h.Handle))
}
