package main

import (
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
)

func TestRunMetricsFailsWhenTheSectionWouldBeEmpty(t *testing.T) {
	series := func(fn, pipeline string) cloudwatchlocal.MetricSummary {
		d := map[string]string{"Function": fn}
		if pipeline != "" {
			d["Pipeline"] = pipeline
		}
		return cloudwatchlocal.MetricSummary{Namespace: "Tributary", Name: "RecordsApplied", Dimensions: d, Sum: 1, SampleCount: 1}
	}
	cases := []struct {
		name  string
		ms    []cloudwatchlocal.MetricSummary
		shown int
		err   string // part of the error; "" for none
	}{
		{name: "no series at all", err: "holds 0 series"},
		{name: "only other functions' series", ms: []cloudwatchlocal.MetricSummary{series("ingest", ""), series("ticker", "")}, err: `functions: "ingest", "ticker"`},
		{name: "aggregate, worker and enrich", ms: []cloudwatchlocal.MetricSummary{series("aggregate", ""), series("worker", ""), series("enrich", ""), series("ingest", "")}, shown: 3},
		{name: "aggregate by pipeline", ms: []cloudwatchlocal.MetricSummary{series("aggregate", "pageviews"), series("aggregate", "checkouts"), series("ticker", "pageviews")}, shown: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shown, err := runMetrics(c.ms)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("runMetrics: %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil || len(shown) != c.shown {
				t.Fatalf("runMetrics: %d series, %v; want %d and no error", len(shown), err, c.shown)
			}
		})
	}
}

// TestSeriesCount: the line under the metrics section counts every series
// the run published, of every function, which is what CloudWatch bills
// (docs/cost.md quotes it), by function, most first.
func TestSeriesCount(t *testing.T) {
	s := func(fn, name string) cloudwatchlocal.MetricSummary {
		return cloudwatchlocal.MetricSummary{Namespace: "Tributary", Name: name, Dimensions: map[string]string{"Function": fn}, Sum: 1, SampleCount: 1}
	}
	got := seriesCount([]cloudwatchlocal.MetricSummary{s("archive", "RecordsArchived"), s("archive", "ObjectsWritten"), s("aggregate", "RecordsIn"), s("ingest", "Events")})
	want := "4 metric series in all (archive 2, aggregate 1, ingest 1)"
	if !strings.Contains(got, want) {
		t.Errorf("seriesCount = %q, want it to say %q", got, want)
	}
}
