// Command join is the stream–stream window join on the events Kinesis
// stream: the two event types JOIN_CONFIG (a join file of pipelines/, as
// the stack passes it) declares, joined by key within its bound; joined,
// unmatched and click-through-rate records go to the Kinesis stream named
// by JOINS_STREAM_NAME. Its state, watermarks and dedupe ledger are in the
// DynamoDB table JOIN_STATE_TABLE_NAME (package state's schema); records
// that can never be joined are set aside in QUARANTINE_TABLE_NAME. An
// EventBridge schedule event runs its tick (idle shards' watermarks; with
// EVENTS_STREAM_NAME, the stream it reads, not those whose records wait
// for the join). The logic is in packages join and keyed.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

func main() {
	m := lambdamain.Main{Function: "join"}
	cfg, err := join.Load()
	if err != nil {
		m.Fail("%v", err)
	}
	table := m.RequireTable("JOIN_STATE_TABLE_NAME", "the DynamoDB table (keys pk/sk, index open) holding the join's state")
	out := m.RequireStream("JOINS_STREAM_NAME", "the Kinesis stream joined records are written to")
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be joined are set aside in")
	awsCfg := m.AWSConfig()
	kin := kinesis.NewFromConfig(awsCfg)
	// The tick reads the events stream before it takes a shard for idle.
	withBacklog, err := keyed.BacklogFromEnv(os.LookupEnv, kin)
	if err != nil {
		m.Fail("%v", err)
	}
	db := dynamodb.NewFromConfig(awsCfg)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// Per join file too ({Function, Pipeline}): its alarms and dashboard read
	// its own series when several joins run.
	mt := metrics.New(os.Stdout, "join", metrics.WithDimension(metrics.PipelineDimension, cfg.Name))
	sink := setaside.New(db, quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")), setaside.WithMetrics(mt), setaside.WithLogger(log))
	views := state.NewViews(db, table, nil, state.WithKeyedExpiry(keyed.StateExpiry))
	h := join.New(cfg, views, kin, out, join.DefaultLimits,
		keyed.WithMetrics(mt), keyed.WithLogger(log), keyed.WithSetAside(sink),
		keyed.WithDedupe(keyed.NewLedger(db, table, cfg.Name, cfg.DedupeHorizon)), withBacklog)
	lambda.Start(h)
}
