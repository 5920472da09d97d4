package local

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// maxEchoed bounds what a note repeats of a query value the page could
// not show.
const maxEchoed = 64

// palette is CloudWatch's default line colours.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

const pageCSS = `
body{font:14px/1.4 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;background:#f2f3f3;color:#16191f}
header{background:#232f3e;color:#fff;padding:10px 16px;display:flex;gap:16px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0}header .meta{color:#d5dbdb;font-size:12px}
header a{color:#fff}main{padding:12px 16px}h2{font-size:16px;margin:18px 0 8px}
.grid{display:grid;grid-template-columns:repeat(24,1fr);grid-auto-rows:34px;gap:8px}
.widget{background:#fff;border:1px solid #d5dbdb;border-radius:2px;padding:6px 10px;overflow:hidden;display:flex;flex-direction:column}
.widget h3{font-size:13px;margin:0 0 4px;font-weight:600}
.widget svg{flex:1;min-height:0;width:100%}
.note{font-size:11px;color:#687078;margin:2px 0 0}
.legend{font-size:11px;display:flex;flex-wrap:wrap;gap:4px 12px;margin-top:2px}
.legend span i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.single{display:flex;flex-wrap:wrap;gap:18px;align-items:center;flex:1}.single div{font-size:11px;color:#545b64}.single b{display:block;font-size:28px;color:#16191f}
.md{overflow:auto}.md h1{font-size:18px;margin:4px 0}.md h2{font-size:15px;margin:4px 0}.md p{margin:4px 0}
.logs{font:11px/1.35 ui-monospace,Menlo,Consolas,monospace;overflow:auto;flex:1;margin:0}
table.insights{border-collapse:collapse}table.insights th{text-align:left;position:sticky;top:0;background:#fafafa}
table.insights td,table.insights th{border-bottom:1px solid #eaeded;padding:1px 6px;vertical-align:top;word-break:break-all}
.error{color:#d13212}
h2.part{font-size:18px;margin:28px 0 4px;padding-top:12px;border-top:2px solid #d5dbdb}
#results .controls{display:flex;gap:12px;align-items:center;margin-bottom:6px;flex-wrap:wrap}
table.windows{border-collapse:collapse;font-size:12px;background:#fff;margin-top:8px}
table.windows th,table.windows td{border:1px solid #d5dbdb;padding:2px 8px;text-align:right}
table.windows th:first-child,table.windows td:first-child{text-align:left}
`

// refreshScript replaces the results, the health charts and the
// dashboards with fresh ones every few seconds, keeping the page's query
// (range, key, window kind).
const refreshScript = `
(function(){
  var every = %d;
  function refresh(){
    fetch('fragment' + location.search, {cache: 'no-store'}).then(function(r){ return r.json(); }).then(function(f){
      document.getElementById('results').outerHTML = f.results;
      document.getElementById('health').innerHTML = f.health;
      document.getElementById('boards').innerHTML = f.widgets;
      document.getElementById('refreshed').textContent = f.at;
      document.body.setAttribute('data-refreshes', String(Number(document.body.getAttribute('data-refreshes') || 0) + 1));
    }).catch(function(e){ document.getElementById('refreshed').textContent = 'refresh failed: ' + e; })
    .finally(function(){ setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
`

