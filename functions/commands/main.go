// Command commands is the event-sourcing API behind a function URL
// (AWS_IAM): POST /commands runs a seat-reservation command against the
// event store (ES_EVENTS_TABLE, ES_SNAPSHOTS_TABLE, ES_COMMANDS_TABLE;
// snapshots every ES_SNAPSHOT_EVERY versions), writing each show's seat map
// in the same transaction; GET /shows/…, /days/…, /customers/… read the
// views in the table the SSM parameter VIEWS_PARAMETER_NAME names (re-read
// every VIEWS_REFRESH_SECONDS). The logic is in packages es and seats.
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
	"github.com/tributary-dev/tributary/pkg/seats"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func main() {
	m := lambdamain.Main{Function: "commands"}
	tables, err := es.TablesFromEnv(os.LookupEnv, true, true)
	if err != nil {
		m.Fail("%v", err)
	}
	every, err := es.SnapshotEveryFromEnv(os.LookupEnv)
	if err != nil {
		m.Fail("%v", err)
	}
	cfg := m.AWSConfig()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	views, err := aggregate.ViewsTableFromEnv(context.Background(), cfg, os.LookupEnv, log)
	if err != nil {
		m.Fail("%v", err)
	}
	db := dynamodb.NewFromConfig(cfg)
	mt := metrics.New(os.Stdout, "commands")
	x := es.NewExecutor[seats.Show](es.NewStore(db, tables), seats.Decider{}, es.WithSyncView(seats.SyncView(views)),
		es.WithSnapshotEvery[seats.Show](every), es.WithMetrics[seats.Show](mt), es.WithLogger[seats.Show](log))
	api := seats.NewAPI(x, db, views, seats.APIWithMetrics(mt), seats.APIWithLogger(log))
	lambda.Start(lambdamain.Typed(stream.EventFunctionURL, api.Handle))
}
