package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
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

// The whole driver on a small workload: the Powertools peer really runs
// against the counting stand-in, its counts are checked, and it makes one
// idempotency put, one aggregate update and one idempotency update per event.
// Tributary's two paths run on the same events: per interval, one write per
// (key, window) plus the shard's watermark; per batch, fewer than Powertools.
func TestDriverMeasuresPowertools(t *testing.T) {
	for _, tool := range []string{"node", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Powertools peer needs Node 20+ and the stand-in needs Python 3", tool)
		}
	}
	var out, log bytes.Buffer
	cfg := config{events: []int{60}, batches: []int{25}, keys: 6, modes: "per-batch,per-interval", verbose: true}
	if err := run(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("printed %q, want 5 BENCH lines (Powertools, and Tributary and ratio per mode)", out.String())
	}
	writes := func(line string) int {
		m := regexp.MustCompile(` write_requests=(\d+) `).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q has no write_requests", line)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "BENCH cost_tributary") && strings.Contains(l, "mode=per-interval"):
			// 6 keys in one minute: 6 window writes and 1 watermark write.
			if w := writes(l); w != 7 {
				t.Errorf("per-interval write_requests = %d, want 7: %s", w, l)
			}
		case strings.HasPrefix(l, "BENCH cost_tributary"):
			if w := writes(l); w >= 180/3 {
				t.Errorf("per-batch write_requests = %d, want well under Powertools' 180: %s", w, l)
			}
		case !strings.HasPrefix(l, "BENCH cost_ratio"):
			t.Errorf("unexpected line %q", l)
		}
	}
	m := regexp.MustCompile(`^BENCH cost_powertools events=60 batch=25 write_requests=(\d+) wcu=(\d+) write_requests_per_1k=3000\.0 `).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("line %q: want cost_powertools for 60 events, batch 25, 3 writes per event", lines[0])
	}
	if reqs, _ := strconv.Atoi(m[1]); reqs != 180 {
		t.Errorf("write_requests = %d, want 180", reqs)
	}
	// Every item is under 1 KB: one unit per write.
	if wcu, _ := strconv.Atoi(m[2]); wcu != 180 {
		t.Errorf("wcu = %d, want 180", wcu)
	}
}
