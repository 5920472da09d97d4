package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/chromedp/chromedp"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/internal/headless"
	"github.com/tributary-dev/tributary/internal/headless/devtools"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// readTimeout is what a fake read fails with: what the page showed when
// its reads ran out of time on a loaded machine.
var readTimeout = fmt.Errorf("operation error CloudWatch: GetMetricData, %w", context.DeadlineExceeded)

// fakeCloudWatch answers GetMetricData with one point per query at the
// request's start, its value the query's index plus one; queries of a
// metric named in fail fail that many calls first (-1: every call).
type fakeCloudWatch struct {
	mu      sync.Mutex
	fail    map[string]int
	calls   int
	queries []string // "Namespace/Name dims stat", one per query sent
	starts  []time.Time
}

func (f *fakeCloudWatch) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.starts = append(f.starts, aws.ToTime(in.StartTime))
	for _, q := range in.MetricDataQueries {
		m := q.MetricStat.Metric
		if n := f.fail[aws.ToString(m.MetricName)]; n != 0 {
			f.fail[aws.ToString(m.MetricName)] = n - 1
			return nil, readTimeout
		}
	}
	out := &cloudwatch.GetMetricDataOutput{}
	for i, q := range in.MetricDataQueries {
		m := q.MetricStat.Metric
		var dims []string
		for _, d := range m.Dimensions {
			dims = append(dims, aws.ToString(d.Name)+"="+aws.ToString(d.Value))
		}
		f.queries = append(f.queries, fmt.Sprintf("%s/%s %s %s", aws.ToString(m.Namespace), aws.ToString(m.MetricName), strings.Join(dims, ","), aws.ToString(q.MetricStat.Stat)))
		out.MetricDataResults = append(out.MetricDataResults, cwtypes.MetricDataResult{
			Id: q.Id, Timestamps: []time.Time{aws.ToTime(in.StartTime).Add(time.Minute)}, Values: []float64{float64(i + 1)},
		})
	}
	return out, nil
}

// fakeLogs holds one REPORT line per log group; groups in fail fail that
// many reads first (-1: every read).
type fakeLogs struct {
	mu   sync.Mutex
	fail map[string]int
	at   time.Time
}

func (f *fakeLogs) read(_ context.Context, group string, _ time.Time) ([]cloudwatchlocal.LogEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.fail[group]; n != 0 {
		f.fail[group] = n - 1
		return nil, fmt.Errorf("operation error CloudWatch Logs: FilterLogEvents, %w", context.DeadlineExceeded)
	}
	return []cloudwatchlocal.LogEvent{{Time: f.at, Stream: "s", Message: "REPORT RequestId: 1 Duration: 2 ms"}}, nil
}

// fakeViews is the results of one key: three windows of the checkouts
// pipeline, which computes count, sum, mean, max and quantiles, neither
// min nor distinct.
type fakeViews struct{ spec *agg.Spec }

func (f fakeViews) Query(_ context.Context, pipeline, key, kind string, from, to time.Time) ([]state.View, error) {
	var out []state.View
	start := from.Truncate(time.Minute).Add(time.Hour)
	for i := range 3 {
		w := window.Window{Start: start.Add(time.Duration(i) * time.Minute), End: start.Add(time.Duration(i+1) * time.Minute)}
		out = append(out, state.View{Pipeline: pipeline, Key: key, Kind: kind, Window: w, Final: true, Revision: 1,
			Result: agg.Result{Aggregates: f.spec.Aggregates, Count: 3, Sum: 42, Mean: 14, Max: 20, Quantiles: map[string]float64{"p50": 14, "p95": 20}}})
	}
	return out, nil
}

// QueryBounded is Query's windows cut to b.
func (f fakeViews) QueryBounded(ctx context.Context, pipeline, key, kind string, from, to time.Time, b state.Bound) ([]state.View, bool, error) {
	vs, err := f.Query(ctx, pipeline, key, kind, from, to)
	if err != nil || len(vs) <= b.Limit {
		return vs, false, err
	}
	if b.Latest {
		return vs[len(vs)-b.Limit:], true, nil
	}
	return vs[:b.Limit], true, nil
}

// WindowsLatest is the latest of Query's windows, as the page reads them.
func (f fakeViews) WindowsLatest(ctx context.Context, key, kind string, from, to time.Time, limit int) ([]state.View, bool, error) {
	return f.QueryBounded(ctx, "checkouts", key, kind, from, to, state.Bound{Limit: limit, Latest: true})
}

// fakeKeys lists one key of the pipeline.
type fakeKeys struct{ pipeline string }

func (f fakeKeys) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return &dynamodb.ScanOutput{Items: []map[string]ddbtypes.AttributeValue{{
		"pipeline": &ddbtypes.AttributeValueMemberS{Value: f.pipeline}, "key": &ddbtypes.AttributeValueMemberS{Value: "eu-west"},
	}}}, nil
}

