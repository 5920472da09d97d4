package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/tributary-dev/tributary/internal/testtools"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGenerate(t *testing.T) {
	tests := []struct{ n, keys int }{{1000, 50}, {10000, 50}, {7, 3}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d events over %d keys", tt.n, tt.keys), func(t *testing.T) {
			evs := generate(tt.n, tt.keys, workloadWindow)
			if len(evs) != tt.n {
				t.Fatalf("len = %d, want %d", len(evs), tt.n)
			}
			ids := map[string]bool{}
			skewed := 0
			for i := range evs {
				e := &evs[i]
				if err := e.Validate(); err != nil {
					t.Fatalf("record %s: %v", e.ID, err)
				}
				ids[e.ID] = true
				if got := e.EventTime().Truncate(time.Minute); !got.Equal(workloadWindow) {
					t.Fatalf("record %s: event time %s is outside the window starting %s", e.ID, e.EventTime(), workloadWindow)
				}
				if !e.OccurredAt.Equal(e.EventTime()) {
					skewed++
				}
			}
			if len(ids) != tt.n {
				t.Errorf("%d distinct ids, want %d", len(ids), tt.n)
			}
			if skewed == 0 {
				t.Error("no event's occurredAt differs from its event time: the clock correction is not exercised")
			}
			want := expectedCounts(evs)
			if len(want) != tt.keys {
				t.Errorf("%d (key, window) counts, want one per key: %d", len(want), tt.keys)
			}
			sum := 0
			for _, n := range want {
				sum += n
			}
			if sum != tt.n {
				t.Errorf("counts add up to %d, want %d", sum, tt.n)
			}
			again := generate(tt.n, tt.keys, workloadWindow)
			if again[len(again)-1].OccurredAt != evs[len(evs)-1].OccurredAt {
				t.Error("generate is not deterministic")
			}
		})
	}
}

func TestExpectedCountsCountsEachIDOnce(t *testing.T) {
	evs := generate(10, 2, workloadWindow)
	evs = append(evs, evs[0], evs[3])
	want := expectedCounts(generate(10, 2, workloadWindow))
	if err := sameCounts("with duplicates", expectedCounts(evs), want); err != nil {
		t.Fatal(err)
	}
}

func TestWithDuplicates(t *testing.T) {
	evs := generate(200, 5, workloadWindow)
	got := withDuplicates(evs, 5)
	if len(got) != 210 {
		t.Fatalf("%d records, want 200 + 10 copies", len(got))
	}
	if err := sameCounts("distinct", expectedCounts(got), expectedCounts(evs)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range got {
		if j, ok := seen[got[i].ID]; ok {
			if !got[i].ReceivedAt.After(got[j].ReceivedAt) || got[i].SentAt != got[j].SentAt || string(got[i].Data) != string(got[j].Data) {
				t.Fatalf("copy of %s: not the same bytes arriving later", got[i].ID)
			}
			continue
		}
		seen[got[i].ID] = i
	}
}

// The whole driver on a small workload: the Powertools peer really runs
// against the counting stand-in, its counts are checked, and it makes one
// idempotency put, one aggregate update and one idempotency update per event
// (and one failed put per copy). Tributary's two paths run on the same
// events, with and without suppression by event id, windows closed by the
// ticker: per interval, one write per (key, window) and per key's ledger,
// plus the finalization and the watermarks.
func TestDriverMeasuresPowertools(t *testing.T) {
	testtools.Need(t, "the Powertools peer needs Node 20+ and the stand-in needs Python 3", "node", "python3")
	var out, log bytes.Buffer
	cfg := config{events: []int{60}, batches: []int{25}, dupPcts: []int{0, 10}, keys: 6, paths: []string{"per-batch", "per-interval"}, verbose: true}
	if err := run(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Per duplicate share: Powertools, then 2 paths × 2 settings, plus a
	// cost line per path at 0 %.
	if len(lines) != 2*(1+4)+2 {
		t.Fatalf("printed %d lines, want 12:\n%s", len(lines), out.String())
	}
	field := func(line, name string) int {
		m := regexp.MustCompile(` ` + name + `=(\d+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q has no %s", line, name)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "BENCH powertools") && strings.Contains(l, "dup_pct=0 "):
			// 3 writes of small items per event.
			if w, u := field(l, "writes"), field(l, "wcu"); w != 180 || u != 180 {
				t.Errorf("powertools writes %d, wcu %d; want 180 and 180: %s", w, u, l)
			}
		case strings.HasPrefix(l, "BENCH powertools"):
			// 6 copies: each a failed conditional put.
			if w := field(l, "writes"); w != 186 {
				t.Errorf("powertools with copies: writes %d, want 186: %s", w, l)
			}
		case strings.HasPrefix(l, "BENCH dedupe path=per-interval") && strings.Contains(l, "suppression=on"):
			// The shard's hold while the interval carries partials and
			// its clearing at the flush, the shard's carry (the 6
			// windows stay open: keys on one shard; the 6 keys fall in 6
			// of its 8 chunks, chunk 0 among them: 6 chunks stored), 6
			// ledger heads, 1 watermark at the flush, then the ticks:
			// each of the 6 chunks stored with its window as closing, the
			// 6 windows created final and published (not listed, no
			// unlist), each chunk stored without its window, and the
			// watermark saved by each of the 2 ticks (the pipeline's dedupe
			// layout marker is written before the run, as steady state).
			if w := field(l, "writes"); w != 2+6+6+1+6+6+6+2 {
				t.Errorf("per-interval writes = %d, want 35: %s", w, l)
			}
		case strings.HasPrefix(l, "BENCH dedupe path=per-interval"):
			if w := field(l, "writes"); w != 2+6+1+6+6+6+2 {
				t.Errorf("per-interval without suppression: writes = %d, want 29: %s", w, l)
			}
		case strings.HasPrefix(l, "BENCH dedupe"), strings.HasPrefix(l, "BENCH cost"):
			if w := field(l, "writes"); w >= 180/2 {
				t.Errorf("writes = %d, want well under Powertools' 180: %s", w, l)
			}
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
}
