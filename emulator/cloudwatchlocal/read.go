package cloudwatchlocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

// logFilterer is what Tail needs of CloudWatch Logs.
type logFilterer interface {
	FilterLogEvents(ctx context.Context, in *cloudwatchlogs.FilterLogEventsInput, opts ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.FilterLogEventsOutput, error)
}

// metricReader is what Metrics needs of CloudWatch.
type metricReader interface {
	ListMetrics(ctx context.Context, in *cloudwatch.ListMetricsInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.ListMetricsOutput, error)
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

var (
	_ logFilterer  = (*cloudwatchlogs.Client)(nil)
	_ metricReader = (*cloudwatch.Client)(nil)
)

// ErrNoLogGroup is returned by Tail when the log group does not exist yet
// (the function has not logged anything).
var ErrNoLogGroup = errors.New("log group does not exist")

// LogEvent is one event read back from a log group.
type LogEvent struct {
	Time    time.Time
	Stream  string
	Message string
	id      string
}

// Tail writes the events of group since the given time to w, oldest first,
// one per line: "<RFC3339 time> <log stream> <message>".
func Tail(ctx context.Context, cfg aws.Config, group string, since time.Time, w io.Writer) error {
	events, err := readEvents(ctx, cloudwatchlogs.NewFromConfig(cfg), group, since)
	if err != nil {
		return err
	}
	return writeEvents(w, events)
}

// Follow is Tail that keeps polling every interval (0 means one second)
// for new events until ctx ends; it returns nil then. A log group that does
// not exist yet is waited for.
func Follow(ctx context.Context, cfg aws.Config, group string, since time.Time, every time.Duration, w io.Writer) error {
	if every <= 0 {
		every = time.Second
	}
	client := cloudwatchlogs.NewFromConfig(cfg)
	seen := map[string]bool{}
	for {
		events, err := readEvents(ctx, client, group, since)
		if err != nil && !errors.Is(err, ErrNoLogGroup) {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var fresh []LogEvent
		for _, e := range events {
			if !seen[e.id] {
				seen[e.id] = true
				fresh = append(fresh, e)
			}
		}
		if err := writeEvents(w, fresh); err != nil {
			return err
		}
		if len(events) > 0 {
			// Events at the last millisecond are read again and skipped by id.
			since = events[len(events)-1].Time
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// ReadEvents returns the events of group since the given time, oldest first.
func ReadEvents(ctx context.Context, cfg aws.Config, group string, since time.Time) ([]LogEvent, error) {
	return readEvents(ctx, cloudwatchlogs.NewFromConfig(cfg), group, since)
}

func readEvents(ctx context.Context, c logFilterer, group string, since time.Time) ([]LogEvent, error) {
	in := &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String(group)}
	if !since.IsZero() {
		in.StartTime = aws.Int64(since.UnixMilli())
	}
	var out []LogEvent
	p := cloudwatchlogs.NewFilterLogEventsPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("cloudwatchlocal: %s: %w", group, ErrNoLogGroup)
		}
		if err != nil {
			return nil, fmt.Errorf("cloudwatchlocal: read %s: %w", group, err)
		}
		for _, e := range page.Events {
			out = append(out, LogEvent{
				Time:    time.UnixMilli(aws.ToInt64(e.Timestamp)).UTC(),
				Stream:  aws.ToString(e.LogStreamName),
				Message: aws.ToString(e.Message),
				id:      aws.ToString(e.EventId),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

func writeEvents(w io.Writer, events []LogEvent) error {
	for _, e := range events {
		if _, err := fmt.Fprintf(w, "%s %s %s\n", e.Time.Format("2006-01-02T15:04:05.000Z07:00"), e.Stream, e.Message); err != nil {
			return err
		}
	}
	return nil
}

// MetricSummary is what one metric (name and dimensions) recorded since a
// given time.
type MetricSummary struct {
	Namespace   string
	Name        string
	Dimensions  map[string]string
	Sum         float64
	SampleCount float64
	Min, Max    float64
}

// String prints the summary as "Name{dim=value,...} sum=… count=… min=… max=…".
func (m MetricSummary) String() string {
	keys := make([]string, 0, len(m.Dimensions))
	for k := range m.Dimensions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var dims []string
	for _, k := range keys {
		dims = append(dims, k+"="+m.Dimensions[k])
	}
	return fmt.Sprintf("%s{%s} sum=%g count=%g min=%g max=%g", m.Name, strings.Join(dims, ","), m.Sum, m.SampleCount, m.Min, m.Max)
}

// Metrics sums, per metric name and dimension set, the data points of
// namespace since the given time (GetMetricData at one-minute periods),
// sorted by name and dimensions.
//
// On moto, the series of a metric published without dimensions also counts
// the points of that metric's dimensioned series (moto matches an empty
// dimension list as "any"); series with dimensions are exact.
func Metrics(ctx context.Context, cfg aws.Config, namespace string, since time.Time) ([]MetricSummary, error) {
	return metrics(ctx, CloudWatchClient(cfg), namespace, since, time.Now())
}

// MetricsBetween is Metrics over the data points stamped in [from, to),
// to the second. A run reads back only what was published while it ran, so
// an endpoint that outlives runs (LocalStack, a `make local-up`) does not
// add earlier runs' data to its figures. Two runs at the same time on one
// endpoint still share series: Sink.Own tells what one of them put.
//
// It asks for one period spanning [from, to): the sum, count, minimum and
// maximum over the span are those of its only period, and the stand-in's
// work does not grow with the span's length (moto scans every data point
// once per period of every query; one-second periods over a six-minute run
// kept it busy for minutes).
func MetricsBetween(ctx context.Context, cfg aws.Config, namespace string, from, to time.Time) ([]MetricSummary, error) {
	return metricsIn(ctx, CloudWatchClient(cfg), namespace, from, to)
}

var stats = []string{"Sum", "SampleCount", "Minimum", "Maximum"}

func metrics(ctx context.Context, c metricReader, namespace string, since, now time.Time) ([]MetricSummary, error) {
	start := since.Truncate(time.Minute)
	end := now.Add(time.Minute).Truncate(time.Minute)
	return query(ctx, c, namespace, start, end, 60)
}

func metricsIn(ctx context.Context, c metricReader, namespace string, from, to time.Time) ([]MetricSummary, error) {
	start := from.Truncate(time.Second)
	end := to.Add(time.Second).Truncate(time.Second)
	return query(ctx, c, namespace, start, end, spanPeriod(end.Sub(start)))
}

// spanPeriod is the one period, in seconds, that covers span: a whole number
// of minutes, as GetMetricData takes periods above a minute.
func spanPeriod(span time.Duration) int32 {
	minutes := (span + time.Minute - 1) / time.Minute
	return int32(max(minutes, 1) * 60)
}

// query sums every series of namespace over [start, end) at period seconds.
func query(ctx context.Context, c metricReader, namespace string, start, end time.Time, period int32) ([]MetricSummary, error) {
	var series []cwtypes.Metric
	seen := map[string]bool{}
	p := cloudwatch.NewListMetricsPaginator(c, &cloudwatch.ListMetricsInput{Namespace: aws.String(namespace)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("cloudwatchlocal: list metrics of %s: %w", namespace, err)
		}
		for _, m := range page.Metrics {
			k := seriesKey(m)
			if !seen[k] {
				seen[k] = true
				series = append(series, m)
			}
		}
	}
	out := make([]MetricSummary, len(series))
	for i, m := range series {
		out[i] = MetricSummary{Namespace: namespace, Name: aws.ToString(m.MetricName), Dimensions: map[string]string{}, Min: math.Inf(1), Max: math.Inf(-1)}
		for _, d := range m.Dimensions {
			out[i].Dimensions[aws.ToString(d.Name)] = aws.ToString(d.Value)
		}
	}
	if !end.After(start) {
		end = start.Add(time.Duration(period) * time.Second)
	}
	const perCall = 500 / 4 // GetMetricData takes at most 500 queries
	for lo := 0; lo < len(series); lo += perCall {
		hi := min(lo+perCall, len(series))
		var queries []cwtypes.MetricDataQuery
		for i := lo; i < hi; i++ {
			for j, st := range stats {
				queries = append(queries, cwtypes.MetricDataQuery{
					Id: aws.String(fmt.Sprintf("m%d_%d", i, j)),
					MetricStat: &cwtypes.MetricStat{
						Metric: &cwtypes.Metric{Namespace: aws.String(namespace), MetricName: series[i].MetricName, Dimensions: series[i].Dimensions},
						Period: aws.Int32(period),
						Stat:   aws.String(st),
					},
					ReturnData: aws.Bool(true),
				})
			}
		}
		dp := cloudwatch.NewGetMetricDataPaginator(c, &cloudwatch.GetMetricDataInput{
			StartTime: aws.Time(start), EndTime: aws.Time(end), MetricDataQueries: queries,
		})
		for dp.HasMorePages() {
			page, err := dp.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("cloudwatchlocal: get metric data of %s: %w", namespace, err)
			}
			for _, r := range page.MetricDataResults {
				var i, j int
				if _, err := fmt.Sscanf(aws.ToString(r.Id), "m%d_%d", &i, &j); err != nil || i >= len(out) || j >= len(stats) {
					continue
				}
				s := &out[i]
				for _, v := range r.Values {
					switch stats[j] {
					case "Sum":
						s.Sum += v
					case "SampleCount":
						s.SampleCount += v
					case "Minimum":
						s.Min = math.Min(s.Min, v)
					case "Maximum":
						s.Max = math.Max(s.Max, v)
					}
				}
			}
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s.SampleCount == 0 {
			continue // listed, but no points since the given time
		}
		kept = append(kept, s)
	}
	sort.Slice(kept, func(a, b int) bool {
		if kept[a].Name != kept[b].Name {
			return kept[a].Name < kept[b].Name
		}
		return kept[a].String() < kept[b].String()
	})
	return kept, nil
}

func seriesKey(m cwtypes.Metric) string {
	dims := make([]string, 0, len(m.Dimensions))
	for _, d := range m.Dimensions {
		dims = append(dims, aws.ToString(d.Name)+"="+aws.ToString(d.Value))
	}
	sort.Strings(dims)
	return aws.ToString(m.MetricName) + "{" + strings.Join(dims, ",") + "}"
}
