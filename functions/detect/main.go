// Command detect is complex event processing on the events Kinesis stream:
// the rules in the DynamoDB table RULES_TABLE_NAME (re-read every 5 s, so
// rules added at runtime apply without a deploy) run per key over every
// event; each match goes to the Kinesis stream MATCHES_STREAM_NAME and is
// logged as one JSON line ("cep match"). Partial matches, watermarks and
// the dedupe ledger are in CEP_STATE_TABLE_NAME; CEP_CONFIG (a CEP file of
// pipelines/, as the stack passes it) declares the watermark; records that
// can never be matched are set aside in QUARANTINE_TABLE_NAME. An
// EventBridge schedule event runs its tick; with EVENTS_STREAM_NAME (the
// stream it reads) the tick first checks that an idle-looking shard holds
// no record detect has not processed. The logic is in packages cep and
// keyed.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

func main() {
	m := lambdamain.Main{Function: "detect"}
	cfg, err := cep.LoadConfig()
	if err != nil {
		m.Fail("%v", err)
	}
	timing, err := cep.TimingFromEnv(os.LookupEnv)
	if err != nil {
		m.Fail("%v", err)
	}
	table := m.RequireTable("CEP_STATE_TABLE_NAME", "the DynamoDB table (keys pk/sk, index open) holding partial matches")
	rules := m.RequireTable("RULES_TABLE_NAME", "the DynamoDB table (key id) holding the rules")
	out := m.RequireStream("MATCHES_STREAM_NAME", "the Kinesis stream matches are written to")
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be matched are set aside in")
	awsCfg := m.AWSConfig()
	kin := kinesis.NewFromConfig(awsCfg)
	// The tick reads the events stream before it takes a shard for idle.
	withBacklog, err := keyed.BacklogFromEnv(os.LookupEnv, kin)
	if err != nil {
		m.Fail("%v", err)
	}
	db := dynamodb.NewFromConfig(awsCfg)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// Per CEP file too ({Function, Pipeline}): its alarms and dashboard read
	// its own series when several detections run.
	mt := metrics.New(os.Stdout, "detect", metrics.WithDimension(metrics.PipelineDimension, cfg.Name))
	sink := setaside.New(db, quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")), setaside.WithMetrics(mt), setaside.WithLogger(log))
	store := cep.NewStore(db, rules, nil).WithLogger(log).WithTiming(timing)
	views := state.NewViews(db, table, nil, state.WithKeyedExpiry(keyed.StateExpiry))
	h := cep.NewHandler(cfg, views, kin, out, store, nil,
		keyed.WithMetrics(mt), keyed.WithLogger(log), keyed.WithSetAside(sink), keyed.WithEmitHook(cep.LogMatches(log)),
		keyed.WithDedupe(keyed.NewLedger(db, table, cfg.Name, cfg.DedupeHorizon)), withBacklog).WithTiming(timing)
	lambda.Start(h)
}
