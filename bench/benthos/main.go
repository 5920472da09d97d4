package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"
)

func main() {
	records := flag.Int("records", 10000, "records per run")
	nkeys := flag.Int("keys", 50, "distinct keys")
	runs := flag.Int("runs", 3, "measured runs; the median by CPU time is reported")
	lead := flag.Duration("lead", 2*time.Second, "time from the start of a run to the end of its wall-clock window; it must cover taking in every record")
	events := flag.String("events", "", "a Lambda Kinesis event (JSON) whose records' data to use instead of generated envelopes; its records must fall in one minute of event time")
	flag.Parse()

	evs := generate(*records, *nkeys)
	if *events != "" {
		var err error
		if evs, err = loadEvents(*events); err != nil {
			fmt.Fprintf(os.Stderr, "benthos: %v\n", err)
			os.Exit(1)
		}
	}
	r, err := measure(context.Background(), evs, *runs, *lead)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benthos: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(benchLine(r))
}

// measure makes runs runs and one more for the peak heap (whose sampling
// would add to the CPU time), and returns the median run by CPU time with
// that peak.
func measure(ctx context.Context, evs []envelope, runs int, lead time.Duration) (result, error) {
	var rs []result
	for i := range max(runs, 1) {
		r, err := runOnce(ctx, evs, lead, false)
		if err != nil {
			return result{}, fmt.Errorf("run %d: %w", i+1, err)
		}
		rs = append(rs, r)
	}
	heap, err := runOnce(ctx, evs, lead, true)
	if err != nil {
		return result{}, fmt.Errorf("heap run: %w", err)
	}
	slices.SortFunc(rs, func(a, b result) int { return int(a.cpu - b.cpu) })
	r := rs[len(rs)/2]
	r.peakHeap = heap.peakHeap
	r.runs = len(rs)
	r.minRate = float64(rs[len(rs)-1].records) / rs[len(rs)-1].cpu.Seconds()
	r.maxRate = float64(rs[0].records) / rs[0].cpu.Seconds()
	return r, nil
}

func benchLine(r result) string {
	return fmt.Sprintf("BENCH throughput_benthos records=%d runs=%d records_per_s=%.0f records_per_s_min=%.0f records_per_s_max=%.0f ns_per_record=%.0f allocs_per_record=%.1f peak_heap_mb=%.1f cpu_ms=%d wall_ms=%d flush_ms=%d",
		r.records, r.runs, float64(r.records)/r.cpu.Seconds(), r.minRate, r.maxRate, float64(r.cpu.Nanoseconds())/float64(r.records),
		float64(r.mallocs)/float64(r.records), float64(r.peakHeap)/(1<<20), r.cpu.Milliseconds(), r.wall.Milliseconds(), r.flush.Milliseconds())
}
