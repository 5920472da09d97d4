package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// A short run of every path prints one BENCH throughput line per path with
// every field, after checking that the views counted each record once.
func TestRunPrintsEveryPath(t *testing.T) {
	cfg, err := loadPipeline("bench")
	if err != nil {
		t.Fatal(err)
	}
	out := capture(t, func() error {
		return runPipeline(options{keys: 7, runs: 2}, cfg, []int{30}, "throughput", 60, false)
	})
	for _, path := range paths {
		line := lineOf(out, "BENCH throughput path="+path+" ")
		if line == "" {
			t.Fatalf("no BENCH throughput line for %s in:\n%s", path, out)
		}
		for _, f := range []string{"batch=30 ", "payload_mb=", "records_per_s=", "cpu_ms=", "allocs_per_record=", "floor_ratio=", "benthos_ratio_median=n/a", "store_requests=", "store_cpu_ms=", "store_allocs_per_record="} {
			if !strings.Contains(line, f) {
				t.Errorf("%s line lacks %q: %s", path, f, line)
			}
		}
		// The store's work is kept apart from the handler's: the paths
		// that write, and a carried invocation, which writes nothing but
		// reads the shard's stored watermark before it judges its records.
		counted := !strings.Contains(line, "store_requests=0.0 ") && !strings.Contains(line, "store_allocs_per_record=0.00")
		if path != pathFirst && !counted {
			t.Errorf("%s line: store work not counted: %s", path, line)
		}
		// The SDK's work per request is charged to each path, and lowers
		// its rate.
		sdk := lineOf(out, "BENCH throughput_sdk path="+path+" ")
		if sdk == "" {
			t.Fatalf("no BENCH throughput_sdk line for %s in:\n%s", path, out)
		}
		charged := !strings.Contains(sdk, "sdk_ms=0.00 ")
		if path != pathFirst && !charged {
			t.Errorf("%s: SDK not charged: %s", path, sdk)
		}
	}
	if !strings.Contains(out, "BENCH throughput_sdk_cost batch=30 us_per_request=") || !strings.Contains(out, "UpdateItem:") {
		t.Errorf("no SDK cost per operation with UpdateItem in:\n%s", out)
	}
}

// The deployed pipeline runs through the same paths, session windows and
// quantiles included.
func TestDeployedPipelineRuns(t *testing.T) {
	cfg, err := loadPipeline("deployed")
	if err != nil {
		t.Fatal(err)
	}
	out := capture(t, func() error {
		return runPipeline(options{keys: 5, runs: 1}, cfg, []int{25}, "throughput_deployed", 25, false)
	})
	if n := strings.Count(out, "BENCH throughput_deployed path="); n != len(paths) {
		t.Fatalf("%d lines, want %d:\n%s", n, len(paths), out)
	}
}

// lineOf is out's last line that starts with prefix ("" if none).
func lineOf(out, prefix string) string {
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			line = l
		}
	}
	return line
}

func capture(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	runErr := fn()
	os.Stdout = old
	w.Close()
	<-done
	if runErr != nil {
		t.Fatalf("%v\n%s", runErr, buf.String())
	}
	return buf.String()
}
