package main

import (
	"bytes"
	"context"
	"github.com/tributary-dev/tributary/internal/testtools"
	"regexp"
	"strconv"
	"testing"
)

// The whole driver, small: every CEP line (run fails if the index and the
// naive evaluation find different matches) and the join's write counts,
// with suppression of copies costing writes on top of the state's.
func TestDriver(t *testing.T) {
	testtools.Need(t, "the stand-in cannot be installed without it", "python3")
	var out, log bytes.Buffer
	cfg := config{events: 2000, joinEvents: 200, rules: []int{10, 100}, verbose: true}
	if err := run(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	cepLines := regexp.MustCompile(`BENCH cep rules=(\d+) events_per_s=(\d+) naive_events_per_s=(\d+) ratio=([0-9.]+)`).FindAllStringSubmatch(out.String(), -1)
	if len(cepLines) != 2 {
		t.Fatalf("want 2 cep lines:\n%s", out.String())
	}
	for _, l := range cepLines {
		if n, _ := strconv.Atoi(l[2]); n <= 0 {
			t.Errorf("rules=%s: events_per_s %s", l[1], l[2])
		}
	}
	join := regexp.MustCompile(`BENCH join writes_per_1k=(\d+) wcu_per_1k=(\d+)\n`).FindStringSubmatch(out.String())
	off := regexp.MustCompile(`BENCH join dedupe=off writes_per_1k=(\d+) wcu_per_1k=(\d+)\n`).FindStringSubmatch(out.String())
	if join == nil || off == nil {
		t.Fatalf("want the join lines:\n%s", out.String())
	}
	on, _ := strconv.Atoi(join[1])
	without, _ := strconv.Atoi(off[1])
	if without < 500 || on <= without {
		t.Errorf("join writes per 1k: %d with the ledger, %d without; want at least one per event-key-batch and the ledger's on top", on, without)
	}
}
