// Command snapshot publishes a CDC table's items to the events stream as
// snapshot records tied to the table's stream position — what the snapshot
// function does, from a terminal — and prints where a new consumer starts.
//
//	go run ./cmd/snapshot -table profiles -stream events
//	go run ./cmd/snapshot -table profiles -stream events -key-attribute userId
//
// The endpoint comes from AWS_ENDPOINT_URL when set (the local stand-in:
// also export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test); the region
// from AWS_REGION or a profile, and without one the command refuses to run.
// Progress (a line per open shard of the table's stream read to take the
// position, then "published 1200/≈5000") goes to stderr, the result (stream
// position, count, startAt) to stdout as JSON. Running it again is safe:
// consumers apply by version. Exit status: 0 done, 1 error, 2 usage, 3
// refused (the stream does not exist; nothing published), 130 interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/replay"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr) })
}

const usage = `usage: snapshot -table <profiles table> -stream <events stream> [-key-attribute userId] [-clock-skew 5s]
Publishes every item of a CDC table to the events stream as snapshot records tied to the
table's stream position, and prints where a new consumer starts (startAt, AT_TIMESTAMP).`

// maxClockSkew bounds -clock-skew: a consumer told to start an hour early
// rereads an hour of the stream, more is not a clock's error.
const maxClockSkew = time.Hour

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	env := func(k string) string { v, _ := lookup(k); return v }
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	table := fs.String("table", env("PROFILES_TABLE_NAME"), "the DynamoDB table to snapshot, with a stream (default $PROFILES_TABLE_NAME)")
	streamName := fs.String("stream", env("EVENTS_STREAM_NAME"), "the events Kinesis stream (default $EVENTS_STREAM_NAME)")
	keyAttr := fs.String("key-attribute", cdc.DefaultEntityKeyAttribute, "the item attribute holding the entity key (the partition key of the records)")
	skew := fs.Duration("clock-skew", replay.DefaultClockSkew, fmt.Sprintf("how far before the scan's start startAt is, from 1s to %s: more than this machine's clock can differ from Kinesis's, or a consumer starting at startAt misses records", maxClockSkew))
	if err := cli.Parse(fs, args, stdout, usage, "Exit status: 0 done, 1 error, 2 usage, 3 refused (nothing published), 130 interrupted.\n"+cli.RegionHelp); errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	} else if err != nil {
		return fail(stderr, err)
	}
	checks := []error{
		cli.Required("table", *table, "the CDC table to snapshot"),
		cli.Required("stream", *streamName, "the events Kinesis stream"),
		cli.Required("key-attribute", *keyAttr, "the item attribute holding the entity key"),
		cli.DurationIn("clock-skew", *skew, time.Second, maxClockSkew, "a negative or zero skew puts startAt after records the snapshot publishes"),
	}
	if *table != "" {
		checks = append(checks, cli.TableName.Check("table", *table))
	}
	if *streamName != "" {
		checks = append(checks, cli.StreamName.Check("stream", *streamName))
	}
	if *keyAttr != "" {
		checks = append(checks, cli.AttributeName.Check("key-attribute", *keyAttr))
	}
	for _, err := range checks {
		if err != nil {
			return fail(stderr, err)
		}
	}
	cfg, err := cli.LoadAWS(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	kin := kinesis.NewFromConfig(cfg)
	// The stream first: a snapshot that cannot be published reads nothing.
	if _, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(*streamName)}); err != nil {
		var nf *kintypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			fmt.Fprintf(stderr, "snapshot: refused -stream: stream %s does not exist; nothing published\n", *streamName)
			return cli.ExitRefused
		}
		return fail(stderr, fmt.Errorf("describing stream %s: %w", *streamName, err))
	}
	var (
		mu    sync.Mutex // the puts report from more than one goroutine
		last  time.Time
		sofar int // published before an interruption, for its message
	)
	s := replay.NewSnapshotter(dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kin, *streamName,
		replay.WithCDCOptions(cdc.WithEntityKeyAttribute(*keyAttr), cdc.WithLogger(slog.New(slog.NewTextHandler(stderr, nil)))), replay.WithClockSkew(*skew),
		replay.WithProgress(func(published, total int) {
			mu.Lock()
			defer mu.Unlock()
			sofar = max(sofar, published)
			if time.Since(last) >= time.Second || published >= total {
				fmt.Fprintf(stderr, "published %d/≈%d\n", published, total)
				last = time.Now()
			}
		}))
	fmt.Fprintf(stderr, "snapshot of %s to %s\n", *table, *streamName)
	res, err := s.Snapshot(ctx, *table)
	if err != nil {
		mu.Lock()
		n := sofar
		mu.Unlock()
		return cli.Fail(stderr, "snapshot", err, fmt.Sprintf("%d records published before it stopped; running it again is safe: consumers apply by version", n))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stderr, "published %d snapshot records in %s; start a new consumer of %s at %s (AT_TIMESTAMP: %s before the scan began)\n",
		res.Published, res.Took, res.Stream, res.StartAt.Format(time.RFC3339Nano), *skew)
	if res.Skipped > 0 {
		// The others are published; these stay in the table as they are.
		fmt.Fprintf(stderr, "snapshot: %d of the table's items could not be published (no changelog record can be made of them; mend them in %s and run it again):\n", res.Skipped, *table)
		for _, sk := range res.SkippedItems {
			fmt.Fprintf(stderr, "  %s: %s\n", sk.Item, sk.Reason)
		}
		if more := res.Skipped - len(res.SkippedItems); more > 0 {
			fmt.Fprintf(stderr, "  and %d more (each is logged above: \"snapshot: item skipped\")\n", more)
		}
		return cli.ExitError
	}
	return cli.ExitOK
}

// fail prints err in one line and returns the exit status (cli.Fail).
func fail(stderr io.Writer, err error) int {
	return cli.Fail(stderr, "snapshot", err, "running it again is safe: consumers apply by version")
}
