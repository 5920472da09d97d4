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
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tributary-dev/tributary/internal/cli"
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
	opts, code := parseArgs(cmd, os.Args[2:], os.Stderr)
	if opts == nil {
		os.Exit(code)
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

// parseArgs reads cmd's flags from args. A flag it cannot read is one line
// naming it and its value, and how to list the flags (the usage of every
// flag of every command, which make logs SINCE=abc printed, buried it);
// -h lists them. nil options: exit with code.
func parseArgs(cmd string, args []string, stderr io.Writer) (*options, int) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	opts := bindOptions(fs)
	opts.cmd = cmd
	if err := cli.Parse(fs, args, stderr, "usage: go run ./cmd/local "+cmd+" [flags]", ""); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		fmt.Fprintf(stderr, "local %s: %v (go run ./cmd/local %s -h lists the flags; under make, -since is SINCE=, -lambda-port LAMBDA_PORT=)\n", cmd, err, cmd)
		return nil, 2
	}
	opts.parsed(fs)
	if err := opts.check(); err != nil {
		fmt.Fprintf(stderr, "local: %s\n", err)
		return nil, 2
	}
	return opts, 0
}
