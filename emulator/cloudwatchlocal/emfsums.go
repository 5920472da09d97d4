package cloudwatchlocal

import (
	"io"
	"math"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// EMFSums sums, per metric name and dimension set, the metric data that
// the Embedded Metric Format documents among log events give in one
// namespace, as CloudWatch Logs extracts them (the rules the sink follows
// when it publishes them). It is make logs' metrics summary of the events
// it has read, with no further request: asking CloudWatch instead took
// moto minutes (its GetMetricData scans every data point once per query,
// and a summary asks four queries per series), and summed every stack's
// functions on the stand-in.
type EMFSums struct {
	namespace string
	series    map[string]*MetricSummary
}

// NewEMFSums sums the metrics of namespace.
func NewEMFSums(namespace string) *EMFSums {
	return &EMFSums{namespace: namespace, series: map[string]*MetricSummary{}}
}

// Add adds the metric data of the EMF documents among events. Other lines,
// and documents CloudWatch would give no metrics for (EMFError's), add
// nothing.
func (s *EMFSums) Add(events []LogEvent) {
	for _, e := range events {
		if !isEMF(e.Message) {
			continue
		}
		batch, err := parseEMF(e.Message)
		if err != nil {
			continue
		}
		for _, d := range batch[s.namespace] {
			s.add(d)
		}
	}
}

func (s *EMFSums) add(d cwtypes.MetricDatum) {
	k := seriesKey(cwtypes.Metric{MetricName: d.MetricName, Dimensions: d.Dimensions})
	m := s.series[k]
	if m == nil {
		m = &MetricSummary{Namespace: s.namespace, Name: aws.ToString(d.MetricName), Dimensions: map[string]string{}, Min: math.Inf(1), Max: math.Inf(-1)}
		for _, dim := range d.Dimensions {
			m.Dimensions[aws.ToString(dim.Name)] = aws.ToString(dim.Value)
		}
		s.series[k] = m
	}
	values, counts := []float64{aws.ToFloat64(d.Value)}, []float64{1}
	if d.Value == nil {
		values, counts = d.Values, d.Counts
	}
	for i, v := range values {
		c := 1.0
		if i < len(counts) {
			c = counts[i]
		}
		m.Sum += v * c
		m.SampleCount += c
		m.Min, m.Max = math.Min(m.Min, v), math.Max(m.Max, v)
	}
}

// Summaries are the sums so far, sorted by name and dimensions.
func (s *EMFSums) Summaries() []MetricSummary {
	out := make([]MetricSummary, 0, len(s.series))
	for _, m := range s.series {
		out = append(out, *m)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Name != out[b].Name {
			return out[a].Name < out[b].Name
		}
		return out[a].String() < out[b].String()
	})
	return out
}

// WriteEvents writes events as Tail does: one per line, "<RFC3339 time>
// <log stream> <message>".
func WriteEvents(w io.Writer, events []LogEvent) error { return writeEvents(w, events) }
