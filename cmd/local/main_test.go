package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The breakdown adds make's steps from the timings file to this process's
// own, and its total is measured from make's start.
// makeTimings is a checkout whose make started ago before this process and
// wrote lines to its timings file, as make local's recipes do; it returns
// the checkout's root and the timings directory. A line "<phase> <from> <to>"
// gives milliseconds after make started; the file gets them since the epoch.
func makeTimings(t *testing.T, ago time.Duration, lines string) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	makeStart := started.Add(-ago)
	id := strconv.FormatInt(makeStart.UnixNano(), 10)
	var file strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			from, _ := strconv.ParseInt(f[1], 10, 64)
			to, _ := strconv.ParseInt(f[2], 10, 64)
			line = fmt.Sprintf("%s %d %d", f[0], makeStart.UnixMilli()+from, makeStart.UnixMilli()+to)
		}
		file.WriteString(line + "\n")
	}
	lines = file.String()
	dir = filepath.Join(root, ".build", "timings")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(makeStartedEnv, id)
	return root, dir
}

func TestTimingsFromMake(t *testing.T) {
	root, dir := makeTimings(t, 90*time.Second, "installs 0 30000\nbuilds 30000 50000\nbuilds 50000 55000\nsynth 55000 80000\nbad line\nbuilds 9 x\n")
	tm := loadTimings(root)
	tm.add("demo", 40*time.Second)
	s := tm.String()
	for _, want := range []string{"since `make local` started", "installs 30s", "builds 25s", "synth 25s", "make 10s", "demo 40s"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if tm.total() < 90*time.Second {
		t.Errorf("total %s, want at least the 90s since make started", tm.total())
	}
	tm.done()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("timings files left: %v", entries)
	}
}

func TestTimingsWithoutMake(t *testing.T) {
	t.Setenv(makeStartedEnv, "")
	tm := loadTimings(t.TempDir())
	if s := tm.String(); !strings.Contains(s, "since this process started") || strings.Contains(s, "installs") {
		t.Errorf("%q", s)
	}
}

func TestCompactLogLines(t *testing.T) {
	tests := []struct {
		in, want string
		keep     bool
	}{
		{"START RequestId: 1 Version: $LATEST", "", false},
		{"END RequestId: 1", "", false},
		{"REPORT RequestId: abc\tDuration: 12.50 ms\tBilled Duration: 13 ms\tMemory Size: 128 MB\tMax Memory Used: 17 MB\t", "REPORT abc 12.50 ms, Max Memory Used: 17 MB", true},
		{`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn"},{"Name":"Late"},{"Name":"D"}]}]},"Function":"aggregate","RecordsIn":12,"Late":0,"D":[1,2]}`,
			"metrics: RecordsIn=12 D=2 values", true},
		{"a line of the function", "a line of the function", true},
	}
	for _, tc := range tests {
		got, keep := compact(tc.in)
		if got != tc.want || keep != tc.keep {
			t.Errorf("compact(%q) = %q %v, want %q %v", tc.in, got, keep, tc.want, tc.keep)
		}
	}
}

// TestTimingsThatOverlapSaySo: make local runs installs and builds at once,
// so its phases can add up to more than make took; the summary says so
// instead of showing a negative "make". Four installs that ran at once
// count once: a phase is the wall time any of its recipes ran.
func TestTimingsThatOverlapSaySo(t *testing.T) {
	root, _ := makeTimings(t, 60*time.Second, "installs 0 40000\ninstalls 0 30000\ninstalls 10000 35000\nbuilds 0 50000\nbuilds 1000 20000\nsynth 50000 55000\n")
	tm := loadTimings(root)
	defer tm.done()
	s := tm.String()
	if !strings.Contains(s, "installs 40s") || !strings.Contains(s, "builds 50s") || !strings.Contains(s, "· make 5s") ||
		!strings.Contains(s, "ran at the same time") {
		t.Errorf("%q: want installs 40s, builds 50s, make 5s (when no recipe ran), and that they ran at the same time", s)
	}
}
