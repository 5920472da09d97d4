package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tributary-dev/tributary/pkg/local"
)

func up(ctx context.Context, o *options) (err error) {
	tm := loadTimings(o.root)
	defer tm.done()
	srv, stack, err := startStack(ctx, o, tm, ports{o.urlPort, o.lambdaPort, o.dashboardPort})
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
Tributary is running locally (up in %s). Ctrl-C stops it.

  AWS endpoint   %s
  export AWS_ENDPOINT_URL=%s AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  ingest URL     %s   (pipeline %s)
  Lambda API     %s   (aws lambda invoke --endpoint-url %s --function-name ingest --payload fileb://events/ingest/function-url-post.json out.json)
  dashboard      %s   (the stack's CloudWatch dashboards and the window results, refreshing every 5s)

`, roundDuration(tm.total()), srv.Endpoint(), srv.Endpoint(), topo.ingestURL, topo.windows.Pipeline.Name, stack.InvokeURL(), stack.InvokeURL(), stack.DashboardURL())
	res.Print(os.Stdout)
	fmt.Printf(`
Send an event:
  curl -s -X POST %s -H 'content-type: application/json' \
    -d '{"id":"e1","type":"page_view","key":"user-1","occurredAt":"'$(date -u +%%FT%%TZ)'","sentAt":"'$(date -u +%%FT%%TZ)'","data":{"page":"/","ms":420}}'
Send a console test event (another terminal):
  make invoke FN=ingest EVENT=events/ingest/function-url-post.json
Logs and metrics (another terminal):
  make logs
`, topo.ingestURL)
	select {
	case <-ctx.Done():
		return nil
	case err := <-stack.Errors():
		return err
	}
}
