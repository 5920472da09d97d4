package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// metricDataReader is what the dashboard needs of CloudWatch.
type metricDataReader interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

// keyScanner is what the results view needs of DynamoDB to list keys.
type keyScanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var (
	_ metricDataReader = (*cloudwatch.Client)(nil)
	_ keyScanner       = (*dynamodb.Client)(nil)
)

// Limits of what one page shows.
const (
	defaultRange     = 15 * time.Minute
	maxRange         = 24 * time.Hour
	localPeriod      = 60   // seconds: the longest period plotted locally, so a short run has points
	maxLogLines      = 1000 // rows of a log widget (Logs Insights' limit is 10,000)
	defaultLogLines  = 1000 // Logs Insights' default limit
	maxKeysScanned   = 2000 // views items read to list keys
	maxResultWindows = 500  // a key's windows the results view reads and shows: the latest of the range (four hours of 30 s windows)
	defaultResultsHr = 3
)

// dashboardServer serves, on 127.0.0.1, the window results of each
// pipeline read through state.Views.QueryBounded (the latest
// maxResultWindows of a key's range), a few health charts per
// pipeline, and the stack's own CloudWatch dashboards (every
// AWS::CloudWatch::Dashboard of the template, its body resolved against the
// local deployment) drawn from the stand-in's CloudWatch. Pages are
// rendered on the server (SVG); a few lines of script refresh them.
type dashboardServer struct {
	stackName string
	endpoint  string
	boards    []board
	cw        metricDataReader
	logs      logReader
	samples   seriesSamples
	db        keyScanner
	pipelines []*Windows // by name; none when the stack has no aggregate function
	srv       *http.Server
	ln        net.Listener
	now       func() time.Time
	every     time.Duration // refresh interval of the page
	// since is when the stack started: CloudWatch is read from then on
	// (less a period), not over the page's whole range, as there is no data
	// of this stack before it.
	since time.Time
	// limits bounds the page's CloudWatch reads.
	limits readLimits

	mu   sync.Mutex
	keys map[string]keyList // by pipeline

	readMu sync.Mutex // one reading of CloudWatch at a time
	last   *pageReads // the latest reading, reused for limits.reuse
}

// logReader reads a log group's events since a time (cloudwatchlocal.ReadEvents).
type logReader func(ctx context.Context, group string, since time.Time) ([]cloudwatchlocal.LogEvent, error)

// seriesSamples gives the values the runner put to a series (Sink.Samples),
// for the percentiles moto does not compute.
type seriesSamples func(namespace, name string, dims map[string]string, from, to time.Time) []cloudwatchlocal.Sample

// keyList caches the results view's keys for a few seconds.
type keyList struct {
	keys      []string
	truncated bool
	at        time.Time
}

func newDashboardServer(s *Stack, ln net.Listener) *dashboardServer {
	cfg := s.cfg
	d := &dashboardServer{
		stackName: s.deployment.StackName(),
		endpoint:  aws.ToString(cfg.BaseEndpoint),
		boards:    loadBoards(s.deployment),
		cw:        cloudwatchlocal.CloudWatchClient(cfg),
		logs: func(ctx context.Context, group string, since time.Time) ([]cloudwatchlocal.LogEvent, error) {
			return cloudwatchlocal.ReadEvents(ctx, cfg, group, since)
		},
		samples: s.sink.Samples,
		db:      dynamodb.NewFromConfig(cfg),
		now:     time.Now,
		every:   5 * time.Second,
		since:   time.Now(),
		limits:  defaultReadLimits,
	}
	if ws, err := s.FindPipelines(); err == nil {
		d.pipelines = ws
	}
	d.serve(ln)
	return d
}

// serve serves the page on ln.
func (d *dashboardServer) serve(ln net.Listener) {
	d.ln = ln
	if d.keys == nil {
		d.keys = map[string]keyList{}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page)
	mux.HandleFunc("GET /fragment", d.fragment)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
}

// URL is the page's address.
func (d *dashboardServer) URL() string { return "http://" + d.ln.Addr().String() + "/" }

