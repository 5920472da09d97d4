package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tributary-dev/tributary/pkg/local"
)

func up(ctx context.Context, o *options) (err error) {
	srv, stack, err := startStack(ctx, o, o.urlPort)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n▸ stopping functions, mappings and the stand-in")
		err = errors.Join(err, stack.Close(), srv.Stop())
	}()
	topo, err := findTopology(stack)
	if err != nil {
		return err
	}
	res, err := local.FindResources(ctx, stack.Config(), stack.Deployment())
	if err != nil {
		return err
	}
	fmt.Printf(`
Tributary is running locally. Ctrl-C stops it.

  AWS endpoint   %s
  export AWS_ENDPOINT_URL=%s AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  ingest URL     %s   (pipeline %s)

`, srv.Endpoint(), srv.Endpoint(), topo.ingestURL, topo.windows.Pipeline.Name)
	res.Print(os.Stdout)
	views := res.CurrentViews
	if views == "" {
		views = topo.windows.Table
	}
	fmt.Printf(`
Send an event:
  curl -s -X POST %s -H 'content-type: application/json' \
    -d '{"id":"e1","type":"page_view","key":"user-1","occurredAt":"'$(date -u +%%FT%%TZ)'","sentAt":"'$(date -u +%%FT%%TZ)'","data":{"page":"/","ms":420}}'
See the windows:
  aws dynamodb scan --table-name %s --endpoint-url %s
Logs and metrics (another terminal):
  make logs
`, topo.ingestURL, views, srv.Endpoint())
	if e, err := stack.FindEventSourcing(); err == nil {
		fmt.Printf(`
Event sourcing (seat reservations; commands URL %s):
  curl -s -X POST %scommands -d '{"id":"c1","type":"ScheduleShow","showId":"show-1","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}'
  curl -s -X POST %scommands -d '{"id":"c2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r1","customerId":"ada","seats":["A1"]}}'
  curl -s '%sshows/show-1/availability?minVersion=2'
  export ES_VIEWS_PARAMETER=%s ES_STREAM_NAME=%s ES_EVENTS_TABLE=%s
  go run ./cmd/eventstore rebuild -handover 30s        (rollback, use-version, compare, erase: go run ./cmd/eventstore -h)
`, e.URL, e.URL, e.URL, e.URL, e.ViewsParameter, e.Stream, e.Events)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-stack.Errors():
		return err
	}
}
