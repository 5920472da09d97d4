package conformance

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// TestSlidingExplain checks the alignment of Kafka's copied sliding windows
// on the history of seed 6 (sliding/drop), key a, as Kafka ran it: a@07:34,
// then b@08:03 (stream time 08:03, close time 07:53), then a@07:47, late for
// its own left window [07:17, 07:47], then a@08:00 and a@08:11. Kafka makes
// a@08:00's left window [07:30, 08:00] by copying a@07:34's left window,
// which never held a@07:47, and never makes a@07:47's right window.
func TestSlidingExplain(t *testing.T) {
	clock := func(s string) int64 {
		at, err := time.Parse(time.DateTime, base.Format(time.DateOnly)+" "+s)
		if err != nil {
			t.Fatal(err)
		}
		return at.UnixMilli()
	}
	h := &history{kind: kinds[slices.IndexFunc(kinds, func(k windowKind) bool { return k.name == "sliding" })], policy: "drop", seed: 6}
	for _, e := range []event{{"e0", "a", clock("10:07:34"), 90}, {"e1", "b", clock("10:08:03"), 1},
		{"e2", "a", clock("10:07:47"), 23}, {"e3", "a", clock("10:08:00"), -9}, {"e4", "a", clock("10:08:11"), 52}} {
		h.events = append(h.events, e)
		h.arrivals = append(h.arrivals, arrival{event: len(h.events) - 1})
	}
	h.invocations = []invocation{{first: 0, last: 4}}
	update := func(i int, key, start, end string, vs ...int64) kafkaUpdate {
		u := kafkaUpdate{I: i, Key: key, Start: clock(start), End: clock(end)}
		for _, v := range vs {
			u.Count++
			u.Sum += v
		}
		u.Min, u.Max = slices.Min(vs), slices.Max(vs)
		return u
	}
	want := kafkaResult{Dropped: []int{2}, Updates: []kafkaUpdate{
		update(0, "a", "10:07:04", "10:07:34", 90),
		update(1, "b", "10:07:33", "10:08:03", 1),
		update(2, "a", "10:07:34.001", "10:08:04.001", 23),
		update(3, "a", "10:07:34.001", "10:08:04.001", 23, -9),
		update(3, "a", "10:07:30", "10:08:00", 90, -9),
		update(4, "a", "10:08:00.001", "10:08:30.001", 52),
		update(4, "a", "10:07:41", "10:08:11", 23, -9, 52),
	}}
	final := func(vs ...float64) []aggregate.Output {
		r := agg.Result{Min: math.Inf(1), Max: math.Inf(-1)}
		for _, v := range vs {
			r.Count++
			r.Sum += v
			r.Min, r.Max = min(r.Min, v), max(r.Max, v)
		}
		return []aggregate.Output{{Kind: "final", Revision: 1, Result: r}}
	}
	left := kwin{key: "a", start: clock("10:07:30"), end: clock("10:08:00.001")}
	right := kwin{key: "a", start: clock("10:07:47.001"), end: clock("10:08:17.002")}
	kafkaLeft := value{count: 2, sum: 81, min: -9, max: 90}
	for _, tc := range []struct {
		name    string
		w       kwin
		kafka   value
		inKafka bool
		chain   []aggregate.Output
		want    string // in the explanation; "" when not explained
	}{
		{"Kafka's copy misses the late record", left, kafkaLeft, true, final(90, 23, -9), "misses record 2 (10:07:47.000)"},
		{"this project misses it too", left, kafkaLeft, true, final(90, -9), ""},
		{"Kafka differs by an on-time record", left, value{count: 2, sum: 113, min: 23, max: 90}, true, final(90, 23, -9), ""},
		{"Kafka never made the late record's right window", right, value{}, false, final(-9, 52), "never made the right window of record 2"},
		{"this project's right window has the wrong value", right, value{}, false, final(52), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSlidingReference(h, want)
			r.ends = []batchEnd{{read: len(h.arrivals), watermark: math.MaxInt64}}
			last := tc.chain[len(tc.chain)-1]
			view := valueRev{valueOf(last.Result), last.Revision, true}
			why, ok := r.explain(tc.w, tc.kafka, tc.inKafka, tc.chain, &view)
			switch {
			case tc.want == "" && ok:
				t.Errorf("explained (%s); want a mismatch", why)
			case tc.want != "" && !ok:
				t.Errorf("not explained; want %q", tc.want)
			case tc.want != "" && !strings.Contains(why, tc.want):
				t.Errorf("explained as %q; want %q in it", why, tc.want)
			}
		})
	}
}
