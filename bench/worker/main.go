package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.messages, "messages", 500, "messages per variant (one unique task id each)")
	flag.IntVar(&cfg.batch, "batch", 10, "messages per SQS event")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	flag.Parse()
	if cfg.messages < 1 {
		fmt.Fprintf(os.Stderr, "worker: -messages %d: want a positive integer\n", cfg.messages)
		os.Exit(2)
	}
	if cfg.batch < 1 || cfg.batch > 10 {
		fmt.Fprintf(os.Stderr, "worker: -batch %d: want 1 to 10 (an SQS event holds at most 10 messages)\n", cfg.batch)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// config is what one run of the driver measures.
type config struct {
	messages int
	batch    int
	verbose  bool
}

func (c config) logf(w io.Writer, format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(w, "worker: "+format+"\n", args...)
	}
}