// renderPage lays the page out results first: the results view (the
// table of a key's windows, then its bars), the health charts of each
// pipeline, and the stack's CloudWatch dashboards last.
func (d *dashboardServer) renderPage(v view, pg renderedPage) string {
	var b strings.Builder
	b.WriteString("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tributary — local dashboard</title>")
	b.WriteString("<style>" + pageCSS + "</style></head><body data-refreshes=\"0\">")
	fmt.Fprintf(&b, "<header><h1>Tributary — local dashboard</h1><span class=\"meta\">stack %s on %s · last %s · CloudWatch read <span id=\"refreshed\">%s</span> (every %s)</span>",
		html.EscapeString(d.stackName), html.EscapeString(d.endpoint), v.rng, pg.readAt.Format("15:04:05"), d.every)
	b.WriteString("<span class=\"meta\">range:")
	for _, r := range []string{"5m", "15m", "1h", "3h"} {
		q := cloneQuery(v.query)
		q.Set("range", r)
		fmt.Fprintf(&b, " <a href=\"?%s\">%s</a>", html.EscapeString(q.Encode()), r)
	}
	b.WriteString(" · <a href=\"#boards\">CloudWatch dashboards ↓</a></span></header><main>")
	b.WriteString(pg.results)
	b.WriteString("<div id=\"health\">" + pg.health + "</div>")
	b.WriteString("<div id=\"boards\">" + pg.boards + "</div>")
	b.WriteString("</main><script>" + fmt.Sprintf(refreshScript, d.every.Milliseconds()) + "</script></body></html>")
	return b.String()
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// renderBoards draws boards' widgets from reads: the template's
// dashboards (each under a heading naming it) when dashboards is set, else
// health charts. It returns the widgets that could not read their data.
func (d *dashboardServer) renderBoards(reads *pageReads, v view, boards []board, dashboards bool) (string, []widgetFailure) {
	var b strings.Builder
	var failed []widgetFailure
	if dashboards {
		b.WriteString("<h2 class=\"part\">CloudWatch dashboards of the stack</h2>")
		if len(boards) == 0 {
			b.WriteString("<p class=\"note\">The template has no AWS::CloudWatch::Dashboard: add one to the CDK app and it is drawn here.</p>")
		}
	}
	for _, bd := range boards {
		if dashboards {
			fmt.Fprintf(&b, "<h2 data-dashboard=\"%s\">Dashboard %s</h2>", html.EscapeString(bd.LogicalID), html.EscapeString(bd.Name))
		} else {
			fmt.Fprintf(&b, "<h2 data-health=\"%s\">%s</h2>", html.EscapeString(bd.LogicalID), html.EscapeString(strings.ToUpper(bd.Name[:1])+bd.Name[1:]))
		}
		if bd.Err != nil {
			fmt.Fprintf(&b, "<p class=\"error\">%s</p>", html.EscapeString(bd.Err.Error()))
			continue
		}
		b.WriteString("<div class=\"grid\">")
		for i, w := range bd.Widgets {
			out, f := d.renderWidget(reads, v, bd, i, w)
			b.WriteString(out)
			if f != nil {
				failed = append(failed, *f)
			}
		}
		b.WriteString("</div>")
	}
	return b.String(), failed
}

// renderWidget draws one widget from reads; the failure is set when one of
// its reads failed.
func (d *dashboardServer) renderWidget(reads *pageReads, v view, bd board, i int, w widget) (string, *widgetFailure) {
	var body, title string
	var failed []readFailure
	points := 0
	kind := w.Type
	switch w.Type {
	case "metric":
		var p metricProps
		if err := json.Unmarshal(w.Properties, &p); err != nil {
			body = errorNote("properties: " + err.Error())
			break
		}
		rows, err := parseRows(p.Metrics, p.Stat, p.Period)
		if err != nil {
			body = errorNote(err.Error())
			break
		}
		title = p.Title
		series, notes, errs := d.metricSeries(reads, rows, v.from, v.to)
		failed = errs
		if title == "" {
			var labels []string
			for _, s := range series {
				labels = append(labels, s.label)
			}
			title = strings.Join(labels, ", ")
		}
		for _, s := range series {
			points += len(s.points)
		}
		switch p.View {
		case "singleValue", "gauge":
			body = singleValues(series)
		case "bar", "pie":
			body = barChart(series)
		default:
			body = timeSeriesSVG(series, v.from, v.to)
		}
		notes = append(notes, fmt.Sprintf("periods of %ds here", periodOf(rows)))
		body += noteOf(notes, len(failed) > 0)
	case "text":
		var p textProps
		_ = json.Unmarshal(w.Properties, &p)
		body = "<div class=\"md\">" + markdown(p.Markdown) + "</div>"
		if strings.TrimSpace(p.Markdown) != "" {
			points = 1
		}
	case "log":
		var p logProps
		_ = json.Unmarshal(w.Properties, &p)
		title = p.Title
		columns, rows, notes, errs := logTable(reads, p.Query)
		failed = errs
		points = len(rows)
		var lb strings.Builder
		lb.WriteString("<div class=\"logs\"><table class=\"insights\"><tr>")
		for _, c := range columns {
			lb.WriteString("<th>" + html.EscapeString(c) + "</th>")
		}
		lb.WriteString("</tr>")
		for _, r := range rows {
			lb.WriteString("<tr>")
			for _, c := range r {
				lb.WriteString("<td>" + html.EscapeString(truncateString(c, 400)) + "</td>")
			}
			lb.WriteString("</tr>")
		}
		lb.WriteString("</table></div>")
		notes = append([]string{fmt.Sprintf("Logs Insights runs on AWS; here its query is evaluated by the runner over the groups' events: %d rows", len(rows))}, notes...)
		body = lb.String() + noteOf(notes, len(failed) > 0)
	case "alarm":
		var p alarmProps
		_ = json.Unmarshal(w.Properties, &p)
		title = p.Title
		names := make([]string, len(p.Alarms))
		for k, a := range p.Alarms {
			names[k] = a[strings.LastIndex(a, ":")+1:]
		}
		body = "<p class=\"note\">Alarms are evaluated on AWS only: " + html.EscapeString(strings.Join(names, ", ")) + "</p>"
	default:
		body = "<p class=\"note\">" + html.EscapeString(w.Type) + " widgets are not drawn locally.</p>"
	}
	if title == "" {
		title = w.Type
	}
	style := fmt.Sprintf("grid-column:%d / span %d;grid-row:%d / span %d", min(w.X, 23)+1, w.Width, w.Y+1, w.Height)
	out := fmt.Sprintf("<section class=\"widget %s\" data-board=\"%s\" data-kind=\"%s\" data-index=\"%d\" data-title=\"%s\" data-points=\"%d\" data-failed=\"%t\" style=\"%s\"><h3>%s</h3>%s</section>",
		html.EscapeString(kind), html.EscapeString(bd.LogicalID), html.EscapeString(kind), i, html.EscapeString(title), points, len(failed) > 0, style, html.EscapeString(title), body)
	if len(failed) == 0 {
		return out, nil
	}
	return out, &widgetFailure{board: bd.Name, title: title, kind: kind, index: i, errs: failed}
}

// noteOf is a widget's notes, in the error style when a read failed.
func noteOf(notes []string, failed bool) string {
	class := "note"
	if failed {
		class = "note error"
	}
	return "<p class=\"" + class + "\">" + html.EscapeString(strings.Join(notes, " · ")) + "</p>"
}

func periodOf(rows []metricRow) int {
	p := localPeriod
	for _, r := range rows {
		if r.Expression == "" {
			p = min(p, rowPeriod(r))
		}
	}
	return p
}

func errorNote(msg string) string {
	return "<p class=\"error\">" + html.EscapeString(msg) + "</p>"
}

// timeSeriesSVG draws series as lines with a point per period.
func timeSeriesSVG(series []plotSeries, from, to time.Time) string {
	const w, h, left, right, top, bottom = 600.0, 200.0, 48.0, 8.0, 8.0, 20.0
	lo, hi := 0.0, math.Inf(-1)
	for _, s := range series {
		for _, p := range s.points {
			lo, hi = math.Min(lo, p.v), math.Max(hi, p.v)
		}
	}
	if math.IsInf(hi, -1) || hi <= lo {
		hi = lo + 1
	}
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 {
		return left + (w-left-right)*math.Max(0, math.Min(1, t.Sub(from).Seconds()/span))
	}
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-(v-lo)/(hi-lo)) }
	var b strings.Builder
	fmt.Fprintf(&b, "<svg viewBox=\"0 0 %.0f %.0f\" preserveAspectRatio=\"none\" role=\"img\">", w, h)
	for _, f := range []float64{0, 0.5, 1} {
		v := lo + (hi-lo)*f
		fmt.Fprintf(&b, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e9ebed\"/><text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" fill=\"#687078\">%s</text>",
			left, w-right, y(v), y(v), left-4, y(v)+3, formatValue(v))
	}
	for _, f := range []float64{0, 0.5, 1} {
		t := from.Add(time.Duration(f * float64(to.Sub(from))))
		anchor := map[float64]string{0: "start", 0.5: "middle", 1: "end"}[f]
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"%s\" fill=\"#687078\">%s</text>", x(t), h-4, anchor, t.Format("15:04"))
	}
	for _, s := range series {
		if len(s.points) == 0 {
			continue
		}
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.t), y(p.v)))
		}
		fmt.Fprintf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>", html.EscapeString(s.color), strings.Join(pts, " "))
		for _, p := range s.points {
			fmt.Fprintf(&b, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%s %s: %s</title></circle>",
				x(p.t), y(p.v), html.EscapeString(s.color), html.EscapeString(s.label), p.t.Format("15:04"), formatValue(p.v))
		}
	}
	b.WriteString("</svg>")
	b.WriteString(legend(series))
	return b.String()
}

