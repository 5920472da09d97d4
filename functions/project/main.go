// Command project is the Lambda on the published events' Kinesis stream: it
// keeps the availability and bookings views in the table the SSM parameter
// VIEWS_PARAMETER_NAME names (re-read every VIEWS_REFRESH_SECONDS), each
// item fenced by version, filling gaps from the event store
// (ES_EVENTS_TABLE). The seat maps are the commands' (written in their
// transactions). Records that can never be applied are set aside in the
// quarantine table (QUARANTINE_TABLE_NAME). The logic is in packages
// projection and seats.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/internal/lambdamain"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "project"}
	tables, err := es.TablesFromEnv(os.LookupEnv, false, false)
	if err != nil {
		m.Fail("%v", err)
	}
	quarantine := m.RequireTable("QUARANTINE_TABLE_NAME", "the DynamoDB table records that can never be applied are set aside in")
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	views, err := aggregate.ViewsTableFromEnv(context.Background(), cfg, os.LookupEnv, log)
	if err != nil {
		m.Fail("%v", err)
	}
	db := dynamodb.NewFromConfig(cfg)
	mt := metrics.New(os.Stdout, "project")
	sink := setaside.New(db, quarantine, setaside.WithFunction(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")),
		setaside.WithMetrics(mt), setaside.WithLogger(log))
	store := es.NewStore(db, tables)
	p := projection.New(db, store, views, seats.Views(es.NewExecutor[seats.Show](store, seats.Decider{})), projection.WithoutStateViews(),
		projection.WithSetAside(sink), projection.WithMetrics(mt), projection.WithLogger(log))
	lambda.Start(lambdamain.Typed(stream.EventKinesis, p.Handle))
}
