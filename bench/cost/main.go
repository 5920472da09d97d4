// Command cost measures what exactly-once windowed counting costs in DynamoDB
// writes: the Powertools way (one idempotency record per event, see
// scripts/bench/powertools) against Tributary's handler, side by side on one
// counting stand-in in the same run.
//
// Each workload is N events over 50 keys in one 1-minute event-time window,
// walked in Lambda-sized batches. For each run it prints one line:
//
//	BENCH cost_powertools events=1000 batch=100 write_requests=... wcu=... write_requests_per_1k=... wcu_per_1k=...
//	BENCH cost_tributary events=1000 batch=100 mode=per-batch write_requests=... ...
//	BENCH cost_ratio events=1000 batch=100 mode=per-batch powertools_per_tributary=... wcu_powertools_per_tributary=...
//
// Write units follow DynamoDB's item size rules (standin.Counts.WriteUnits).
// Run from the repository root: go run ./bench/cost [-events 1000,10000] [-batches 100,1000].
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
)

func main() {
	var cfg config
	var events, batches string
	flag.StringVar(&events, "events", "1000,10000", "comma-separated workload sizes (events per run)")
	flag.StringVar(&batches, "batches", "100,1000", "comma-separated batch sizes")
	flag.IntVar(&cfg.keys, "keys", 50, "distinct keys per workload")
	flag.StringVar(&cfg.modes, "modes", "per-batch,per-interval", "comma-separated Tributary modes")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	flag.Parse()
	var err error
	if cfg.events, err = parseInts("-events", events); err != nil {
		fmt.Fprintln(os.Stderr, "cost:", err)
		os.Exit(2)
	}
	if cfg.batches, err = parseInts("-batches", batches); err != nil {
		fmt.Fprintln(os.Stderr, "cost:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cost:", err)
		os.Exit(1)
	}
}

func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// config is what one run of the driver measures.
type config struct {
	events  []int
	batches []int
	keys    int
	modes   string
	verbose bool
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "cost: "+format+"\n", args...)
	}
}

// errNotWired is what runTributary returns until the integrator wires it.
var errNotWired = errors.New("not wired")
