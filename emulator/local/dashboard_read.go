package local

import (
	"context"
	"encoding/json"
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

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
)

// How the page reads CloudWatch. The stand-in serves one request at a time,
// and moto's GetMetricData scans every data point in the query's time range
// once per period of every query (about 0.1 s a query with 20,000 points on
// a loaded 2-core machine). The page used to send one GetMetricData per
// widget, 420 queries for two pipelines' dashboards (most of them the same
// series twice), over the whole range the page shows, all under one 20 s
// budget: most widgets ran out of it ("context deadline exceeded"), and
// meanwhile the functions' own calls queued behind the reads. Now one
// reading serves the whole page: each series once, however many widgets or
// dashboards plot it, from the stack's start only, in calls of a bounded
// number of queries sent one after another, each with a deadline of its
// own and retried; each log group is read once, likewise.
type readLimits struct {
	queriesPerCall int           // metric queries in one GetMetricData
	timeout        time.Duration // of one call (GetMetricData, or one log group's FilterLogEvents pages)
	attempts       int           // calls for one read before it is a failure
	backoff        time.Duration // before the second attempt; doubled after
	reuse          time.Duration // a reading this recent is drawn again, not read again
	reuseChecked   time.Duration // the same for the check's reading: the screenshot after it shows it
	page           time.Duration // a page's whole reading: what does not fit shows its error
	check          time.Duration // the dashboard check's whole reading
}

var defaultReadLimits = readLimits{
	queriesPerCall: 25,
	timeout:        30 * time.Second,
	attempts:       3,
	backoff:        time.Second,
	reuse:          10 * time.Second,
	reuseChecked:   time.Minute,
	page:           time.Minute,
	check:          3 * time.Minute,
}

// seriesQuery is one series at one statistic and period: what a metric row
// of a widget asks GetMetricData for.
type seriesQuery struct {
	namespace, name string
	dims            [][2]string // sorted by name
	stat            string      // GetMetricData's statistic: Sum, Average, …
	period          int         // seconds
}

// queryOf is the query of a metric row with a standard statistic; false
// for expressions and percentiles.
func queryOf(r metricRow) (seriesQuery, bool) {
	stat, ok := standardStats[strings.ToLower(r.Stat)]
	if !ok || r.Expression != "" {
		return seriesQuery{}, false
	}
	dims := append([][2]string(nil), r.Dims...)
	sort.Slice(dims, func(i, j int) bool { return dims[i][0] < dims[j][0] })
	return seriesQuery{namespace: r.Namespace, name: r.Name, dims: dims, stat: stat, period: rowPeriod(r)}, true
}

// key identifies the query among the page's.
func (q seriesQuery) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%d", q.namespace, q.name, q.stat, q.period)
	for _, d := range q.dims {
		b.WriteString("\x00" + d[0] + "=" + d[1])
	}
	return b.String()
}

// pageReads is one reading of CloudWatch for the whole page.
type pageReads struct {
	at, from, to time.Time
	series       map[string]timeSeries // by seriesQuery.key
	seriesErr    map[string]error      // the queries whose every attempt failed
	logs         map[string]logRead    // by log group
	retried      map[string]bool       // series keys and log groups read on a later attempt
	checked      bool                  // the dashboard check's reading
}

// logRead is a log group's events since the page's start.
type logRead struct {
	events  []cloudwatchlocal.LogEvent
	missing bool // the group does not exist yet: nothing logged
	err     error
}

// read returns a reading of CloudWatch for v: the last one when it is
// recent enough (a refresh; the screenshot after the check, which shows
// the check's reading), else a new one. One reading runs at a time.
func (d *dashboardServer) read(ctx context.Context, v view) *pageReads {
	d.readMu.Lock()
	defer d.readMu.Unlock()
	from := d.readFrom(v)
	if l := d.last; l != nil && !l.from.After(from) {
		reuse := d.limits.reuse
		if l.checked {
			reuse = d.limits.reuseChecked
		}
		if d.now().Sub(l.at) < reuse {
			return l
		}
	}
	rctx, cancel := context.WithTimeout(ctx, d.limits.page)
	defer cancel()
	r := d.readAll(rctx, from, v.to)
	if ctx.Err() == nil { // not a reading cut short by a page closed
		d.last = r
	}
	return r
}

