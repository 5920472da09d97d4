// Command local runs the Tributary topology on this machine, from the
// synthesized CDK template, against the moto stand-in (or LocalStack).
//
//	local run      deploy, send sample traffic, check and print the results, stop everything, exit
//	local up       deploy and keep running until Ctrl-C (which exits 0)
//	local logs     print the functions' logs and metrics from the running stand-in
//	local invoke   send one event to a function, as the console's Test tab does
//
// The Makefile's `make local`, `make local-up`, `make logs` and `make invoke`
// build what these need first, then run the binary it builds into
// .build/bin/tributary-local.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// started is when this process started, for the wall time of a run.
var started = time.Now()

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	switch cmd {
	case "run", "up", "logs", "invoke":
	default:
		usage()
		os.Exit(2)
	}
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	opts := bindOptions(fs)
	opts.cmd = cmd
	_ = fs.Parse(os.Args[2:])
	opts.parsed(fs)
	if err := opts.check(); err != nil {
		fmt.Fprintf(os.Stderr, "local: %s\n", err)
		os.Exit(2)
	}
	if cmd == "run" || cmd == "up" {
		// Under make, Ctrl-C would reach make too, which then reports the
		// recipe as interrupted whatever this process does; taking the
		// terminal's foreground lets this process alone hear it and stop
		// cleanly (up exits 0).
		defer takeTerminal()()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "run":
		err = run(ctx, opts)
	case "up":
		err = up(ctx, opts)
	case "logs":
		err = logs(ctx, opts)
	case "invoke":
		err = invoke(ctx, opts)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			if cmd == "up" {
				// Ctrl-C is how up is meant to end, while starting too:
				// what had started has been stopped.
				fmt.Fprintln(os.Stderr, "local: interrupted while starting; everything started was stopped")
				return
			}
			fmt.Fprintln(os.Stderr, "local: interrupted")
			os.Exit(130)
		}
		// Errors of package local name it already: one prefix, not two.
		fmt.Fprintf(os.Stderr, "local: %s\n", strings.TrimPrefix(err.Error(), "local: "))
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: local run|up|logs|invoke [flags]   (see `go run ./cmd/local run -h`)")
}
