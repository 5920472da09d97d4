package main

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkInvoke runs the handler as bench/throughput does, without the
// per-invocation collections, for profiling (-benchtime Nx: the events
// are made before the timer starts):
//
//	go test -run '^$' -bench Invoke -benchtime 20x -cpuprofile cpu.out ./bench/throughput
func BenchmarkInvoke(b *testing.B) {
	for _, pl := range []string{"bench", "deployed"} {
		cfg, err := loadPipeline(pl)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{100, 5000} {
			b.Run(pl+"/per-batch/"+strconv.Itoa(n), func(b *testing.B) {
				d := deploy(cfg)
				w := &workload{keys: 50}
				ctx := context.Background()
				if _, err := d.p.Invoke(ctx, w.event(n).JSON()); err != nil {
					b.Fatal(err)
				}
				evs := make([][]byte, b.N)
				for i := range evs {
					evs[i] = w.event(n).JSON()
				}
				timeInvokes(ctx, b, d, evs, n)
			})
			// The first invocation of an interval, each on a new interval
			// (its state is not carried on: the next is a first again).
			b.Run(pl+"/interval-first/"+strconv.Itoa(n), func(b *testing.B) {
				d := deploy(cfg)
				w := &workload{keys: 50}
				ctx := context.Background()
				evs := make([][]byte, b.N+1)
				for i := range evs {
					evs[i] = w.windowEvent(n, map[string]string{}, false).JSON()
				}
				if _, err := d.p.Invoke(ctx, evs[b.N]); err != nil {
					b.Fatal(err)
				}
				timeInvokes(ctx, b, d, evs, n)
			})
			// A later invocation of an interval: the state the first
			// returned, as Lambda passes it back (each on the same state).
			b.Run(pl+"/interval-carried/"+strconv.Itoa(n), func(b *testing.B) {
				d := deploy(cfg)
				w := &workload{keys: 50}
				ctx := context.Background()
				st := firstState(ctx, b, d, w, n)
				evs := make([][]byte, b.N)
				for i := range evs {
					evs[i] = w.windowEvent(n, st, false).JSON()
				}
				timeInvokes(ctx, b, d, evs, n)
			})
			// The final invocation of an interval, which flushes: each
			// interval's first invocation runs untimed, and its state is
			// handed to the timed final one.
			b.Run(pl+"/interval-final/"+strconv.Itoa(n), func(b *testing.B) {
				d := deploy(cfg)
				w := &workload{keys: 50}
				ctx := context.Background()
				b.ReportAllocs()
				var elapsed time.Duration
				for i := 0; i < b.N; i++ {
					ev := w.windowEvent(n, firstState(ctx, b, d, w, n), true).JSON()
					start := time.Now()
					if _, err := d.p.Invoke(ctx, ev); err != nil {
						b.Fatal(err)
					}
					elapsed += time.Since(start)
				}
				b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*n), "ns/record")
			})
		}
	}
}

// firstState runs an interval's first invocation of n records and returns
// the state it answers with, as Lambda hands it to the next one.
func firstState(ctx context.Context, b *testing.B, d *deployment, w *workload, n int) map[string]string {
	b.Helper()
	out, err := d.p.Invoke(ctx, w.windowEvent(n, map[string]string{}, false).JSON())
	if err != nil {
		b.Fatal(err)
	}
	r, err := checkResponse(out)
	if err != nil {
		b.Fatal(err)
	}
	return r.State
}

// timeInvokes times one invocation of each of evs' first b.N events of n
// records, and reports the time a record takes.
func timeInvokes(ctx context.Context, b *testing.B, d *deployment, evs [][]byte, n int) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.p.Invoke(ctx, evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}