// testBoard is a template dashboard as the CDK writes one: records in and
// writes of the aggregate function, the watermark lag (a series the health
// charts plot too), a text widget and a log widget.
func testBoard(t *testing.T, id string) board {
	t.Helper()
	body := `{"widgets":[
	{"type":"metric","x":0,"y":0,"width":12,"height":6,"properties":{"title":"records in","stat":"Sum","period":60,"metrics":[["Tributary","RecordsIn","Function","aggregate","Pipeline","checkouts"]]}},
	{"type":"metric","x":12,"y":0,"width":12,"height":6,"properties":{"title":"write requests","stat":"Sum","period":60,"metrics":[["Tributary","WriteRequests","Function","aggregate","Pipeline","checkouts"]]}},
	{"type":"metric","x":0,"y":6,"width":12,"height":6,"properties":{"title":"watermark","stat":"Maximum","period":60,"metrics":[["Tributary","WatermarkLagMs","Function","aggregate","Pipeline","checkouts"]]}},
	{"type":"text","x":12,"y":6,"width":12,"height":6,"properties":{"markdown":"# Checkouts"}},
	{"type":"log","x":0,"y":12,"width":24,"height":6,"properties":{"title":"reports","query":"SOURCE '/aws/lambda/aggregate' | fields @timestamp, @message | filter @message like /REPORT/ | limit 5"}}]}`
	var parsed struct {
		Widgets []widget `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &parsed); err != nil {
		t.Fatal(err)
	}
	return board{LogicalID: id, Name: "tributary-" + id, Widgets: parsed.Widgets}
}

// testDashboard is the page of a stack running the checkouts pipeline
// (pipelines/checkouts.json's aggregates), with two dashboards in its
// template, reading from fakes.
func testDashboard(t *testing.T, cw *fakeCloudWatch, logs *fakeLogs) *dashboardServer {
	t.Helper()
	pc, err := pipeline.Parse([]byte(`{"name":"checkouts","eventTypes":["checkout"],"key":"key","value":"data.amount",
		"windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum","mean","max","quantiles"],"quantiles":[0.5,0.95]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	logs.at = now.Add(-time.Minute)
	limits := defaultReadLimits
	limits.backoff = time.Millisecond
	return &dashboardServer{
		stackName: "Tributary", endpoint: "http://127.0.0.1:4566",
		boards: []board{testBoard(t, "CheckoutsDashboard"), testBoard(t, "PageviewsDashboard")},
		cw:     cw, logs: logs.read, db: fakeKeys{pc.Name},
		pipelines: []*Windows{{Pipeline: pc, Function: "aggregate", Table: "Views", views: fakeViews{pc.Aggregates}, recent: fakeViews{pc.Aggregates}, lambdaName: "Tributary-Aggregate"}},
		now:       func() time.Time { return now },
		every:     5 * time.Second,
		since:     now.Add(-3 * time.Minute),
		limits:    limits,
		keys:      map[string]keyList{},
	}
}

// TestDashboardPageShowsResultsFirst loads the page in headless chromium:
// the results table is what a user sees first (before the health charts,
// which come before the stack's CloudWatch dashboards), and a value the
// pipeline does not compute (min, distinct) reads "–", not 0.
func TestDashboardPageShowsResultsFirst(t *testing.T) {
	if _, err := headless.Path(); err != nil {
		testtools.Missing(t, err.Error()+"; `make deps-browser` could not install it here")
	}
	d := testDashboard(t, &fakeCloudWatch{}, &fakeLogs{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.serve(ln)
	t.Cleanup(func() { _ = d.close(context.Background()) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bctx, stop, err := devtools.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const read = `(() => {
  const parts = Array.from(document.querySelectorAll('#results table.windows, [data-health], [data-dashboard]'))
    .map(e => e.matches('table') ? 'results table' : e.dataset.health ? 'health ' + e.dataset.health : 'dashboard ' + e.dataset.dashboard);
  const table = document.querySelector('#results table.windows');
  const heads = table ? Array.from(table.querySelectorAll('th')).map(th => th.innerText) : [];
  const rows = table ? Array.from(table.querySelectorAll('tr.window')).map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText)) : [];
  return JSON.stringify({Parts: parts, TableTop: table ? table.getBoundingClientRect().top : -1, Heads: heads, Rows: rows});
})()`
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL()+"?pipeline=checkouts"), chromedp.WaitVisible(chromedp.CSS("#results"))); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](read))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Parts    []string
		TableTop float64
		Heads    []string
		Rows     [][]string
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"results table", "health health-checkouts", "dashboard CheckoutsDashboard", "dashboard PageviewsDashboard"}
	if strings.Join(got.Parts, " | ") != strings.Join(want, " | ") {
		t.Errorf("the page shows, top to bottom:\n  %s\nwant\n  %s", strings.Join(got.Parts, " | "), strings.Join(want, " | "))
	}
	if got.TableTop < 0 || got.TableTop > 600 {
		t.Errorf("the results table starts %.0f px down the page, want it in the first screen (≤ 600 px)", got.TableTop)
	}
	if len(got.Rows) != 3 {
		t.Fatalf("the results table has %d windows, want 3 (headers %v)", len(got.Rows), got.Heads)
	}
	cells := map[string]string{}
	for i, h := range got.Heads {
		if i < len(got.Rows[0]) {
			cells[h] = got.Rows[0][i]
		}
	}
	for col, want := range map[string]string{"count": "3", "sum": "42", "mean": "14", "max": "20", "p50": "14", "p95": "20", "min": "–", "distinct": "–"} {
		if cells[col] != want {
			t.Errorf("results table, column %s: %q, want %q (row %v)", col, cells[col], want, got.Rows[0])
		}
	}
}

