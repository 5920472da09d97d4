package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The Benthos stream counts every record of the window once per key.
func TestWindowedCount(t *testing.T) {
	evs := generate(1000, 20)
	r, err := runOnce(context.Background(), evs, time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.records != 1000 || r.cpu <= 0 || r.mallocs == 0 || r.peakHeap == 0 {
		t.Errorf("result %+v: want 1000 records with CPU time, allocations and a peak heap measured", r)
	}
}

// Records that reach system_window after their wall-clock window closed are
// dropped (and acknowledged); the check catches it instead of reporting a
// throughput for counts that are wrong.
func TestDroppedRecordsFailTheRun(t *testing.T) {
	_, err := runOnce(context.Background(), generate(200, 5), time.Millisecond, false)
	if err == nil || !strings.Contains(err.Error(), "raise -lead") {
		t.Fatalf("runOnce with a window that closes before the records arrive: err = %v, want the dropped-records error", err)
	}
}

func TestExpectedCounts(t *testing.T) {
	want := expectedCounts(generate(10000, 50))
	if len(want) != 50 {
		t.Fatalf("%d keys, want 50", len(want))
	}
	for k, n := range want {
		if n != 200 {
			t.Errorf("%s: %d records, want 200", k, n)
		}
	}
}

// BenchmarkWindowedCount: go test -run x -bench . -benchtime 3x
// (each iteration waits about -lead for the wall-clock window to close; the
// CPU-based figures are the ones to read).
func BenchmarkWindowedCount(b *testing.B) {
	evs := generate(10000, 50)
	b.ReportAllocs()
	var cpu time.Duration
	var mallocs uint64
	for range b.N {
		r, err := runOnce(context.Background(), evs, 2*time.Second, false)
		if err != nil {
			b.Fatal(err)
		}
		cpu += r.cpu
		mallocs += r.mallocs
	}
	records := float64(b.N * len(evs))
	b.ReportMetric(records/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(cpu.Nanoseconds())/records, "cpu-ns/record")
	b.ReportMetric(float64(mallocs)/records, "allocs/record")
}
