// Command enrich is the Lambda on the events Kinesis stream that joins
// activity events with the profiles changelog cdc writes to the same stream
// (the stream–table join): it writes one enriched record per activity event
// to the Kinesis stream named by ENRICHED_STREAM_NAME and keeps the join's
// copy of the profiles in the DynamoDB table named by JOIN_TABLE_NAME
// (partition key "pk", a string). Records that can never be joined are set
// aside in the quarantine table (QUARANTINE_TABLE_NAME). The logic is in
// package enrich.
package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

func main() {
	m := lambdamain.Main{Function: "enrich"}
	out := m.RequireEnv("ENRICHED_STREAM_NAME", "the Kinesis stream enriched records are written to")
	table := m.RequireEnv("JOIN_TABLE_NAME", "the DynamoDB table (partition key pk, a string) holding the join's copy of the profiles")
	quarantine := m.RequireEnv("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be joined are set aside in")
	horizon := time.Hour
	if v := os.Getenv("DEDUPE_HORIZON"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			m.Fail("environment variable DEDUPE_HORIZON: %q is not a duration such as 1h (0s turns suppression of copies off)", v)
		}
		horizon = d
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
	lambda.Start(h.Handle)
}