func legend(series []plotSeries) string {
	var b strings.Builder
	b.WriteString("<div class=\"legend\">")
	for _, s := range series {
		last := "no data"
		if n := len(s.points); n > 0 {
			last = formatValue(s.points[n-1].v)
		}
		fmt.Fprintf(&b, "<span><i style=\"background:%s\"></i>%s <b>%s</b></span>", html.EscapeString(s.color), html.EscapeString(s.label), last)
	}
	b.WriteString("</div>")
	return b.String()
}

// singleValues shows each series' latest value.
func singleValues(series []plotSeries) string {
	var b strings.Builder
	b.WriteString("<div class=\"single\">")
	for _, s := range series {
		v := "–"
		if n := len(s.points); n > 0 {
			v = formatValue(s.points[n-1].v)
		}
		fmt.Fprintf(&b, "<div><b>%s</b>%s</div>", v, html.EscapeString(s.label))
	}
	b.WriteString("</div>")
	return b.String()
}

// barChart draws each series' latest value as a horizontal bar.
func barChart(series []plotSeries) string {
	const w, rowH = 600.0, 22.0
	hi := 0.0
	for _, s := range series {
		if n := len(s.points); n > 0 {
			hi = math.Max(hi, s.points[n-1].v)
		}
	}
	if hi <= 0 {
		hi = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<svg viewBox=\"0 0 %.0f %.0f\" role=\"img\">", w, rowH*float64(max(len(series), 1)))
	for i, s := range series {
		v := 0.0
		if n := len(s.points); n > 0 {
			v = s.points[n-1].v
		}
		fmt.Fprintf(&b, "<rect x=\"160\" y=\"%.0f\" width=\"%.1f\" height=\"16\" fill=\"%s\"/><text x=\"156\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">%s</text><text x=\"%.1f\" y=\"%.0f\" font-size=\"11\">%s</text>",
			float64(i)*rowH+2, math.Max(1, (w-220)*v/hi), html.EscapeString(s.color), float64(i)*rowH+14, html.EscapeString(truncateString(s.label, 26)), 164+(w-220)*v/hi, float64(i)*rowH+14, formatValue(v))
	}
	b.WriteString("</svg>")
	return b.String()
}