// TestDashboardCheck: a widget whose read fails is retried, and the check
// passes when a retry succeeds; a read that fails every time fails the
// check, which names the widget (dashboard and title) and the error, and
// no other widget.
func TestDashboardCheck(t *testing.T) {
	tests := []struct {
		name        string
		perCall     int // metric queries per GetMetricData; 0: the default
		failMetrics map[string]int
		failLogs    map[string]int
		want        []string // in the error; none: the check passes
		notWant     []string
	}{
		{name: "every read succeeds"},
		{
			name:        "reads that fail once are retried",
			failMetrics: map[string]int{"WriteRequests": 1, "IteratorAge": 1},
			failLogs:    map[string]int{"/aws/lambda/aggregate": 1},
		},
		{
			name:        "a metric read that always fails",
			perCall:     1, // its call holds no other widget's query
			failMetrics: map[string]int{"WriteRequests": -1},
			want: []string{"2 of 14 widgets could not read their data",
				`dashboard tributary-CheckoutsDashboard, metric widget 1 "write requests"`,
				`dashboard tributary-PageviewsDashboard, metric widget 1 "write requests"`,
				"GetMetricData, context deadline exceeded", "3 attempts"},
			notWant: []string{`"records in"`, `"reports"`},
		},
		{
			name:     "a log read that always fails",
			failLogs: map[string]int{"/aws/lambda/aggregate": -1},
			want: []string{`dashboard tributary-CheckoutsDashboard, log widget 4 "reports"`,
				"log group /aws/lambda/aggregate", "FilterLogEvents, context deadline exceeded"},
			notWant: []string{`"write requests"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cw := &fakeCloudWatch{fail: tc.failMetrics}
			d := testDashboard(t, cw, &fakeLogs{fail: tc.failLogs})
			if tc.perCall > 0 {
				d.limits.queriesPerCall = tc.perCall
			}
			var out bytes.Buffer
			err := d.check(context.Background(), &out)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				// The page shows what the check read: every widget has its data.
				pg := d.render(context.Background(), view{from: d.now().Add(-defaultRange), to: d.now(), rng: defaultRange})
				if len(pg.failures) > 0 {
					t.Errorf("the page shows failed widgets after the check passed: %v", pg.failures)
				}
				if strings.Contains(pg.boards, `data-points="0"`) || strings.Contains(pg.health, `data-points="0"`) {
					t.Errorf("a widget shows no data after the check passed:\n%s", pg.boards)
				}
				if len(tc.failMetrics)+len(tc.failLogs) > 0 && !strings.Contains(out.String(), "on a retry") {
					t.Errorf("the check does not say widgets were read on a retry: %q", out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("check passed; want it to fail naming the widget (printed %q)", out.String())
			}
			t.Logf("the check fails: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the check's error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("the check's error names %s, whose reads succeeded:\n%v", w, err)
				}
			}
		})
	}
}

// TestDashboardReadsEachSeriesOnce: the page reads CloudWatch once for all
// its widgets: a series two dashboards (and the health charts) plot is
// asked for once, in calls of a bounded number of queries, and from the
// stack's start (less a minute), not over the whole range shown.
func TestDashboardReadsEachSeriesOnce(t *testing.T) {
	cw := &fakeCloudWatch{}
	d := testDashboard(t, cw, &fakeLogs{})
	d.limits.queriesPerCall = 4
	pg := d.render(context.Background(), view{from: d.now().Add(-defaultRange), to: d.now(), rng: defaultRange})
	if len(pg.failures) > 0 {
		t.Fatal(pg.failures)
	}
	// The dashboards' 3 series (twice each) and the health charts' 7 (the
	// watermark lag and records in among them): 8 distinct.
	seen := map[string]int{}
	for _, q := range cw.queries {
		seen[q]++
	}
	for q, n := range seen {
		if n > 1 {
			t.Errorf("%s asked for %d times", q, n)
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d series read, want 8: %v", len(seen), cw.queries)
	}
	if cw.calls != 2 {
		t.Errorf("%d GetMetricData calls for 8 queries at 4 a call, want 2", cw.calls)
	}
	for _, s := range cw.starts {
		if want := d.since.Truncate(time.Minute).Add(-time.Minute); !s.Equal(want) {
			t.Errorf("GetMetricData from %s, want the stack's start less a minute, %s", s.Format(time.TimeOnly), want.Format(time.TimeOnly))
		}
	}
	// A refresh right after draws the same reading.
	d.render(context.Background(), view{from: d.now().Add(-defaultRange), to: d.now(), rng: defaultRange})
	if cw.calls != 2 {
		t.Errorf("a second rendering at once read CloudWatch again (%d calls)", cw.calls)
	}
}
