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
	flag.IntVar(&cfg.commands, "commands", 300, "commands sent at once in the throughput phase")
	flag.IntVar(&cfg.clients, "clients", 4, "concurrent clients")
	flag.IntVar(&cfg.shows, "shows", 24, "shows the commands go to (10 rows × 20 seats each)")
	flag.IntVar(&cfg.lagCommands, "lag-commands", 100, "commands sent in the projection phase")
	flag.Float64Var(&cfg.rate, "rate", 0, "commands per second in the projection phase (0: a third of what the first phase measured, so the pipeline is not saturated)")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	flag.Parse()
	if cfg.commands < 1 || cfg.clients < 1 || cfg.shows < 1 || cfg.lagCommands < 1 || cfg.rate < 0 || cfg.rate > 1000 {
		fmt.Fprintln(os.Stderr, "es: -commands, -clients, -shows and -lag-commands must be positive, -rate from 0 to 1000")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "es:", err)
		os.Exit(1)
	}
}
