package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// benthosResult is the peer's records per CPU second over its runs.
type benthosResult struct {
	runs int
	rate stats
}

var benthosLine = regexp.MustCompile(`(?m)^BENCH throughput_benthos .*$`)

func field(line, name string) (float64, error) {
	m := regexp.MustCompile(`\b` + name + `=([0-9.]+)`).FindStringSubmatch(line)
	if m == nil {
		return 0, fmt.Errorf("benthos line has no %s: %s", name, line)
	}
	return strconv.ParseFloat(m[1], 64)
}

// runBenthos runs the Benthos peer (bench/benthos, its own module) on the
// records of event, runs times, and reads its median and range.
func runBenthos(event []byte, runs int) (*benthosResult, error) {
	root, err := standin.RepoRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "throughput-event-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(event); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "run", ".", "-events", f.Name(), "-runs", strconv.Itoa(runs))
	cmd.Dir = filepath.Join(root, "bench", "benthos")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("benthos peer: %w", err)
	}
	line := benthosLine.Find(out)
	if line == nil {
		return nil, fmt.Errorf("benthos peer printed no throughput line:\n%s", out)
	}
	r := &benthosResult{}
	n, err := field(string(line), "runs")
	if err != nil {
		return nil, err
	}
	r.runs = int(n)
	if r.rate.median, err = field(string(line), "records_per_s"); err != nil {
		return nil, err
	}
	if r.rate.min, err = field(string(line), "records_per_s_min"); err != nil {
		return nil, err
	}
	if r.rate.max, err = field(string(line), "records_per_s_max"); err != nil {
		return nil, err
	}
	return r, nil
}
