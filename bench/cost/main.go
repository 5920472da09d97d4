package main

import (
	"context"
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
	var events, batches, paths, dups string
	flag.StringVar(&events, "events", "1000,10000", "comma-separated workload sizes (distinct events per run)")
	flag.StringVar(&batches, "batches", "100,1000", "comma-separated batch sizes")
	flag.StringVar(&dups, "dups", "0,5", "comma-separated shares of events a producer sends twice, in percent (0 to 50)")
	flag.IntVar(&cfg.keys, "keys", 50, "distinct keys per workload")
	flag.StringVar(&paths, "paths", "per-batch,per-interval", "comma-separated Tributary write paths")
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
	if cfg.dupPcts, err = parsePercents("-dups", dups); err != nil {
		fmt.Fprintln(os.Stderr, "cost:", err)
		os.Exit(2)
	}
	if cfg.paths, err = parsePaths("-paths", paths); err != nil {
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

func parsePercents(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 50 {
			return nil, fmt.Errorf("%s: %q is not a whole percentage from 0 to 50", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parsePaths(flagName, s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "per-batch", "per-interval":
			out = append(out, f)
		default:
			return nil, fmt.Errorf("%s: %q is not a path: want per-batch or per-interval", flagName, f)
		}
	}
	return out, nil
}

// config is what one run of the driver measures.
type config struct {
	events  []int
	batches []int
	dupPcts []int
	keys    int
	paths   []string
	verbose bool
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "cost: "+format+"\n", args...)
	}
}