func (d *dashboardServer) close(ctx context.Context) error { return d.srv.Shutdown(ctx) }

// view is what one request asks for.
type view struct {
	from, to time.Time
	rng      time.Duration
	query    url.Values
}

// maxQueryValue bounds a query value the page reads: a key is at most
// stream.MaxKeyLength characters, of at most 4 bytes each. A longer value
// names nothing the page shows, and is read as not given: the page repeats
// the key it shows (it repeated a 100,000-character key four times).
const maxQueryValue = 4 * stream.MaxKeyLength

func (d *dashboardServer) viewOf(r *http.Request) view {
	q := r.URL.Query()
	for name, vs := range q {
		if slices.ContainsFunc(vs, func(v string) bool { return len(v) > maxQueryValue }) {
			delete(q, name)
		}
	}
	rng := defaultRange
	if v, err := time.ParseDuration(q.Get("range")); err == nil && v >= time.Minute && v <= maxRange {
		rng = v
	}
	to := d.now()
	return view{from: to.Add(-rng), to: to, rng: rng, query: q}
}

func (d *dashboardServer) page(w http.ResponseWriter, r *http.Request) {
	v := d.viewOf(r)
	pg := d.render(r.Context(), v)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(d.renderPage(v, pg)))
}

func (d *dashboardServer) fragment(w http.ResponseWriter, r *http.Request) {
	v := d.viewOf(r)
	pg := d.render(r.Context(), v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"results": pg.results,
		"health":  pg.health,
		"widgets": pg.boards,
		"at":      pg.readAt.Format("15:04:05"),
	})
}

// renderedPage is the parts of one rendering of the page.
type renderedPage struct {
	results, health, boards string
	readAt                  time.Time // when CloudWatch was read
	failures                []widgetFailure
}

// render draws the results view and, at the same time and with a budget of
// its own, the health charts and the dashboards from one reading of
// CloudWatch (pageReads): the results view must not wait behind the
// widgets' reads on a loaded machine.
func (d *dashboardServer) render(ctx context.Context, v view) renderedPage {
	var pg renderedPage
	done := make(chan struct{})
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		pg.results = d.renderResults(rctx, v)
	}()
	reads := d.read(ctx, v)
	pg.readAt = reads.at
	var failed []widgetFailure
	pg.health, failed = d.renderBoards(reads, v, d.healthBoards(), false)
	pg.failures = append(pg.failures, failed...)
	pg.boards, failed = d.renderBoards(reads, v, d.boards, true)
	pg.failures = append(pg.failures, failed...)
	<-done
	return pg
}

// point is one plotted value.
type point struct {
	t time.Time
	v float64
}

// plotSeries is one line of a metric widget.
type plotSeries struct {
	label  string
	color  string
	points []point
}

// standardStats are the statistics GetMetricData answers on the stand-in.
var standardStats = map[string]string{
	"sum": "Sum", "average": "Average", "avg": "Average", "minimum": "Minimum", "min": "Minimum",
	"maximum": "Maximum", "max": "Maximum", "samplecount": "SampleCount",
}

