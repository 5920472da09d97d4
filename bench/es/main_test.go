package main

import (
	"bytes"
	"context"
	"github.com/tributary-dev/tributary/internal/testtools"
	"regexp"
	"strconv"
	"testing"
)

// The whole driver, small: every command is answered 200 or 422 and every
// event is projected (run fails otherwise); a command costs at least the
// three requests of its design (the snapshot, the tail, the transaction)
// and not many more; the lags are measured.
func TestDriver(t *testing.T) {
	testtools.Need(t, "the stand-in cannot be installed without it", "python3")
	var out, log bytes.Buffer
	if err := run(context.Background(), config{commands: 40, clients: 2, shows: 8, lagCommands: 20, rate: 10, verbose: true}, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	m := regexp.MustCompile(`BENCH es commands_per_s=([0-9.]+) requests_per_command=([0-9.]+) projection_lag_ms_p50=([0-9]+) projection_lag_ms_p99=([0-9]+)\n`).FindStringSubmatch(out.String())
	if m == nil || !regexp.MustCompile(`BENCH es_detail commands=40 `).MatchString(out.String()) {
		t.Fatalf("output lacks the BENCH lines:\n%s", out.String())
	}
	rpc, _ := strconv.ParseFloat(m[2], 64)
	p50, _ := strconv.Atoi(m[3])
	p99, _ := strconv.Atoi(m[4])
	if rpc < 3 || rpc > 6 {
		t.Errorf("%.2f requests per command, want 3 (snapshot, tail, transaction) plus the retries of lost appends", rpc)
	}
	if p50 <= 0 || p99 < p50 {
		t.Errorf("lag p50 %d ms, p99 %d ms", p50, p99)
	}
}
