package cloudwatchlocal

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// periodReader is a metricReader with one series that records the periods
// GetMetricData is asked for and answers each query with one value.
type periodReader struct {
	asked []cwtypes.MetricDataQuery
	start time.Time
	end   time.Time
}

func (r *periodReader) ListMetrics(context.Context, *cloudwatch.ListMetricsInput, ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error) {
	return &cloudwatch.ListMetricsOutput{Metrics: []cwtypes.Metric{{Namespace: aws.String("T"), MetricName: aws.String("Processed"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("Function"), Value: aws.String("aggregate")}}}}}, nil
}

func (r *periodReader) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	r.asked = append(r.asked, in.MetricDataQueries...)
	r.start, r.end = aws.ToTime(in.StartTime), aws.ToTime(in.EndTime)
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries {
		out.MetricDataResults = append(out.MetricDataResults, cwtypes.MetricDataResult{Id: q.Id, Values: []float64{3}})
	}
	return out, nil
}

// TestMetricsBetweenReadsOnePeriod: reading a run's metrics back asks for
// one period covering the run, whatever its length — the stand-in scans its
// data points once per period, so one-second periods over a run of minutes
// kept `make local` waiting until its -timeout and its metrics unprinted.
func TestMetricsBetweenReadsOnePeriod(t *testing.T) {
	from := time.Date(2026, 12, 2, 1, 0, 0, 400_000_000, time.UTC)
	for _, tc := range []struct {
		name string
		span time.Duration
	}{
		{"seconds", 20 * time.Second},
		{"a six-minute run", 6 * time.Minute},
		{"an hour", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &periodReader{}
			ms, err := metricsIn(context.Background(), r, "T", from, from.Add(tc.span))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.asked) != len(stats) {
				t.Fatalf("asked %d queries, want one per statistic (%d)", len(r.asked), len(stats))
			}
			for _, q := range r.asked {
				period := time.Duration(aws.ToInt32(q.MetricStat.Period)) * time.Second
				if periods := (r.end.Sub(r.start) + period - 1) / period; periods != 1 {
					t.Errorf("%s: period %s over [%s, %s) is %d periods, want 1", aws.ToString(q.Id), period, r.start.Format(time.TimeOnly), r.end.Format(time.TimeOnly), periods)
				}
			}
			if !r.start.Equal(from.Truncate(time.Second)) || r.end.Before(from.Add(tc.span)) {
				t.Errorf("read [%s, %s), want from %s to at least %s", r.start, r.end, from.Truncate(time.Second), from.Add(tc.span))
			}
			if len(ms) != 1 || ms[0].Sum != 3 || ms[0].SampleCount != 3 {
				t.Errorf("summaries %v, want the one series with its period's values", ms)
			}
		})
	}
}