// readFrom is where a reading for v starts: the page's range, but not
// before the stack's start (less a period).
func (d *dashboardServer) readFrom(v view) time.Time {
	from := v.from
	if start := d.since.Truncate(time.Minute).Add(-localPeriod * time.Second); start.After(from) {
		from = start
	}
	return from
}

// readAll reads every series and log group the page's widgets (the health
// charts' and the dashboards') need over [from, to).
func (d *dashboardServer) readAll(ctx context.Context, from, to time.Time) *pageReads {
	r := &pageReads{at: d.now(), from: from, to: to, series: map[string]timeSeries{}, seriesErr: map[string]error{},
		logs: map[string]logRead{}, retried: map[string]bool{}}
	queries := map[string]seriesQuery{}
	groups := map[string]bool{}
	for _, bd := range append(d.healthBoards(), d.boards...) {
		for _, w := range bd.Widgets {
			switch w.Type {
			case "metric":
				var p metricProps
				if json.Unmarshal(w.Properties, &p) != nil {
					continue
				}
				rows, err := parseRows(p.Metrics, p.Stat, p.Period)
				if err != nil {
					continue
				}
				for _, row := range rows {
					if q, ok := queryOf(row); ok {
						queries[q.key()] = q
					}
				}
			case "log":
				var p logProps
				_ = json.Unmarshal(w.Properties, &p)
				for _, g := range insightsSources(p.Query) {
					groups[g] = true
				}
			}
		}
	}
	keys := make([]string, 0, len(queries))
	for k := range queries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for lo := 0; lo < len(keys); lo += d.limits.queriesPerCall {
		chunk := keys[lo:min(lo+d.limits.queriesPerCall, len(keys))]
		var got map[string]timeSeries
		attempts, err := d.retry(ctx, func(ctx context.Context) (err error) {
			got, err = d.getMetricData(ctx, queries, chunk, from, to)
			return err
		})
		for _, k := range chunk {
			if err != nil {
				r.seriesErr[k] = err
				continue
			}
			r.series[k] = got[k]
			r.retried[k] = attempts > 1
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		var lr logRead
		attempts, err := d.retry(ctx, func(ctx context.Context) (err error) {
			lr.events, err = d.logs(ctx, g, from)
			if errors.Is(err, cloudwatchlocal.ErrNoLogGroup) {
				lr.missing, err = true, nil
			}
			return err
		})
		lr.err = err
		r.logs[g] = lr
		r.retried[g] = err == nil && attempts > 1
	}
	return r
}

// retry calls f, each call with a deadline of its own, until it succeeds
// or limits.attempts calls failed, waiting longer after each failure. It
// returns the number of calls made and the last error.
func (d *dashboardServer) retry(ctx context.Context, f func(context.Context) error) (int, error) {
	wait := d.limits.backoff
	var err error
	for n := 1; ; n++ {
		cctx, cancel := context.WithTimeout(ctx, d.limits.timeout)
		err = f(cctx)
		cancel()
		if err == nil {
			return n, nil
		}
		if n >= d.limits.attempts {
			return n, fmt.Errorf("%d attempts of %s each, the last: %w", n, d.limits.timeout, err)
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// getMetricData reads the queries keys name over [from, to) with one
// GetMetricData (as many pages as it takes), as series by key.
func (d *dashboardServer) getMetricData(ctx context.Context, queries map[string]seriesQuery, keys []string, from, to time.Time) (map[string]timeSeries, error) {
	in := &cloudwatch.GetMetricDataInput{StartTime: aws.Time(from.Truncate(time.Second)), EndTime: aws.Time(to.Add(time.Second).Truncate(time.Second))}
	byID := map[string]string{}
	for i, k := range keys {
		q := queries[k]
		id := fmt.Sprintf("q%d", i)
		byID[id] = k
		dims := make([]cwtypes.Dimension, 0, len(q.dims))
		for _, dm := range q.dims {
			dims = append(dims, cwtypes.Dimension{Name: aws.String(dm[0]), Value: aws.String(dm[1])})
		}
		in.MetricDataQueries = append(in.MetricDataQueries, cwtypes.MetricDataQuery{
			Id: aws.String(id),
			MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{Namespace: aws.String(q.namespace), MetricName: aws.String(q.name), Dimensions: dims},
				Period: aws.Int32(int32(q.period)), Stat: aws.String(q.stat),
			},
			ReturnData: aws.Bool(true),
		})
	}
	out := map[string]timeSeries{}
	p := cloudwatch.NewGetMetricDataPaginator(d.cw, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, res := range page.MetricDataResults {
			k, ok := byID[aws.ToString(res.Id)]
			if !ok {
				continue
			}
			q := queries[k]
			per := int64(q.period)
			s := out[k]
			if s == nil {
				s = timeSeries{}
				out[k] = s
			}
			for i, ts := range res.Timestamps {
				if i >= len(res.Values) {
					continue
				}
				// Points are per period already; should two fall in one
				// period, combine them as the statistic would.
				b, v := ts.Unix()-ts.Unix()%per, res.Values[i]
				old, seen := s[b]
				switch {
				case !seen:
					s[b] = v
				case q.stat == "Sum" || q.stat == "SampleCount":
					s[b] = old + v
				case q.stat == "Minimum":
					s[b] = math.Min(old, v)
				case q.stat == "Maximum":
					s[b] = math.Max(old, v)
				default:
					s[b] = (old + v) / 2
				}
			}
		}
	}
	return out, nil
}

// widgetFailure is a widget of the page that could not read what it shows.
type widgetFailure struct {
	board, title, kind string
	index              int
	errs               []readFailure
}

func (f widgetFailure) String() string {
	return fmt.Sprintf("dashboard %s, %s widget %d %q: %s", f.board, f.kind, f.index, f.title, joinFailures(f.errs))
}

// readFailure is one read of a widget that failed: a series or a log group.
type readFailure struct {
	what string // "series <label>", "log group <name>"
	err  error
}

// joinFailures lists fs, those that failed alike together: "series a,
// series b: <error>; log group c: <error>".
func joinFailures(fs []readFailure) string {
	var order []string
	whats := map[string][]string{}
	for _, f := range fs {
		msg := f.err.Error()
		if _, ok := whats[msg]; !ok {
			order = append(order, msg)
		}
		whats[msg] = append(whats[msg], f.what)
	}
	parts := make([]string, len(order))
	for i, msg := range order {
		parts[i] = strings.Join(whats[msg], ", ") + ": " + msg
	}
	return strings.Join(parts, "; ")
}

// check reads what the page shows, as the page does (each read retried, as
// limits say), and returns an error naming every widget that still could
// not read its data, with the error. It prints how many widgets were read,
// and how many of them only on a retry.
func (d *dashboardServer) check(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, d.limits.check)
	defer cancel()
	began := time.Now()
	v := view{to: d.now(), rng: defaultRange}
	v.from = v.to.Add(-v.rng)
	d.readMu.Lock()
	reads := d.readAll(ctx, d.readFrom(v), v.to)
	reads.checked = true
	d.last = reads
	d.readMu.Unlock()
	all := append(d.healthBoards(), d.boards...)
	var failed []widgetFailure
	widgets, retried := 0, 0
	for _, bd := range all {
		if bd.Err != nil {
			failed = append(failed, widgetFailure{board: bd.Name, title: "(the whole dashboard)", kind: "dashboard body", errs: []readFailure{{"its body", bd.Err}}})
			continue
		}
		_, f := d.renderBoards(reads, v, []board{bd}, false)
		failed = append(failed, f...)
		for _, wd := range bd.Widgets {
			widgets++
			if reads.widgetRetried(wd) {
				retried++
			}
		}
	}
	fmt.Fprintf(w, "▸ dashboard page: %d widgets (%d pipelines' health charts, %d dashboards) read from the stand-in's CloudWatch in %s",
		widgets, len(all)-len(d.boards), len(d.boards), time.Since(began).Round(100*time.Millisecond))
	if retried > 0 {
		fmt.Fprintf(w, " (%d of them on a retry)", retried)
	}
	fmt.Fprintln(w)
	if len(failed) == 0 {
		return nil
	}
	lines := make([]string, len(failed))
	for i, f := range failed {
		lines[i] = "\n  " + f.String()
	}
	return fmt.Errorf("the dashboard page: %d of %d widgets could not read their data from the stand-in's CloudWatch:%s",
		len(failed), widgets, strings.Join(lines, ""))
}

// widgetRetried reports whether one of w's reads succeeded on a retry.
func (r *pageReads) widgetRetried(w widget) bool {
	switch w.Type {
	case "metric":
		var p metricProps
		if json.Unmarshal(w.Properties, &p) != nil {
			return false
		}
		rows, _ := parseRows(p.Metrics, p.Stat, p.Period)
		for _, row := range rows {
			if q, ok := queryOf(row); ok && r.retried[q.key()] {
				return true
			}
		}
	case "log":
		var p logProps
		_ = json.Unmarshal(w.Properties, &p)
		for _, g := range insightsSources(p.Query) {
			if r.retried[g] {
				return true
			}
		}
	}
	return false
}

// CheckDashboards reads, as the dashboard page does, every widget's data
// from the stand-in's CloudWatch (a read that fails is retried a few
// times), prints how many widgets were read, and returns an error naming
// each widget that still could not read its data and why. The page drawn
// right after (make local's screenshot) shows this reading. Nothing is
// checked when no dashboard page is served.
func (s *Stack) CheckDashboards(ctx context.Context, w io.Writer) error {
	if s.dashboard == nil {
		return nil
	}
	return s.dashboard.check(ctx, w)
}

// healthBoards are the few charts shown per pipeline above the dashboards:
// records in and windows finalized, records set aside and dropped late,
// the watermark's lag and the iterator age of the pipeline's aggregate
// function, from the metrics package aggregate and the runner publish (the
// same series the pipeline's CloudWatch dashboard plots).
func (d *dashboardServer) healthBoards() []board {
	var out []board
	for _, pl := range d.pipelines {
		p := pl.Pipeline.Name
		own := func(name, function, label, stat string) []any {
			return []any{"Tributary", name, "Function", function, "Pipeline", p, map[string]any{"label": label, "stat": stat}}
		}
		charts := []metricProps{
			{Title: "records in, windows finalized (per minute)", Metrics: [][]any{
				own("RecordsIn", "aggregate", "records in", "Sum"),
				own("WindowsFinalized", "aggregate", "windows finalized by aggregate", "Sum"),
				own("WindowsFinalized", "ticker", "windows finalized by ticker", "Sum"),
			}},
			{Title: "records set aside, late records dropped (per minute)", Metrics: [][]any{
				own("RecordsSetAside", "aggregate", "set aside", "Sum"),
				own("LateDropped", "aggregate", "late, dropped", "Sum"),
			}},
			{Title: "watermark lag (ms behind processing time, max)", Metrics: [][]any{
				own("WatermarkLagMs", "aggregate", "watermark lag", "Maximum"),
			}},
		}
		if pl.lambdaName != "" {
			charts = append(charts, metricProps{Title: "iterator age (ms, max)", Metrics: [][]any{
				{LambdaNamespace, "IteratorAge", "FunctionName", pl.lambdaName, map[string]any{"label": "iterator age of " + pl.Function, "stat": "Maximum"}},
			}})
		}
		b := board{LogicalID: "health-" + p, Name: "health of pipeline " + p}
		for i, c := range charts {
			c.Title = p + ": " + c.Title
			c.Period, c.View = localPeriod, "timeSeries"
			props, err := json.Marshal(c)
			if err != nil {
				b.Err = err
				break
			}
			b.Widgets = append(b.Widgets, widget{Type: "metric", X: i * 6, Y: 0, Width: 6, Height: healthHeight, Properties: props})
		}
		out = append(out, b)
	}
	return out
}

// healthHeight is the height of a health chart, in grid rows.
const healthHeight = 5
