package aggregate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// On the per-interval path the records of a key that go to the same
// hopping windows (a pane) share one partial in the window state, not one
// per window: Lambda carries at most 1 MB of it and ends the interval early
// past that, so a 5m/1m pipeline holds five times the keys it held. The
// flush still writes each window with exactly its records.
func TestIntervalStateHoldsOnePartialPerPane(t *testing.T) {
	p, out := pipelineOn(t, `{"name":"panes","key":"key","value":"data.v","windows":[{"kind":"hopping","size":"5m","advance":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","latePolicy":"drop"}`, inProcessViews)
	r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	const keys = 20
	var recs []at
	for i := range keys {
		key := fmt.Sprintf("k%02d", i)
		recs = append(recs, at{key, 10, 1}, at{key, 40, 2}) // one pane: the minute from 10:00
	}
	r.carry(recs...)
	// 20 keys of one pane, each partial standing for 5 windows, take a few
	// dozen bytes a key: the first format took some 250 (a window id, two
	// sequence numbers and the key, per partial).
	if perKey := limits.WindowStateSize(r.state) / keys; perKey > 40 {
		t.Errorf("the window state takes %d bytes a key for %d keys in one pane, want at most 40: %v", perKey, keys, r.state)
	}
	r.carry(at{"k00", 70, 4}) // the next pane: a partial of its own
	r.flush()
	r.carry(at{"zz", 1000, 0}) // the watermark passes every window above
	r.flush()
	want := "final [-4m0s,1m0s) r1 count 2 sum 3\nfinal [-3m0s,2m0s) r1 count 3 sum 7\nfinal [-2m0s,3m0s) r1 count 3 sum 7\n" +
		"final [-1m0s,4m0s) r1 count 3 sum 7\nfinal [0s,5m0s) r1 count 3 sum 7\nfinal [1m0s,6m0s) r1 count 1 sum 4"
	if got := strings.Join(out.of("k00", r.base), "\n"); got != want {
		t.Errorf("results of key k00:\n%s\nwant:\n%s", got, want)
	}
}
