package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.events, "events", 10_000, "records in the shard (activity and profile changes)")
	flag.IntVar(&cfg.keys, "keys", 200, "distinct entity keys")
	flag.IntVar(&cfg.batch, "batch", 100, "records per Lambda batch")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	flag.Parse()
	if cfg.events < 1 || cfg.keys < 1 || cfg.batch < 1 || cfg.batch > 10_000 {
		fmt.Fprintln(os.Stderr, "enrich: -events and -keys must be positive and -batch 1 to 10000 (Lambda's Kinesis limit)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "enrich:", err)
		os.Exit(1)
	}
}
