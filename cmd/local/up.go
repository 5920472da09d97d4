package main

import (
	"context"
	"errors"
	"fmt"
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
	fmt.Printf(`
Tributary is running locally. Ctrl-C stops it.

  AWS endpoint      %s   (export AWS_ENDPOINT_URL=%s AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1)
  ingest URL        %s
  events stream     %s
  views table       %s   (pipeline %s)
  output stream     %s
  quarantine table  %s

Send an event:
  curl -s -X POST %s -H 'content-type: application/json' \
    -d '{"id":"e1","type":"page_view","key":"user-1","occurredAt":"'$(date -u +%%FT%%TZ)'","sentAt":"'$(date -u +%%FT%%TZ)'","data":{"page":"/","ms":420}}'
See the windows:
  aws dynamodb scan --table-name %s --endpoint-url %s
Rebuild the views from 10 minutes ago into a new version, then swap readers to it
(with the AWS_* variables above exported):
  go run ./cmd/replay rebuild -pipeline infra/pipeline.json -stream %s -parameter %s -from 10m
Logs and metrics (another terminal):
  make logs
`, srv.Endpoint(), srv.Endpoint(), topo.ingestURL, topo.eventsName, topo.windows.Table, topo.windows.Pipeline.Name, topo.windows.Output, topo.quarantine, topo.ingestURL, topo.windows.Table, srv.Endpoint(),
		topo.eventsName, topo.viewsParameter)
	select {
	case <-ctx.Done():
		return nil
	case err := <-stack.Errors():
		return err
	}
}