func truncateString(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// formatValue prints a value compactly (1.2k, 0.35, 12).
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case a == math.Trunc(a):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

var (
	mdLink   = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`)
	mdBold   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdCode   = regexp.MustCompile("`([^`]+)`")
	mdHeader = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)
)

// markdown renders the Markdown of a text widget: headers, paragraphs,
// lists, links, bold and code (escaped first, so the text cannot inject
// markup).
func markdown(src string) string {
	var b strings.Builder
	inList := false
	inline := func(s string) string {
		s = html.EscapeString(s)
		s = mdCode.ReplaceAllString(s, "<code>$1</code>")
		s = mdBold.ReplaceAllString(s, "<b>$1</b>")
		return mdLink.ReplaceAllStringFunc(s, func(m string) string {
			p := mdLink.FindStringSubmatch(m)
			href := html.UnescapeString(p[2])
			if !strings.HasPrefix(href, "http://") && !strings.HasPrefix(href, "https://") && !strings.HasPrefix(href, "#") {
				return p[1]
			}
			return "<a href=\"" + html.EscapeString(href) + "\">" + p[1] + "</a>"
		})
	}
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		isItem := strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ")
		if inList && !isItem {
			b.WriteString("</ul>")
			inList = false
		}
		switch {
		case t == "":
		case isItem:
			if !inList {
				b.WriteString("<ul>")
				inList = true
			}
			b.WriteString("<li>" + inline(t[2:]) + "</li>")
		case mdHeader.MatchString(t):
			m := mdHeader.FindStringSubmatch(t)
			n := min(len(m[1]), 2)
			fmt.Fprintf(&b, "<h%d>%s</h%d>", n, inline(m[2]), n)
		default:
			b.WriteString("<p>" + inline(t) + "</p>")
		}
	}
	if inList {
		b.WriteString("</ul>")
	}
	return b.String()
}

// measures are what the results view can draw as bars, as the aggregates
// they are.
var measures = []struct {
	name string
	agg  agg.Aggregate
}{{"count", agg.Count}, {"sum", agg.Sum}, {"mean", agg.Mean}, {"min", agg.Min}, {"max", agg.Max}, {"distinct", agg.Distinct}}

// computed is the set of aggregates pipeline pl computes.
func computed(pl *Windows) agg.Aggregate {
	if pl.Pipeline.Aggregates == nil {
		return agg.Count
	}
	return pl.Pipeline.Aggregates.Aggregates
}

// measuresOf names the measures of a that the bars can show, count first
// when it is computed; count alone when none is.
func measuresOf(a agg.Aggregate) []string {
	var out []string
	for _, m := range measures {
		if a.Has(m.agg) {
			out = append(out, m.name)
		}
	}
	if len(out) == 0 {
		out = []string{"count"}
	}
	return out
}

// renderResults draws a key's windows as bars, with their revisions, and
// lists their values.
func (d *dashboardServer) renderResults(ctx context.Context, v view) string {
	var b strings.Builder
	pl := d.pipeline(v.query)
	if pl == nil {
		return "<section id=\"results\"><h2>Results</h2><p class=\"note\">The stack has no aggregate function, so no window results.</p></section>"
	}
	keys, truncated, err := d.resultKeys(ctx, pl)
	if err != nil {
		return "<section id=\"results\"><h2>Results</h2>" + errorNote(err.Error()) + "</section>"
	}
	kinds := make([]string, len(pl.Pipeline.Windows))
	for i, w := range pl.Pipeline.Windows {
		kinds[i] = w.ID()
	}
	// A value the page cannot show is replaced, and a note says so: the
	// page must not show another pipeline's or key's windows under the
	// name asked for without a word.
	var notes []string
	if asked := v.query.Get("pipeline"); asked != "" && asked != pl.Pipeline.Name {
		notes = append(notes, fmt.Sprintf("No pipeline %s: showing %s.", strictjson.QuoteCut(asked, maxEchoed), pl.Pipeline.Name))
	}
	kind := v.query.Get("kind")
	if !contains(kinds, kind) {
		if kind != "" {
			notes = append(notes, fmt.Sprintf("Pipeline %s has no window kind %s: showing %s.", pl.Pipeline.Name, strictjson.QuoteCut(kind, maxEchoed), kinds[0]))
		}
		kind = kinds[0]
	}
	offered := measuresOf(computed(pl))
	measure := v.query.Get("measure")
	if !contains(offered, measure) {
		if measure != "" {
			notes = append(notes, fmt.Sprintf("Pipeline %s computes no %s: showing %s.", pl.Pipeline.Name, strictjson.QuoteCut(measure, maxEchoed), offered[0]))
		}
		measure = offered[0]
	}
	hours := defaultResultsHr
	to := d.now().Add(time.Hour)
	from := d.now().Add(-time.Duration(hours) * time.Hour)
	var (
		vs   []state.View
		more bool
	)
	key := v.query.Get("key")
	if key != "" && !contains(keys, key) {
		// The list holds the keys of the first maxKeysScanned items
		// only: the key asked for may have windows all the same.
		if vs, more, err = d.windowsOf(ctx, pl, key, kind, from, to); err != nil {
			return "<section id=\"results\"><h2>Results</h2>" + errorNote(err.Error()) + "</section>"
		}
		if len(vs) > 0 {
			keys = append(slices.Clone(keys), key)
		} else {
			note := fmt.Sprintf("No %s windows of key %s in pipeline %s in the last %d hours (keys are case-sensitive)", kind, strictjson.QuoteCut(key, maxEchoed), pl.Pipeline.Name, hours)
			key = ""
			if len(keys) > 0 {
				key = keys[0] // the first key, as after switching pipelines
				note += ": showing key " + key
			}
			notes = append(notes, note+".")
		}
	} else if key == "" && len(keys) > 0 {
		key = keys[0]
	}
	if key != "" && len(vs) == 0 {
		if vs, more, err = d.windowsOf(ctx, pl, key, kind, from, to); err != nil {
			return "<section id=\"results\"><h2>Results</h2>" + errorNote(err.Error()) + "</section>"
		}
	}
	fmt.Fprintf(&b, "<section id=\"results\" data-pipeline=\"%s\" data-key=\"%s\" data-kind=\"%s\" data-windows=\"%d\" data-more=\"%t\"><h2>Results: pipeline %s, table %s</h2>",
		html.EscapeString(pl.Pipeline.Name), html.EscapeString(key), html.EscapeString(kind), len(vs), more, html.EscapeString(pl.Pipeline.Name), html.EscapeString(pl.Table))
	b.WriteString("<form class=\"controls\" method=\"get\">")
	if r := v.query.Get("range"); r != "" {
		fmt.Fprintf(&b, "<input type=\"hidden\" name=\"range\" value=\"%s\">", html.EscapeString(r))
	}
	names := make([]string, len(d.pipelines))
	for i, w := range d.pipelines {
		names[i] = w.Pipeline.Name
	}
	b.WriteString(selectBox("pipeline", names, pl.Pipeline.Name) + selectBox("key", keys, key) + selectBox("kind", kinds, kind) + selectBox("measure", offered, measure))
	b.WriteString("<button type=\"submit\">show</button>")
	if truncated {
		fmt.Fprintf(&b, "<span class=\"note\">keys from the first %d items of the table</span>", maxKeysScanned)
	}
	b.WriteString("</form>")
	for _, n := range notes {
		b.WriteString("<p class=\"note replaced\">" + html.EscapeString(n) + "</p>")
	}
	if key == "" {
		b.WriteString("<p class=\"note\">No windows yet: send events to ingest.</p></section>")
		return b.String()
	}
	fmt.Fprintf(&b, "<p class=\"note\">%s windows of key %s starting in the last %d hours (and the next hour), by event time; bar = %s; r = revision (0 open, 1 final, 2+ corrected)</p>",
		html.EscapeString(kind), html.EscapeString(key), hours, measure)
	if more {
		// Earlier windows are not read: the page reads at most
		// maxResultWindows of them, however many the key has.
		fmt.Fprintf(&b, "<p class=\"note more\">… and earlier windows not shown: the page reads the latest %d windows of the range (make results with FROM= and TO= reads any part of it)</p>",
			maxResultWindows)
	}
	b.WriteString(windowTable(vs, computed(pl)))
	b.WriteString(windowBars(vs, measure))
	b.WriteString("</section>")
	return b.String()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func selectBox(name string, options []string, selected string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<label>%s <select name=\"%s\" onchange=\"this.form.submit()\">", name, name)
	for _, o := range options {
		sel := ""
		if o == selected {
			sel = " selected"
		}
		// The value attribute, not the text: a browser submits an
		// option's text with its whitespace collapsed, so a key with
		// leading or doubled spaces could not be chosen.
		fmt.Fprintf(&b, "<option value=\"%s\"%s>%s</option>", html.EscapeString(o), sel, html.EscapeString(o))
	}
	b.WriteString("</select></label>")
	return b.String()
}

func measureOf(v state.View, measure string) float64 {
	r := v.Result
	switch measure {
	case "sum":
		return r.Sum
	case "mean":
		return r.Mean
	case "min":
		return r.Min
	case "max":
		return r.Max
	case "distinct":
		return float64(r.Distinct)
	}
	return float64(r.Count)
}

// windowClock is a window bound's time of day as the results table and
// the bars' titles show it: to the second, with the fraction when it has
// one (windows under a second, a session's bounds), so that two windows
// of one second never read alike.
func windowClock(t time.Time) string { return t.Format("15:04:05.999999999") }

// barLabel is the time under a bar: to the minute when the window starts
// on one, else as windowClock.
func barLabel(t time.Time) string {
	if t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format("15:04")
	}
	return windowClock(t)
}

