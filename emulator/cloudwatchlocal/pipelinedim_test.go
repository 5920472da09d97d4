package cloudwatchlocal

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	emf "github.com/tributary-dev/tributary/pkg/metrics"
)

// Two aggregate functions, one per pipeline, write pkg/metrics documents
// with the dimension set ["Function","Pipeline"]: the stand-in gets one
// series per pipeline (what the stack's alarms and dashboards read) and
// no function-wide rollup, which CloudWatch would bill as a metric more.
func TestPipelineDimensionGivesASeriesPerPipeline(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // reads are to the second
	began := time.Now()
	s, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for pipeline, batches := range map[string][]float64{"pageviews": {40, 60}, "checkouts": {7}} {
		for _, n := range batches {
			var buf bytes.Buffer
			m := emf.New(&buf, "aggregate", emf.WithDimension("Pipeline", pipeline))
			m.Add("RecordsIn", emf.Count, n)
			if err := m.Flush(); err != nil {
				t.Fatal(err)
			}
			// Its own namespace, so no other test's series mix in.
			s.Line("Tributary-Aggregate"+pipeline, strings.Replace(buf.String(), `"Namespace":"Tributary"`, `"Namespace":"PipelineDimTest"`, 1))
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ms, err := MetricsBetween(ctx, cfg, "PipelineDimTest", began, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"RecordsIn{Function=aggregate,Pipeline=pageviews}": 100,
		"RecordsIn{Function=aggregate,Pipeline=checkouts}": 7,
	}
	got := map[string]float64{}
	for _, m := range ms {
		str := m.String()
		got[str[:strings.Index(str, " ")]] = m.Sum
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: sum %g, want %g (all series: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want exactly %v", got, want)
	}
}
