// Command local runs the Tributary topology on this machine, from the
// synthesized CDK template, against the moto stand-in (or LocalStack).
//
//	go run ./cmd/local run    deploy, send sample traffic, print results, stop everything, exit
//	go run ./cmd/local up     deploy and keep running until Ctrl-C
//	go run ./cmd/local logs   print function logs and metrics from the running stand-in
//
// The Makefile's `make local`, `make local-up` and `make logs` build what these need first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	opts := bindOptions(fs)
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, opts)
	case "up":
		err = up(ctx, opts)
	case "logs":
		err = logs(ctx, opts)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "local: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: local run|up|logs [flags]   (see `go run ./cmd/local run -h`)")
}