// metricSeries draws a metric widget's rows over [from, to) from reads:
// standard statistics as GetMetricData answered them, percentiles from the
// values the runner published (moto computes none), math expressions
// evaluated here. It returns the visible series, notes on what could not
// be shown, and the reads of the widget that failed.
func (d *dashboardServer) metricSeries(reads *pageReads, rows []metricRow, from, to time.Time) (out []plotSeries, notes []string, failed []readFailure) {
	byID := map[string]timeSeries{}
	var buckets []int64
	period := int64(localPeriod)
	for _, r := range rows {
		if r.Period > 0 && int64(r.Period) < period {
			period = int64(r.Period)
		}
	}
	for b := from.Unix() - from.Unix()%period; b < to.Unix(); b += period {
		buckets = append(buckets, b)
	}
	for _, r := range rows {
		if r.Expression != "" {
			continue
		}
		p := rowPeriod(r)
		if q, ok := queryOf(r); ok {
			if err := reads.seriesErr[q.key()]; err != nil {
				failed = append(failed, readFailure{"series " + r.label(), err})
				continue
			}
			byID[r.ID] = reads.series[q.key()]
			continue
		}
		if m := percentileStat.FindStringSubmatch(r.Stat); m != nil {
			q, _ := strconv.ParseFloat(m[1], 64)
			var samples []cloudwatchlocal.Sample
			if d.samples != nil {
				samples = d.samples(r.Namespace, r.Name, r.dims(), from, to)
			}
			byID[r.ID] = percentileSeries(samples, q/100, int64(p))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: statistic %s is not computed locally", r.label(), r.Stat))
	}
	if len(failed) > 0 {
		notes = append(notes, "reading CloudWatch: "+joinFailures(failed))
	}
	for _, r := range rows {
		if r.Expression == "" {
			continue
		}
		s, err := evalExpression(r.Expression, byID, buckets)
		if err != nil {
			notes = append(notes, fmt.Sprintf("expression %s (%s): %v", r.ID, r.Expression, err))
			continue
		}
		byID[r.ID] = s
	}
	for i, r := range rows {
		if !r.Visible {
			continue
		}
		s := byID[r.ID]
		ps := plotSeries{label: r.label(), color: r.Color}
		if ps.color == "" {
			ps.color = palette[i%len(palette)]
		}
		for t, v := range s {
			if tt := time.Unix(t, 0); !tt.Before(from.Add(-time.Duration(period)*time.Second)) && tt.Before(to) {
				ps.points = append(ps.points, point{tt, v})
			}
		}
		sort.Slice(ps.points, func(a, b int) bool { return ps.points[a].t.Before(ps.points[b].t) })
		out = append(out, ps)
	}
	return out, notes, failed
}

// rowPeriod is the period a row is plotted at here: its own (CloudWatch's
// default 300 s when unset), at most localPeriod.
func rowPeriod(r metricRow) int {
	p := r.Period
	if p <= 0 {
		p = 300
	}
	return min(p, localPeriod)
}

// percentileSeries computes the q-quantile (nearest rank) of the samples
// in each period.
func percentileSeries(samples []cloudwatchlocal.Sample, q float64, period int64) timeSeries {
	by := map[int64][]cloudwatchlocal.Sample{}
	for _, s := range samples {
		b := s.At.Unix() - s.At.Unix()%period
		by[b] = append(by[b], s)
	}
	out := timeSeries{}
	for b, ss := range by {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Value < ss[j].Value })
		total := 0.0
		for _, s := range ss {
			total += s.Count
		}
		rank, seen := q*total, 0.0
		for _, s := range ss {
			seen += s.Count
			if seen >= rank {
				out[b] = s.Value
				break
			}
		}
	}
	return out
}

// logLine is one line a log widget shows.
type logLine struct {
	t      time.Time
	stream string
	msg    string
}

// logTable evaluates a log widget's Logs Insights query over the events
// reads holds of the log groups it names (SOURCE '…'), as far as
// insights.go evaluates queries; a query it cannot evaluate shows the
// groups' latest lines, and the notes say why. failed are the groups that
// could not be read.
func logTable(reads *pageReads, query string) (columns []string, rows [][]string, notes []string, failed []readFailure) {
	q, err := parseInsights(query)
	if err != nil {
		notes = append(notes, err.Error()+"; showing the latest lines of the query's log groups")
		q = insightsQuery{sources: insightsSources(query), limit: defaultLogLines}
	}
	if len(q.sources) == 0 {
		return nil, nil, append(notes, "the query names no log group (SOURCE '…')"), nil
	}
	var events []logLine
	for _, g := range q.sources {
		r := reads.logs[g]
		switch {
		case r.err != nil:
			failed = append(failed, readFailure{"log group " + g, r.err})
			notes = append(notes, fmt.Sprintf("reading log group %s: %v", g, r.err))
			continue
		case r.missing:
			notes = append(notes, g+": no log events yet")
			continue
		}
		for _, e := range r.events {
			events = append(events, logLine{e.Time, e.Stream, e.Message})
		}
	}
	columns, rows = q.run(events)
	return columns, rows, notes, failed
}

