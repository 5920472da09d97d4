// Command snapshot bootstraps a consumer of the profiles changelog: invoked
// by hand (the console's Test tab) or by the deploy, with
// {"table": "<profiles table>"} or {} for PROFILES_TABLE_NAME, it publishes
// every item of the table to the Kinesis stream EVENTS_STREAM_NAME as a
// snapshot record tied to the table's stream position (keyed by
// ENTITY_KEY_ATTRIBUTE, default userId), and returns the position, the
// number published and where a new consumer starts (AT_TIMESTAMP startAt).
// It logs its progress: each open shard of the table's stream it reads to
// take the position, then the records published.
// The logic is in package replay; the snapshot itself in package cdc.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/replay"
)

func main() {
	m := lambdamain.Main{Function: "snapshot"}
	streamName := m.RequireStream("EVENTS_STREAM_NAME", "the Kinesis stream snapshot records are written to")
	profiles := "" // optional: an invocation may name the table
	if os.Getenv("PROFILES_TABLE_NAME") != "" {
		profiles = m.RequireTable("PROFILES_TABLE_NAME", "the table snapshotted when an invocation names none")
	}
	keyOpts, err := cdc.EnvOptions(os.Getenv)
	if err != nil {
		m.Fail("%v", err)
	}
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	s := replay.NewSnapshotter(dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kinesis.NewFromConfig(cfg), streamName,
		replay.WithDefaultTable(profiles),
		replay.WithCDCOptions(append(keyOpts, cdc.WithLogger(log))...),
		replay.WithProgress(func(published, total int) {
			log.Info("snapshot progress", "published", published, "approxTotal", total)
		}))
	lambda.Start(s)
}
