// Command replay rebuilds the windowed views into a new version of the
// views table by replaying the events stream, then swaps the functions to
// it; and deletes old versions.
//
//	go run ./cmd/replay rebuild -stream events -parameter /tributary/current-views -from 2h
//	go run ./cmd/replay rebuild -stream events -parameter /tributary/current-views -from 2026-11-29T10:00:00Z -dry-run
//	go run ./cmd/replay current -parameter /tributary/current-views
//	go run ./cmd/replay delete-version -parameter /tributary/current-views -table views
//
// rebuild reads the pipeline from PIPELINE_CONFIG (or -pipeline file), the
// same config the aggregate function runs; creates <current>-v2 (-v3, …)
// with the current table's keys, indexes, TTL and stream; replays every
// shard from -from (a time, or a duration ago) through the aggregate
// processor into it, with a progress line a second on stderr; once every
// shard is caught up writes the new table into the SSM parameter the
// functions read (VIEWS_PARAMETER_NAME), then keeps following for -handover
// (at least the functions' VIEWS_REFRESH_SECONDS) so nothing they wrote to
// the old version before switching is missing. Final results are not
// re-emitted to the output stream unless -output-stream is given.
// delete-version refuses to delete the table the parameter names.
//
// The endpoint comes from AWS_ENDPOINT_URL when set (the local stand-in:
// also export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test); the region
// from the usual AWS settings, or us-east-1. Exit status: 0 done, 1 error,
// 2 usage, 130 interrupted (the new version is left, not current).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/replay"
	"github.com/tributary-dev/tributary/pkg/state"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, time.Now(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  replay rebuild -stream <events stream> -parameter <SSM parameter> -from <time|duration ago> [-pipeline file] [-to-table name] [-handover 1m] [-output-stream name] [-dry-run]
  replay current -parameter <SSM parameter>
  replay delete-version -parameter <SSM parameter> -table <old version> [-dry-run]`

func run(ctx context.Context, args []string, lookup func(string) (string, bool), now time.Time, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("replay "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	defParam, _ := lookup(aggregate.EnvViewsParameter)
	param := fs.String("parameter", defParam, "the SSM parameter naming the current views table (default $VIEWS_PARAMETER_NAME)")
	dryRun := fs.Bool("dry-run", false, "print what would be done, change nothing")
	var (
		streamName, from, pipelineFile, toTable, outStream, table *string
		handover                                                  *time.Duration
	)
	switch cmd {
	case "rebuild":
		defStream, _ := lookup("EVENTS_STREAM_NAME")
		streamName = fs.String("stream", defStream, "the events Kinesis stream (default $EVENTS_STREAM_NAME)")
		from = fs.String("from", "", "where to replay from: an RFC 3339 time, or a duration ago (2h)")
		pipelineFile = fs.String("pipeline", "", "the pipeline's JSON config file (default $PIPELINE_CONFIG)")
		toTable = fs.String("to-table", "", "the new version's name (default <current>-v2, -v3, …)")
		handover = fs.Duration("handover", time.Minute, "how long to keep following after the swap; at least the functions' VIEWS_REFRESH_SECONDS")
		outStream = fs.String("output-stream", "", "emit final results and corrections to this stream too (default: none)")
	case "delete-version":
		table = fs.String("table", "", "the views table version to delete")
	case "current":
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *param == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "replay: loading AWS configuration: %v\n", err)
		return 1
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	db := dynamodb.NewFromConfig(cfg)
	reg := replay.NewRegistry(ssm.NewFromConfig(cfg), *param)

	switch cmd {
	case "current":
		t, v, err := reg.Current(ctx)
		if err != nil {
			return exitCode(stderr, err)
		}
		fmt.Fprintf(stdout, "%s (parameter %s version %d)\n", t, *param, v)
		return 0
	case "delete-version":
		if *table == "" {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		if err := replay.DeleteVersion(ctx, db, reg, *table, *dryRun); err != nil {
			return exitCode(stderr, err)
		}
		if *dryRun {
			fmt.Fprintf(stderr, "dry run: would delete table %s (not the current views table)\n", *table)
		} else {
			fmt.Fprintf(stderr, "deleted table %s\n", *table)
		}
		return 0
	}

	if *streamName == "" || *from == "" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	start, err := parseFrom(*from, now)
	if err != nil {
		fmt.Fprintf(stderr, "replay: -from: %v\n", err)
		return 2
	}
	pcfg, err := loadPipeline(*pipelineFile, lookup)
	if err != nil {
		fmt.Fprintf(stderr, "replay: %v\n", err)
		return 1
	}
	kin := kinesis.NewFromConfig(cfg)
	var out aggregate.RecordPutter
	if *outStream != "" {
		out = kin
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := replay.New(kin, db, reg)
	res, err := r.Run(ctx, replay.Options{Stream: *streamName, From: start, Target: *toTable, Handover: *handover, Progress: stderr, DryRun: *dryRun},
		func(table string) (replay.BatchHandler, error) {
			views := state.NewViews(db, table, pcfg.Aggregates, state.WithRetention(aggregate.Retention))
			return aggregate.New(pcfg, views, out, *outStream, aggregate.WithLogger(log),
				aggregate.WithDedupe(aggregate.NewLedger(db, table, pcfg))), nil
		})
	if err != nil {
		if res != nil && res.Target != "" && !res.Swapped && !*dryRun {
			fmt.Fprintf(stderr, "replay: %s was not made current; %s still is (delete %s or run again with -to-table)\n", res.Target, res.Current, res.Target)
		}
		return exitCode(stderr, err)
	}
	if !*dryRun {
		fmt.Fprintf(stdout, "%s is current (was %s): read %d, applied %d, skipped %d; caught up after %s\n",
			res.Target, res.Current, res.Read, res.Applied, res.Skipped, res.CaughtUp.Round(time.Millisecond))
	}
	return 0
}

// parseFrom reads an RFC 3339 time or a duration before now.
func parseFrom(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-29T10:00:00Z) nor a positive duration ago (2h)", s)
	}
	return now.Add(-d), nil
}

func loadPipeline(file string, lookup func(string) (string, bool)) (*pipeline.Config, error) {
	var cfg *pipeline.Config
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-pipeline: %w", err)
		}
		if cfg, err = pipeline.Parse(b); err != nil {
			return nil, fmt.Errorf("-pipeline %s: %w", file, err)
		}
	} else {
		var err error
		if cfg, err = pipeline.FromEnv(lookup); err != nil {
			return nil, fmt.Errorf("%w (or give -pipeline)", err)
		}
	}
	if err := aggregate.CheckSupported(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func exitCode(stderr io.Writer, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "replay: interrupted")
		return 130
	}
	fmt.Fprintf(stderr, "replay: %v\n", err)
	return 1
}
