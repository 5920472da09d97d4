package main

import (
	"bytes"
	"context"
	"github.com/tributary-dev/tributary/internal/testtools"
	"regexp"
	"strconv"
	"testing"
)

// The whole driver on a small shard: both modes enrich every activity event
// (run fails otherwise), the warm instance reads in one round trip per
// batch and far fewer items than the cold peer, which re-reads every key of
// every batch.
func TestDriver(t *testing.T) {
	testtools.Need(t, "the stand-in cannot be installed without it", "python3")
	var out, log bytes.Buffer
	if err := run(context.Background(), config{events: 400, keys: 20, batch: 50, verbose: true}, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	items := map[string]float64{}
	for _, m := range regexp.MustCompile(`BENCH enrich mode=(\w+) .*items_read_per_1k=([0-9.]+) read_round_trips_per_batch=([0-9.]+)`).FindAllStringSubmatch(out.String(), -1) {
		items[m[1]], _ = strconv.ParseFloat(m[2], 64)
		if m[3] != "1.00" {
			t.Errorf("mode %s: %s read round trips per batch, want 1.00", m[1], m[3])
		}
	}
	if len(items) != 2 || !regexp.MustCompile(`BENCH enrich_ratio cold_per_warm_read_requests=`).MatchString(out.String()) {
		t.Fatalf("output lacks the warm, cold and ratio lines:\n%s", out.String())
	}
	if items["cold"] < 3*items["warm"] {
		t.Errorf("items read per 1k: cold %.1f, warm %.1f; the warm cache should read far fewer", items["cold"], items["warm"])
	}
}
