// Command redrive moves the messages of an SQS dead-letter queue back to the
// queue they came from, or (-dry-run) prints them and leaves them in place.
//
//	go run ./cmd/redrive -dlq tasks-dlq                 move to the one queue whose redrive policy names tasks-dlq
//	go run ./cmd/redrive -dlq tasks-dlq -to tasks       move to tasks
//	go run ./cmd/redrive -dlq tasks-dlq -dry-run        print the messages, move nothing
//	go run ./cmd/redrive -dlq tasks-dlq -max 50         move at most 50
//
// Queues are given by name or URL. The endpoint comes from AWS_ENDPOINT_URL
// when set (the local stand-in: also export AWS_ACCESS_KEY_ID=test
// AWS_SECRET_ACCESS_KEY=test); the region from the usual AWS settings, or
// us-east-1.
//
// Progress ("moved 120/≈340") and the summary ("moved N, failed M") go to
// stderr; messages the source refused are listed by id and stay in the DLQ.
// Moving is at-least-once: nothing is lost if the command is interrupted, but
// a message sent just before an interruption may be sent again by the next
// run (Tributary's consumers are idempotent). Ctrl-C stops between batches.
// The exit status is 0 when everything asked for was moved (or listed), 1 on
// an error or any refused message, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/pkg/redrive"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redrive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dlqArg := fs.String("dlq", "", "dead-letter queue, name or URL (required)")
	toArg := fs.String("to", "", "queue to move the messages to, name or URL (default: the DLQ's one source queue)")
	dryRun := fs.Bool("dry-run", false, "print the messages and leave them in the DLQ")
	limit := fs.Int("max", 0, "move (or print) at most this many messages; 0 for all")
	wait := fs.Duration("wait", 2*time.Second, "long-poll time of each receive (whole seconds, at most 20s); the DLQ counts as drained after 3 empty receives")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dlqArg == "" || fs.NArg() > 0 || *limit < 0 || *wait < 0 || *wait > 20*time.Second {
		fmt.Fprintln(stderr, "usage: redrive -dlq <queue name or URL> [-to <queue name or URL>] [-dry-run] [-max N] [-wait 2s]")
		return 2
	}

	// AWS_ENDPOINT_URL, when set, points the client at the stand-in.
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "redrive: loading AWS configuration: %v\n", err)
		return 1
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	r := redrive.New(sqs.NewFromConfig(cfg))
	r.Progress = stderr
	r.WaitTime = *wait

	dlq, err := r.QueueURL(ctx, *dlqArg)
	if err != nil {
		fmt.Fprintf(stderr, "redrive: -dlq: %v\n", err)
		return 1
	}
	if *dryRun {
		_, err := r.DryRun(ctx, dlq, *limit, stdout)
		return exitCode(stderr, err)
	}
	var to string
	if *toArg != "" {
		to, err = r.QueueURL(ctx, *toArg)
		if err != nil {
			fmt.Fprintf(stderr, "redrive: -to: %v\n", err)
			return 1
		}
	} else if to, err = r.SourceQueue(ctx, dlq); err != nil {
		fmt.Fprintf(stderr, "redrive: finding the source queue of -dlq: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "moving messages from %s to %s\n", dlq, to)
	res, err := r.Move(ctx, dlq, to, *limit)
	for _, f := range res.Failed {
		fmt.Fprintf(stderr, "failed %s: %s: %s (left in the DLQ)\n", f.MessageID, f.Code, f.Reason)
	}
	for _, id := range res.NotDeleted {
		fmt.Fprintf(stderr, "sent %s but could not delete it from the DLQ: the next run sends it again\n", id)
	}
	fmt.Fprintln(stderr, res)
	if code := exitCode(stderr, err); code != 0 || len(res.Failed) == 0 {
		return code
	}
	return 1
}

func exitCode(stderr io.Writer, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "redrive: interrupted; stopped between batches, nothing lost")
		return 130
	default:
		fmt.Fprintf(stderr, "redrive: %v\n", err)
		return 1
	}
}
