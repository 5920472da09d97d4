package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.events, "events", 50_000, "events per CEP measurement")
	flag.IntVar(&cfg.joinEvents, "join-events", 1000, "events of the join measurement")
	flag.BoolVar(&cfg.verbose, "v", false, "log progress to stderr")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the CEP measurements to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cep:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "cep:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
		cfg.onlyCEP = true
	}
	if cfg.events < 500 || cfg.joinEvents < 100 {
		fmt.Fprintln(os.Stderr, "cep: -events must be at least 500 and -join-events at least 100")
		os.Exit(2)
	}
	cfg.rules = []int{10, 100, 1000}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cep:", err)
		os.Exit(1)
	}
}
