package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/internal/localdeploy"
)

func up(ctx context.Context, o *options) (err error) {
	tm := loadTimings(o.root)
	defer tm.done()
	// The template as deployed, read before the deploy: a synth while
	// this runs (make invoke, a changed pipeline file) rewrites the file.
	deployed, err := os.ReadFile(o.template)
	if err != nil {
		return fmt.Errorf("reading the template: %w (make synth-local writes it)", err)
	}
	// The stack's own lines are held while its stand-in does not answer,
	// and dropped once it is taken as gone: one line says why instead.
	gate := newHeldWriter(os.Stdout)
	o.progress = gate
	srv, stack, err := startStack(ctx, o, tm, ports{o.urlPort, o.lambdaPort, o.dashboardPort})
	if err != nil {
		return err
	}
	standinStopped := false
	defer func() {
		fmt.Println("\n▸ stopping functions, mappings and the stand-in")
		closeErr := errors.Join(stack.Close(), srv.Stop())
		if standinStopped {
			// Flushing the last logs to a stand-in that is gone fails:
			// the error that says why is err.
			closeErr = nil
		}
		if err = errors.Join(err, closeErr); err == nil || errors.Is(err, context.Canceled) {
			// Ctrl-C is how up ends: say that everything is down.
			fmt.Println("✓ stopped: nothing of this run is left running")
		}
	}()
	removeCopy, err := keepDeployedTemplate(deployed, localdeploy.DeployedTemplatePath(o.root, srv.Endpoint(), stack.Deployment().StackName()))
	if err != nil {
		return err
	}
	defer removeCopy()
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
  export AWS_ENDPOINT_URL=%s AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
                 (the aws CLI: give --endpoint-url %s as well; v1 does not read the variable for every service, and sends SQS to AWS)
  ingest URL     %s   (every pipeline reads what it accepts: %s)
  Lambda API     %s   (aws lambda invoke --region us-east-1 --no-sign-request --endpoint-url %s --function-name ingest --payload fileb://events/ingest/function-url-post.json out.json)
  dashboard      %s   (the window results, each pipeline's health, the stack's CloudWatch dashboards; refreshing every 5s)

`, roundDuration(tm.total()), srv.Endpoint(), srv.Endpoint(), srv.Endpoint(), topo.ingestURL, pipelineNames(topo.pipelines), stack.InvokeURL(), stack.InvokeURL(), stack.DashboardURL())
	res.Print(os.Stdout)
	fmt.Printf(`
Send an event:
  curl -s -X POST %s -H 'content-type: application/json' \
    -d '{"id":"e1","type":"page_view","key":"user-1","occurredAt":"'$(date -u +%%FT%%TZ)'","sentAt":"'$(date -u +%%FT%%TZ)'","data":{"page":"/","ms":420}}'
Send a console test event (another terminal):
  %s
Logs and metrics (another terminal):
  %s
`, topo.ingestURL, invokeCommand(stack.InvokeURL()), res.Make(logsArgs(res.Stack)))
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
	gone := watchStandin(ctx, srv.Endpoint(), standinProbeEvery, standinMisses, gate)
	select {
	case <-ctx.Done():
		return nil
	case <-gone:
		standinStopped = true
		return standinGone(strings.TrimPrefix(srv.Endpoint(), "http://"), srv.Reused(), srv.Found(), srv.ExitReason())
	case err := <-stack.Errors():
		return err
	}
}

// invokeCommand is the make invoke line that reaches the Lambda API at
// invokeURL: make invoke asks port 3001 unless LAMBDA_PORT is given.
func invokeCommand(invokeURL string) string {
	line := "make invoke FN=ingest EVENT=events/ingest/function-url-post.json"
	if _, port, ok := strings.Cut(strings.TrimPrefix(invokeURL, "http://"), ":"); ok && port != strconv.Itoa(defaultLambdaPort) {
		line += " LAMBDA_PORT=" + port
	}
	return line
}

// logsArgs are make logs' arguments for the stack deployed as stack: a
// second make local-up on the first's stand-in deploys Tributary-<time>,
// and make logs shows Tributary's unless told.
func logsArgs(stack string) string {
	if stack == "Tributary" {
		return "logs"
	}
	return "logs STACK=" + stack
}

// pipelineNames lists the deployed pipelines' names, comma-separated.
func pipelineNames(ps []*local.Windows) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Pipeline.Name
	}
	return strings.Join(names, ", ")
}