// windowBars draws one bar per window: open grey, final blue, corrected
// orange, with the revision above.
func windowBars(vs []state.View, measure string) string {
	const h, top, bottom = 180.0, 16.0, 18.0
	n := max(len(vs), 1)
	barW := math.Min(60, 560/float64(n))
	w := math.Max(600, float64(n)*barW+40)
	hi := 0.0
	for _, v := range vs {
		hi = math.Max(hi, measureOf(v, measure))
	}
	if hi <= 0 {
		hi = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<svg class=\"bars\" viewBox=\"0 0 %.0f %.0f\" style=\"max-width:%.0fpx;background:#fff;border:1px solid #d5dbdb\" role=\"img\">", w, h, w)
	for i, v := range vs {
		val := measureOf(v, measure)
		bh := (h - top - bottom) * val / hi
		x := 20 + float64(i)*barW
		color, st := "#879596", "open"
		switch {
		case v.Final && v.Revision >= 2:
			color, st = "#ec7211", "corrected"
		case v.Final:
			color, st = "#0073bb", "final"
		}
		fmt.Fprintf(&b, "<g class=\"window\" data-start=\"%s\" data-count=\"%d\" data-revision=\"%d\" data-state=\"%s\">", v.Window.Start.UTC().Format(time.RFC3339Nano), v.Result.Count, v.Revision, st)
		fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s–%s %s %s: %s</title></rect>",
			x+2, h-bottom-bh, barW-4, math.Max(bh, 1), color, windowClock(v.Window.Start), windowClock(v.Window.End), st, measure, formatValue(val))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">r%d</text>", x+barW/2, h-bottom-bh-3, v.Revision)
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"9\" text-anchor=\"middle\" fill=\"#687078\">%s</text></g>", x+barW/2, h-5, barLabel(v.Window.Start))
	}
	b.WriteString("</svg>")
	return b.String()
}

