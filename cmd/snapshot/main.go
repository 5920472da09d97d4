// Command snapshot publishes a CDC table's items to the events stream as
// snapshot records tied to the table's stream position — what the snapshot
// function does, from a terminal — and prints where a new consumer starts.
//
//	go run ./cmd/snapshot -table profiles -stream events
//	go run ./cmd/snapshot -table profiles -stream events -key-attribute userId
//
// The endpoint comes from AWS_ENDPOINT_URL when set (the local stand-in:
// also export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test); the region
// from the usual AWS settings, or us-east-1. Progress ("published 1200/≈5000")
// goes to stderr, the result (stream position, count, startAt) to stdout as
// JSON. Running it again is safe: consumers apply by version.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/replay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", os.Getenv("PROFILES_TABLE_NAME"), "the DynamoDB table to snapshot (default $PROFILES_TABLE_NAME)")
	streamName := fs.String("stream", os.Getenv("EVENTS_STREAM_NAME"), "the events Kinesis stream (default $EVENTS_STREAM_NAME)")
	keyAttr := fs.String("key-attribute", cdc.DefaultEntityKeyAttribute, "the item attribute holding the entity key (the partition key of the records)")
	skew := fs.Duration("clock-skew", replay.DefaultClockSkew, "how far before the scan's start the consumer is told to begin")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *table == "" || *streamName == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: snapshot -table <profiles table> -stream <events stream> [-key-attribute userId] [-clock-skew 5s]")
		return 2
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "snapshot: loading AWS configuration: %v\n", err)
		return 1
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	last := time.Time{}
	s := replay.NewSnapshotter(dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kinesis.NewFromConfig(cfg), *streamName,
		replay.WithCDCOptions(cdc.WithEntityKeyAttribute(*keyAttr)), replay.WithClockSkew(*skew),
		replay.WithProgress(func(published, total int) {
			if time.Since(last) >= time.Second || published >= total {
				fmt.Fprintf(stderr, "published %d/≈%d\n", published, total)
				last = time.Now()
			}
		}))
	fmt.Fprintf(stderr, "snapshot of %s to %s\n", *table, *streamName)
	res, err := s.Snapshot(ctx, *table)
	if err != nil {
		fmt.Fprintf(stderr, "snapshot: %v\n", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(stderr, "snapshot: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "published %d snapshot records in %s; start a new consumer of %s at %s (AT_TIMESTAMP)\n",
		res.Published, res.Took, res.Stream, res.StartAt.Format(time.RFC3339Nano))
	return 0
}
