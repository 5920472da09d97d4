// Command redrive moves the messages of an SQS dead-letter queue back to the
// queue they came from, or (-dry-run) prints them and leaves them in place.
//
//	go run ./cmd/redrive -dlq tasks-dlq                 move to the one queue whose redrive policy names tasks-dlq
//	go run ./cmd/redrive -dlq tasks-dlq -to tasks       move to tasks
//	go run ./cmd/redrive -dlq tasks-dlq -dry-run        print the messages, move nothing
//	go run ./cmd/redrive -dlq tasks-dlq -max 50         move at most 50
//
// Queues are given by name or URL. Before anything moves, the direction is
// checked: the queue messages go to must name the DLQ in its redrive policy
// (given the wrong way round, the command says so and moves nothing); a dry
// run refuses a queue that is no DLQ but has a redrive policy of its own,
// since its receives would count towards maxReceiveCount. The region comes
// from AWS_REGION (or a profile); without one the command refuses to run.
//
// Progress ("moved 120/≈340") and the summary ("moved N, failed M") go to
// stderr; messages the source refused are listed by id and stay in the DLQ,
// and so are messages that failed again and came back during the run
// (FailedAgain: their cause still holds).
// Moving is at-least-once: nothing is lost if the command is interrupted, but
// a message sent just before an interruption may be sent again by the next
// run (Tributary's consumers are idempotent). Ctrl-C stops between batches.
// The exit status is 0 when everything asked for was moved (or listed), 1 on
// an error or any message the source refused, 2 for a wrong command line,
// 3 when the queues were checked and the command refused (nothing moved),
// 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/redrive"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: redrive -dlq <queue name or URL> [-to <queue name or URL>] [-dry-run] [-max N] [-wait 2s]
Moves the messages of a dead-letter queue back to the queue whose redrive policy names it
(or, -dry-run, lists them and leaves them).`

// maxLimit bounds -max (0 means all).
const maxLimit = 1_000_000

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redrive", flag.ContinueOnError)
	dlqArg := fs.String("dlq", "", "dead-letter queue, name or URL (required)")
	toArg := fs.String("to", "", "queue to move the messages to, name or URL; its redrive policy must name the DLQ (default: the one queue whose redrive policy names it)")
	dryRun := fs.Bool("dry-run", false, "print the messages and leave them in the DLQ")
	limit := fs.Int("max", 0, fmt.Sprintf("move at most this many messages, from 1 to %d, 0 for all; with -dry-run, print at most this many, to %d, 0 for %d", maxLimit, redrive.MaxDryRun, redrive.DryRunDefault))
	wait := fs.Duration("wait", 2*time.Second, "long-poll time of each receive, whole seconds from 0s to 20s; the DLQ counts as drained after 3 receives in a row bring nothing new (empty, or only messages the source already refused)")
	if err := cli.Parse(fs, args, stdout, usage, "Exit status: 0 done, 1 error or messages refused by the source, 2 usage, 3 refused (nothing moved), 130 interrupted.\n"+cli.RegionHelp); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(stderr, err)
	}
	for _, err := range []error{
		cli.Required("dlq", *dlqArg, "the dead-letter queue to move messages from"),
		queueArg("dlq", *dlqArg),
		queueArg("to", *toArg),
		cli.IntIn("max", *limit, 0, maxLimit, "0 for all"),
		cli.DurationIn("wait", *wait, 0, 20*time.Second, "SQS's long-poll limit"),
	} {
		if err != nil {
			return fail(stderr, err)
		}
	}
	if *wait%time.Second != 0 {
		return fail(stderr, cli.Usagef("wait", "%s: whole seconds only (SQS waits in seconds)", *wait))
	}
	if *dryRun && *limit > redrive.MaxDryRun {
		return fail(stderr, cli.Usagef("max", "%d: a dry run lists at most %d (it keeps what it listed in flight until it ends, and SQS holds 120,000)", *limit, redrive.MaxDryRun))
	}
	if *dryRun && *toArg != "" {
		return fail(stderr, cli.Usagef("to", "has no use with -dry-run, which moves nothing; drop one of them"))
	}
	if *toArg != "" && *toArg == *dlqArg {
		return fail(stderr, cli.Usagef("to", "%s is the -dlq queue itself", *toArg))
	}

	// AWS_ENDPOINT_URL, when set, points the client at the stand-in.
	cfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	r := redrive.New(sqs.NewFromConfig(cfg))
	r.Progress = stderr
	r.WaitTime = *wait

	dlq, err := r.QueueURL(ctx, *dlqArg)
	if err != nil {
		return fail(stderr, fmt.Errorf("-dlq %w", err))
	}
	if *dryRun {
		_, err := r.DryRun(ctx, dlq, *limit, stdout)
		return fail(stderr, err)
	}
	var to string
	if *toArg != "" {
		to, err = r.QueueURL(ctx, *toArg)
		if err != nil {
			return fail(stderr, fmt.Errorf("-to %w", err))
		}
	} else if to, err = r.SourceQueue(ctx, dlq); err != nil {
		return fail(stderr, err)
	}
	if err := r.CheckDirection(ctx, dlq, to); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stderr, "moving messages from %s to %s (its redrive policy names the DLQ)\n", dlq, to)
	res, err := r.Move(ctx, dlq, to, *limit)
	report(stderr, res)
	if code := fail(stderr, err); code != 0 || len(res.Failed) == 0 {
		return code
	}
	return cli.ExitError
}

// maxListed bounds the messages report names one by one: a source that
// refuses every message (its size limit below the DLQ's) refuses thousands.
const maxListed = 20

// report prints what Move did: the messages the source refused and those
// sent but not deleted, at most maxListed of each with how many more, then
// the summary.
func report(stderr io.Writer, res redrive.Result) {
	for i, f := range res.Failed {
		if i == maxListed {
			fmt.Fprintf(stderr, "… and %d more failed (left in the DLQ; redrive -dry-run lists them)\n", len(res.Failed)-maxListed)
			break
		}
		fmt.Fprintf(stderr, "failed %s: %s: %s (left in the DLQ)\n", f.MessageID, f.Code, strictjson.Cut(f.Reason, cli.MaxEcho))
	}
	for i, id := range res.NotDeleted {
		if i == maxListed {
			fmt.Fprintf(stderr, "… and %d more sent but not deleted from the DLQ (the next run sends them again)\n", len(res.NotDeleted)-maxListed)
			break
		}
		fmt.Fprintf(stderr, "sent %s but could not delete it from the DLQ: the next run sends it again\n", id)
	}
	fmt.Fprintln(stderr, res)
}

// queueArg checks a queue given by name or URL.
func queueArg(flag, v string) error {
	if v == "" || strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://") {
		return nil
	}
	return cli.QueueName.Check(flag, v)
}

// fail prints err in one line with one prefix and returns the exit status
// (0 for nil).
func fail(stderr io.Writer, err error) int {
	var usage *cli.UsageError
	var amb *redrive.AmbiguousSourceError
	switch {
	case err == nil:
		return cli.ExitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "redrive: %v; see go run ./cmd/redrive -h\n", err)
		return cli.ExitUsage
	case errors.Is(err, cli.ErrNoRegion):
		fmt.Fprintf(stderr, "redrive: %v\n", err)
		return cli.ExitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "redrive: interrupted; stopped between batches, nothing lost")
		return cli.ExitInterrupted
	case errors.Is(err, redrive.ErrRefused), errors.Is(err, redrive.ErrNoQueue), errors.Is(err, redrive.ErrNoSourceQueue), errors.As(err, &amb):
		fmt.Fprintf(stderr, "redrive: refused: %v; nothing was moved\n", err)
		return cli.ExitRefused
	default:
		fmt.Fprintf(stderr, "redrive: %v\n", err)
		return cli.ExitError
	}
}