// notComputed is what a cell of the results table shows for a value its
// pipeline does not compute (or cannot, for a window without values: the
// minimum of nothing), so that it is not read as 0.
const notComputed = "–"

// windowTable lists each window's values: those of the aggregates in a,
// and notComputed for the others.
func windowTable(vs []state.View, a agg.Aggregate) string {
	qnames := map[string]bool{}
	for _, v := range vs {
		for q := range v.Result.Quantiles {
			qnames[q] = true
		}
	}
	var qs []string
	for q := range qnames {
		qs = append(qs, q)
	}
	sortQuantiles(qs)
	var b strings.Builder
	fmt.Fprintf(&b, "<table class=\"windows\" data-aggregates=\"%s\"><tr><th>window (event time)</th><th>state</th><th>revision</th><th>count</th><th>sum</th><th>mean</th><th>min</th><th>max</th>", html.EscapeString(a.String()))
	for _, q := range qs {
		b.WriteString("<th>" + html.EscapeString(q) + "</th>")
	}
	b.WriteString("<th>distinct</th></tr>")
	for _, v := range vs {
		st := "open"
		if v.Final {
			st = "final"
		}
		r := v.Result
		// min, max, mean and quantiles have no value in a window no record
		// reached (agg.Result leaves them 0); known only when count is kept.
		empty := a.Has(agg.Count) && r.Count == 0
		cell := func(has bool, val float64) string {
			if !has {
				return notComputed
			}
			return formatValue(val)
		}
		count := notComputed
		if a.Has(agg.Count) {
			count = strconv.FormatUint(r.Count, 10)
		}
		fmt.Fprintf(&b, "<tr class=\"window\" data-start=\"%s\"><td>%s–%s</td><td>%s</td><td>%d</td><td class=\"count\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>",
			v.Window.Start.UTC().Format(time.RFC3339Nano), windowClock(v.Window.Start), windowClock(v.Window.End), st, v.Revision, count,
			cell(a.Has(agg.Sum), r.Sum), cell(a.Has(agg.Mean) && !empty, r.Mean), cell(a.Has(agg.Min) && !empty, r.Min), cell(a.Has(agg.Max) && !empty, r.Max))
		for _, q := range qs {
			qv, ok := r.Quantiles[q]
			b.WriteString("<td>" + cell(a.Has(agg.Quantiles) && ok, qv) + "</td>")
		}
		distinct := notComputed
		if a.Has(agg.Distinct) {
			distinct = strconv.FormatUint(r.Distinct, 10)
		}
		fmt.Fprintf(&b, "<td>%s</td></tr>", distinct)
	}
	b.WriteString("</table>")
	return b.String()
}

// sortQuantiles orders "p50", "p99", "p99.9" by their number.
func sortQuantiles(qs []string) {
	num := func(q string) float64 { f, _ := strconv.ParseFloat(strings.TrimPrefix(q, "p"), 64); return f }
	for i := 1; i < len(qs); i++ {
		for j := i; j > 0 && num(qs[j]) < num(qs[j-1]); j-- {
			qs[j], qs[j-1] = qs[j-1], qs[j]
		}
	}
}
