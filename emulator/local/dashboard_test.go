package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/headless"
	"github.com/tributary-dev/tributary/internal/headless/devtools"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// fixtureBoard is the logical id of the dashboard the test adds to the
// synthesized template.
const fixtureBoard = "LocalTestDashboard"

// withFixtureDashboard writes a copy of the synthesized template with one
// more AWS::CloudWatch::Dashboard, whose body is an Fn::Join of strings and
// references to the stack's own resources, as the CDK writes one: metric
// widgets on the Tributary namespace (RecordsIn, WriteRequests by
// Function and Pipeline), on AWS/Lambda (Invocations and p99 Duration by the aggregate
// function's name), a math expression, a single value of the Tasks DLQ's
// depth (AWS/SQS), a text widget and a log widget.
func withFixtureDashboard(t *testing.T, tpl string) string {
	t.Helper()
	raw, err := os.ReadFile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	res := doc["Resources"].(map[string]any)
	var aggregate, logGroup, dlq any
	for id, r := range res {
		r := r.(map[string]any)
		meta, _ := r["Metadata"].(map[string]any)
		switch {
		case r["Type"] == "AWS::Lambda::Function" && meta["tributary:function"] == "aggregate" && (meta["tributary:pipeline"] == nil || meta["tributary:pipeline"] == "pageviews"):
			aggregate = map[string]any{"Ref": id}
			props := r["Properties"].(map[string]any)
			if lc, ok := props["LoggingConfig"].(map[string]any); ok {
				logGroup = lc["LogGroup"]
			}
		case r["Type"] == "AWS::SQS::Queue" && strings.HasSuffix(fmt.Sprint(meta["aws:cdk:path"]), "/TasksDlq/Resource"):
			dlq = map[string]any{"Fn::GetAtt": []any{id, "QueueName"}}
		}
	}
	if aggregate == nil || dlq == nil {
		t.Fatalf("the template lacks the aggregate function or the TasksDlq queue")
	}
	if logGroup == nil {
		logGroup = map[string]any{"Fn::Join": []any{"", []any{"/aws/lambda/", aggregate}}}
	}
	parts := []any{`{"widgets":[`,
		`{"type":"metric","x":0,"y":0,"width":12,"height":6,"properties":{"title":"Aggregate: records in and writes","region":"`, map[string]any{"Ref": "AWS::Region"}, `","view":"timeSeries","stat":"Sum","period":60,"metrics":[["Tributary","RecordsIn","Function","aggregate","Pipeline","pageviews"],[".","WriteRequests",".",".",".","."]]}},`,
		`{"type":"metric","x":12,"y":0,"width":12,"height":6,"properties":{"title":"Aggregate invocations and p99 duration","view":"timeSeries","period":60,"metrics":[["AWS/Lambda","Invocations","FunctionName","`, aggregate, `",{"stat":"Sum"}],[".","Duration",".",".",{"stat":"p99","label":"Duration p99"}],["...",{"stat":"Maximum","label":"Duration max"}]]}},`,
		`{"type":"metric","x":0,"y":6,"width":12,"height":6,"properties":{"title":"Writes per 100 records","view":"timeSeries","stat":"Sum","period":60,"metrics":[["Tributary","WriteRequests","Function","aggregate","Pipeline","pageviews",{"id":"w","visible":false}],[".","RecordsIn",".",".",".",".",{"id":"r","visible":false}],[{"expression":"100*w/r","label":"writes per 100 records","id":"e1"}]]}},`,
		`{"type":"metric","x":12,"y":6,"width":6,"height":6,"properties":{"title":"Tasks DLQ depth","view":"singleValue","stat":"Maximum","period":60,"metrics":[["AWS/SQS","ApproximateNumberOfMessagesVisible","QueueName","`, dlq, `"]]}},`,
		`{"type":"text","x":18,"y":6,"width":6,"height":6,"properties":{"markdown":"# Tributary locally\nThe **stack's own** dashboard, drawn from the stand-in."}},`,
		`{"type":"log","x":0,"y":12,"width":24,"height":6,"properties":{"title":"Aggregate reports","view":"table","query":"SOURCE '`, logGroup, `' | fields @timestamp, @message | filter @message like /REPORT/ | sort @timestamp desc | limit 5"}}`,
		`]}`}
	res[fixtureBoard] = map[string]any{"Type": "AWS::CloudWatch::Dashboard", "Properties": map[string]any{
		"DashboardName": "tributary-local-test",
		"DashboardBody": map[string]any{"Fn::Join": []any{"", parts}},
	}}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Tributary.template.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// widgetState is what the page shows of one widget.
type widgetState struct {
	Board, Kind, Title, Text string
	Points                   int
}

// pageState reads the widgets and the results view from the live page.
type pageState struct {
	Refreshes int
	Widgets   []widgetState
	Key       string
	Rows      [][]string // the results table: start, state, revision, count, ...
	Bars      []map[string]string
}

const readPage = `(() => {
  const ws = Array.from(document.querySelectorAll('section.widget')).map(s => ({
    Board: s.dataset.board, Kind: s.dataset.kind, Title: s.dataset.title,
    Points: Number(s.dataset.points), Text: s.innerText }));
  const res = document.getElementById('results');
  const rows = Array.from(document.querySelectorAll('#results tr.window')).map(tr =>
    [tr.dataset.start].concat(Array.from(tr.querySelectorAll('td')).map(td => td.innerText)));
  const bars = Array.from(document.querySelectorAll('#results g.window')).map(g => ({
    start: g.dataset.start, count: g.dataset.count, revision: g.dataset.revision, state: g.dataset.state }));
  return JSON.stringify({Refreshes: Number(document.body.dataset.refreshes), Widgets: ws,
    Key: res ? res.dataset.key : '', Rows: rows, Bars: bars});
})()`

// TestDashboardInABrowser runs the topology with a dashboard in its
// template, sends sample traffic, and loads the local dashboard page in
// headless chromium: every widget of the dashboard shows data points (text:
// its text; log: matching lines), the page refreshes on its own, the
// results view shows the windows of a key with the counts sent, and the
// dashboard check make local runs passes.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	_, tpl, bin := paths(t)
	if _, err := headless.Path(); err != nil {
		testtools.Missing(t, err.Error()+"; `make deps-browser` could not install it here")
	}
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template: withFixtureDashboard(t, tpl), Functions: bin, Endpoint: srv.Endpoint(), Progress: &progress,
		LambdaPort: -1, QueueMetricsEvery: time.Second,
	})
	if err != nil {
		t.Fatalf("local.Up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() { _ = stack.Close() })
	if stack.DashboardURL() == "" {
		t.Fatal("no dashboard served")
	}

	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	w, err := stack.FindPipeline("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	evs, want := local.Traffic{Keys: 3, Minutes: 2, Max: 9, Seed: 11, Now: now}.Generate()
	if _, err := local.Send(ctx, stack.URL("ingest"), evs, 50, io.Discard); err != nil {
		t.Fatal(err)
	}
	from, to := now.Truncate(time.Minute).Add(-4*time.Minute), now.Add(time.Hour)
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := stack.FlushLogs(ctx); err != nil {
		t.Fatal(err)
	}
	key := want.Keys()[1]

	bctx, stop, err := devtools.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := chromedp.Do(bctx, chromedp.Navigate(stack.DashboardURL()+"?pipeline="+w.Pipeline.Name+"&key="+key), chromedp.WaitVisible(chromedp.CSS("#results"))); err != nil {
		t.Fatal(err)
	}
	// The page refreshes itself: wait until every widget of the dashboard
	// shows data (metrics arrive as functions flush and queues are sampled).
	var st pageState
	deadline := time.Now().Add(90 * time.Second)
	for {
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](readPage))
		if err != nil {
			t.Fatal(err)
		}
		st = pageState{}
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			t.Fatal(err)
		}
		if empty := emptyWidgets(st); st.Refreshes > 0 && len(empty) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after %d refreshes, widgets without data: %v\n(all: %+v)", st.Refreshes, empty, st.Widgets)
		}
		time.Sleep(time.Second)
	}
	var fixture []widgetState
	for _, wd := range st.Widgets {
		if wd.Board == fixtureBoard {
			fixture = append(fixture, wd)
		}
	}
	if len(fixture) != 6 {
		t.Fatalf("the page shows %d widgets of %s, want the body's 6: %+v", len(fixture), fixtureBoard, st.Widgets)
	}
	for _, wd := range fixture {
		switch {
		case wd.Kind == "text" && !strings.Contains(wd.Text, "Tributary locally"):
			t.Errorf("text widget shows %q, want its markdown", wd.Text)
		case wd.Kind == "log" && !strings.Contains(wd.Text, "REPORT"):
			t.Errorf("log widget shows %q, want aggregate's REPORT lines", wd.Text)
		case wd.Title == "Writes per 100 records" && !strings.Contains(wd.Text, "writes per 100 records"):
			t.Errorf("expression widget legend %q lacks its label", wd.Text)
		case wd.Title == "Aggregate invocations and p99 duration" && (!strings.Contains(wd.Text, "Duration p99") || !strings.Contains(wd.Text, "Duration max")):
			t.Errorf("the p99 series or the \"...\" row is missing: %q", wd.Text)
		}
	}

	// The results view: the key's windows with the counts sent.
	if st.Key != key {
		t.Fatalf("results view shows key %q, want %q", st.Key, key)
	}
	got := map[string]int{}
	for _, r := range st.Rows {
		if len(r) < 5 {
			t.Fatalf("results row %v", r)
		}
		n, _ := strconv.Atoi(r[4])
		got[r[0]] = n
	}
	for k, n := range want {
		if k.Key == key && got[k.Window] != n {
			t.Errorf("results view: window %s of %s shows count %d, sent %d (rows %v)", k.Window, key, got[k.Window], n, st.Rows)
		}
	}
	if len(st.Bars) != len(st.Rows) || len(st.Bars) == 0 {
		t.Errorf("results view: %d bars for %d windows", len(st.Bars), len(st.Rows))
	}

	// What make local checks before its screenshot: every widget of the
	// page (the health charts, the template's dashboards and the fixture)
	// reads its data from the stand-in.
	var checked bytes.Buffer
	if err := stack.CheckDashboards(ctx, &checked); err != nil {
		t.Fatalf("the dashboard check: %v", err)
	}
	t.Log(strings.TrimSpace(checked.String()))
	if !strings.Contains(checked.String(), "widgets") {
		t.Errorf("the dashboard check printed %q, want how many widgets it read", checked.String())
	}

	// What make local saves: a PNG of the page.
	png := filepath.Join(t.TempDir(), "dashboard.png")
	if keep := os.Getenv("TRIBUTARY_TEST_SCREENSHOT"); keep != "" {
		png = keep // to look at the page the test saw
	}
	if err := headless.Screenshot(ctx, stack.DashboardURL(), png, 1400, stack.DashboardHeight()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("screenshot %s is not a PNG: %v", png, errors.Join(err))
	}
}

// emptyWidgets lists the fixture dashboard's widgets that show no data yet.
func emptyWidgets(st pageState) []string {
	var out []string
	n := 0
	for _, w := range st.Widgets {
		if w.Board != fixtureBoard {
			continue
		}
		n++
		if w.Points == 0 {
			out = append(out, w.Kind+" "+w.Title)
		}
	}
	if n == 0 {
		out = append(out, "(no widget of "+fixtureBoard+" on the page)")
	}
	return out
}
