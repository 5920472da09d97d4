package results_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/results"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

func TestFormatNumber(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 42: "42", -7: "-7", 421.6666666: "421.667", 0.5: "0.5", 1.25: "1.25", 2.0004: "2",
		1e20: "1e+20", 0.0001234: "0.0001234", 123456789012: "123456789012",
	} {
		if got := results.FormatNumber(in); got != want {
			t.Errorf("FormatNumber(%v) = %q, want %q", in, got, want)
		}
	}
}

// A key that could forge fields or reach the terminal as a control
// sequence is quoted; a plain one is not.
func TestQuoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"user-1": "user-1", "ünïcode": "ünïcode", "": `""`, "a b": `"a b"`, "k=v": `"k=v"`,
		"\x1b[31mred": `"\x1b[31mred"`, "line\nbreak": `"line\nbreak"`, `q"`: `"q\""`,
		// A byte that is not UTF-8 is shown as the byte it is, not as the
		// U+FFFD a terminal draws for it (another key).
		"a\xffb": `"a\xffb"`,
	} {
		if got := results.QuoteKey(in); got != want {
			t.Errorf("QuoteKey(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestKind(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"p","key":"key","windows":[{"kind":"tumbling","size":"1m"},{"kind":"tumbling","size":"1h"},
	  {"kind":"session","gap":"30s"},{"kind":"hopping","size":"5m","advance":"1m"}],"partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want, err string }{
		{"tumbling:1h0m0s", "tumbling:1h0m0s", ""},
		{"session", "session:30s", ""},
		{"tumbling", "", "pipeline p has 2 tumbling windows, name one: tumbling:1m0s, tumbling:1h0m0s"},
		{"sliding", "", "pipeline p has no such window; its windows: tumbling:1m0s, tumbling:1h0m0s, session:30s, hopping:5m0s:1m0s"},
		// A duration written as the pipeline file writes it, or otherwise
		// (60s is 1m0s), names the same window.
		{"tumbling:1m", "tumbling:1m0s", ""},
		{"tumbling:60s", "tumbling:1m0s", ""},
		{"tumbling:60m", "tumbling:1h0m0s", ""},
		{"hopping:5m:1m", "hopping:5m0s:1m0s", ""},
		{"hopping:300s:60s", "hopping:5m0s:1m0s", ""},
		{"tumbling:2m", "", "pipeline p has no such window; its windows: tumbling:1m0s"},
		{"tumbling:1x", "", `"tumbling:1x": pipeline p has no such window`},
		{"hopping:1m:5m", "", "has no such window"},
	} {
		got, err := results.Kind(cfg, c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Kind(%q) = %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestFormatOutput(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 1, 500e6, time.UTC)
	r := agg.Result{Aggregates: agg.Count | agg.Mean | agg.Quantiles | agg.Distinct, Count: 3, Mean: 421.6666666,
		Quantiles: map[string]float64{"p99.9": 900, "p50": 400, "p9": 100}, Distinct: 2}
	prev := agg.Result{Aggregates: agg.Count, Count: 2}
	for _, c := range []struct {
		o    aggregate.Output
		want string
	}{
		{aggregate.Output{Kind: "final", Key: "a b", Window: "session:30s", Start: start, End: start.Add(30 * time.Second), Revision: 1, Result: r},
			`final       key="a b" session:30s 2026-11-29T10:00:01.5Z..2026-11-29T10:00:31.5Z rev=1 count=3 mean=421.667 p9=100 p50=400 p99.9=900 distinct=2`},
		{aggregate.Output{Kind: "retraction", Key: "k", Window: "session:30s", Start: start, End: start.Add(time.Second), Revision: 2, Previous: &prev},
			`retraction  key=k session:30s 2026-11-29T10:00:01.5Z..2026-11-29T10:00:02.5Z rev=2 was: count=2`},
		// A record on the stream is written by whoever may put there: its
		// type, window and quantile names are quoted as the key is, so none
		// can forge a field or reach the terminal as a control sequence.
		{aggregate.Output{Kind: "\x1b[2Jfinal", Key: "k", Window: "session:30s\nfinal", Start: start, End: start.Add(time.Second), Revision: 1,
			Result: agg.Result{Aggregates: agg.Quantiles, Quantiles: map[string]float64{"p50\x1b]0;x\x07": 1}}},
			`"\x1b[2Jfinal"  key=k "session:30s\nfinal" 2026-11-29T10:00:01.5Z..2026-11-29T10:00:02.5Z rev=1 "p50\x1b]0;x\a"=1`},
	} {
		if got := results.FormatOutput(c.o); got != c.want {
			t.Errorf("FormatOutput:\n got  %s\n want %s", got, c.want)
		}
	}
}

// An open window shows "-" for its revision, and values a window without
// records cannot have are "-".
func TestWriteTableEmptyValues(t *testing.T) {
	spec, err := agg.NewSpec([]string{"count", "min", "quantiles"}, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	w := window.Window{Start: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)}
	var b strings.Builder
	if err := results.WriteTable(&b, spec, []state.View{{Kind: "tumbling:1m0s", Window: w, Result: agg.Result{Aggregates: spec.Aggregates}}}); err != nil {
		t.Fatal(err)
	}
	want := "tumbling:1m0s  (1 window)\n" +
		"START                 END                   STATUS  REV  COUNT  MIN  P50\n" +
		"2026-11-29T10:00:00Z  2026-11-29T10:01:00Z  open    -    0      -    -\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
