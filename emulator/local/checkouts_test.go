package local

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

func TestCheckoutsGenerate(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 20, 0, time.UTC)
	c := Checkouts{Regions: []string{"eu-west", "us-east"}, Minutes: 3, Max: 4, Seed: 5, Now: now}
	evs, want := c.Generate()
	if len(want) != 6 || want.Count() != len(evs) {
		t.Fatalf("%d windows holding %d events for %d events sent", len(want), want.Count(), len(evs))
	}
	again, _ := c.Generate()
	if len(again) != len(evs) || again[0].ID != evs[0].ID {
		t.Error("the same seed gave other events")
	}
	// What the checkouts pipeline extracts: key and data.amount.
	cfg, err := pipeline.Parse([]byte(`{"name":"checkouts","eventTypes":["checkout"],"key":"key","value":"data.amount","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum","max"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := Expected{}
	for i, e := range evs {
		if i > 0 && e.OccurredAt.Before(evs[i-1].OccurredAt) {
			t.Fatalf("event %d at %s before event %d at %s: a drop pipeline would lose it", i, e.OccurredAt, i-1, evs[i-1].OccurredAt)
		}
		if e.Type != "checkout" || (e.Key != "eu-west" && e.Key != "us-east") {
			t.Fatalf("event %+v", e)
		}
		key, v, _, err := cfg.Extract(&e)
		if err != nil {
			t.Fatal(err)
		}
		start := e.OccurredAt.Truncate(time.Minute)
		if s := e.OccurredAt.Sub(start); s < 15*time.Second || s > 45*time.Second {
			t.Errorf("event at %s is %s into its minute: network delay could move it", e.OccurredAt, s)
		}
		k := WindowKey{key, start.Format(time.RFC3339)}
		g := got[k]
		g.Count++
		g.Sum += v
		g.Max = max(g.Max, v)
		got[k] = g
	}
	if differs(want, got) {
		t.Errorf("Generate's expectation %v, the events add up to %v", want, got)
	}
}

func TestPrintTotalsFlagsEveryDifference(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"checkouts","value":"data.amount","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum","mean","max","quantiles"],"quantiles":[0.5,0.95]}`))
	if err != nil {
		t.Fatal(err)
	}
	w := &Windows{Pipeline: cfg}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	view := func(key string, m int, count uint64, sum, mx float64) state.View {
		start := t0.Add(time.Duration(m) * time.Minute)
		return state.View{Key: key, Window: window.Window{Start: start, End: start.Add(time.Minute)}, Final: true, Revision: 1,
			Result: agg.Result{Count: count, Sum: sum, Max: mx, Mean: sum / float64(count), Quantiles: map[string]float64{"p50": mx, "p95": mx}}}
	}
	k := func(key string, m int) WindowKey {
		return WindowKey{key, t0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339)}
	}
	want := Expected{k("eu-west", 0): {2, 300, 200}, k("eu-west", 1): {1, 50, 50}, k("us-east", 0): {1, 70, 70}}

	var out bytes.Buffer
	if bad := PrintTotals(&out, w, want, []state.View{view("eu-west", 0, 2, 300, 200), view("eu-west", 1, 1, 50, 50), view("us-east", 0, 1, 70, 70)}); bad != 0 {
		t.Errorf("%d mismatches for windows equal to what was sent:\n%s", bad, out.String())
	}
	for _, h := range []string{"SENT SUM", "SENT MAX", "p50", "p95", "total"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("table lacks %q:\n%s", h, out.String())
		}
	}
	out.Reset()
	// A sum off by one cent, and a window missing.
	if bad := PrintTotals(&out, w, want, []state.View{view("eu-west", 0, 2, 301, 200), view("eu-west", 1, 1, 50, 50)}); bad != 2 || strings.Count(out.String(), "MISMATCH") != 2 || !strings.Contains(out.String(), "missing") {
		t.Errorf("%d mismatches, want 2 (a sum, a missing window):\n%s", bad, out.String())
	}
}

// A pipeline file a user adds gets sample traffic made from its config,
// and the windows it must end with.
func TestSampleFromAnyPipeline(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"signups","eventTypes":["signup","signup_v2"],"key":"data.plan.tier","value":"data.order.seats",
		"windows":[{"kind":"tumbling","size":"2m","offset":"30s"}],"aggregates":["count","max"],"latePolicy":"drop"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := Checkable(cfg, []string{"page_view", "checkout"}); !ok {
		t.Fatal(why)
	}
	now := time.Date(2026, 12, 1, 10, 30, 20, 0, time.UTC)
	evs, want, first := Sample{Pipeline: cfg, Keys: 2, Windows: 3, Max: 5, Seed: 3, Now: now}.Generate()
	if len(want) != 6 || want.Count() != len(evs) {
		t.Fatalf("%d windows holding %d events, %d events", len(want), want.Count(), len(evs))
	}
	if !first.Equal(time.Date(2026, 12, 1, 10, 22, 30, 0, time.UTC)) {
		t.Errorf("first window starts %s, want 10:22:30 (2m windows offset by 30s, the last 3 ended by 10:30:20)", first)
	}
	got := Expected{}
	for i, e := range evs {
		if i > 0 && e.OccurredAt.Before(evs[i-1].OccurredAt) {
			t.Fatalf("event %d before event %d", i, i-1)
		}
		if !cfg.Matches(e.Type) {
			t.Fatalf("event type %q", e.Type)
		}
		key, v, _, err := cfg.Extract(&e)
		if err != nil {
			t.Fatalf("the pipeline cannot read the sample event %s: %v", e.Data, err)
		}
		start := cfg.Windows[0].Tumbling().AppendWindows(nil, e.OccurredAt)[0].Start
		if !e.OccurredAt.Before(now) {
			t.Errorf("event at %s is not in the past", e.OccurredAt)
		}
		k := WindowKey{key, start.Format(time.RFC3339)}
		g := got[k]
		g.Count++
		g.Max = max(g.Max, v) // sum is not an aggregate of this pipeline
		got[k] = g
	}
	if differs(want, got) {
		t.Errorf("Generate's expectation %v, the events give %v", want, got)
	}

	for doc, why := range map[string]string{
		`{"name":"all","windows":[{"kind":"tumbling","size":"1m"}]}`:                                                            "reads every event type",
		`{"name":"pv","eventTypes":["page_view"],"windows":[{"kind":"tumbling","size":"1m"}]}`:                                  "the demo sends events of its types",
		`{"name":"s","eventTypes":["x"],"windows":[{"kind":"session","gap":"1m"}]}`:                                             "its first window is session",
		`{"name":"d","eventTypes":["x"],"distinct":"id","aggregates":["distinct"],"windows":[{"kind":"tumbling","size":"1m"}]}`: "none of count, sum and max",
	} {
		c, err := pipeline.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if ok, got := Checkable(c, []string{"page_view"}); ok || !strings.Contains(got, why) {
			t.Errorf("%s: Checkable = %v %q, want false and %q", doc, ok, got, why)
		}
	}
}