// pipeline is the pipeline the results view shows: the one the query
// names, else the first by name; nil when none runs.
func (d *dashboardServer) pipeline(q url.Values) *Windows {
	for _, w := range d.pipelines {
		if w.Pipeline.Name == q.Get("pipeline") {
			return w
		}
	}
	if len(d.pipelines) == 0 {
		return nil
	}
	return d.pipelines[0]
}

// resultKeys lists the pipeline's keys in the views table (at most
// maxKeysScanned items read), cached for a few seconds.
func (d *dashboardServer) resultKeys(ctx context.Context, pl *Windows) ([]string, bool, error) {
	d.mu.Lock()
	if k := d.keys[pl.Pipeline.Name]; d.now().Sub(k.at) < 3*time.Second && k.keys != nil {
		d.mu.Unlock()
		return k.keys, k.truncated, nil
	}
	d.mu.Unlock()
	seen := map[string]bool{}
	read, truncated := 0, false
	// The views items carry the pipeline and the key as attributes
	// (pkg/state's item layout: "pipeline", "key"); a result page, the
	// keys it holds in its entries (state.PageItemKeys).
	in := &dynamodb.ScanInput{
		TableName:                aws.String(pl.Table),
		ProjectionExpression:     aws.String("#pk, #p, #k, #e"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk", "#p": "pipeline", "#k": "key", "#e": "entries"},
		Limit:                    aws.Int32(500),
	}
	for {
		out, err := d.db.Scan(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("listing keys in %s: %w", pl.Table, err)
		}
		for _, it := range out.Items {
			p, _ := it["pipeline"].(*ddbtypes.AttributeValueMemberS)
			k, _ := it["key"].(*ddbtypes.AttributeValueMemberS)
			if p != nil && k != nil && p.Value == pl.Pipeline.Name {
				seen[k.Value] = true
			}
			if p != nil && p.Value == pl.Pipeline.Name {
				keys, err := state.PageItemKeys(it)
				if err != nil {
					return nil, false, fmt.Errorf("listing keys in %s: %w", pl.Table, err)
				}
				for _, k := range keys {
					seen[k] = true
				}
			}
		}
		read += len(out.Items)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		if read >= maxKeysScanned {
			truncated = true
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d.mu.Lock()
	d.keys[pl.Pipeline.Name] = keyList{keys: keys, truncated: truncated, at: d.now()}
	d.mu.Unlock()
	return keys, truncated, nil
}

// windowsOf reads the latest maxResultWindows of key's windows of kind
// that start in [from, to), in start order, and whether there are earlier
// ones; it reads no more than that and one.
func (d *dashboardServer) windowsOf(ctx context.Context, pl *Windows, key, kind string, from, to time.Time) ([]state.View, bool, error) {
	return pl.recent.WindowsLatest(ctx, key, kind, from, to, maxResultWindows)
}

// DashboardURL is the address of the local dashboard page, or "" when it is
// not served.
func (s *Stack) DashboardURL() string {
	if s.dashboard == nil {
		return ""
	}
	return s.dashboard.URL()
}

// DashboardHeight estimates the page's height in pixels at 1400 wide, for a
// screenshot of all of it: the header, the results view, a row of health
// charts per pipeline and each dashboard's grid (its lowest widget's bottom,
// 42 px a row).
func (s *Stack) DashboardHeight() int {
	h := 80 + 700
	if s.dashboard == nil {
		return h
	}
	for _, b := range append(s.dashboard.healthBoards(), s.dashboard.boards...) {
		rows := 0
		for _, w := range b.Widgets {
			rows = max(rows, w.Y+w.Height)
		}
		h += 60 + rows*42
	}
	return min(h, 16000)
}

// Dashboards names the template's dashboards the page draws.
func (s *Stack) Dashboards() []string {
	if s.dashboard == nil {
		return nil
	}
	var names []string
	for _, b := range s.dashboard.boards {
		names = append(names, b.Name)
	}
	return names
}
