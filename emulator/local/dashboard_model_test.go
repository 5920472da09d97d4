package local

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

func TestParseRows(t *testing.T) {
	tests := []struct {
		name, metrics string
		want          []string // id namespace name dims stat label visible
		err           string
	}{
		{
			name:    "dot repeats the previous row's value at its position",
			metrics: `[["Tributary","RecordsIn","Function","aggregate"],[".","WriteRequests",".","."]]`,
			want:    []string{"m1 Tributary RecordsIn Function=aggregate Sum RecordsIn aggregate true", "m2 Tributary WriteRequests Function=aggregate Sum WriteRequests aggregate true"},
		},
		{
			name:    "ellipsis fills in what the values after it leave",
			metrics: `[["AWS/Lambda","Duration","FunctionName","a",{"stat":"p99"}],["...","b"],["...",{"stat":"Maximum","label":"max"}]]`,
			want: []string{"m1 AWS/Lambda Duration FunctionName=a p99 Duration a true", "m2 AWS/Lambda Duration FunctionName=b Sum Duration b true",
				"m3 AWS/Lambda Duration FunctionName=b Maximum max true"},
		},
		{
			name:    "expressions, ids, hidden rows",
			metrics: `[["T","W","F","x",{"id":"w","visible":false}],[{"expression":"100*w","label":"pct"}]]`,
			want:    []string{"w T W F=x Sum W x false", "e2 expr:100*w Sum pct true"},
		},
		{name: "odd dimension list", metrics: `[["T","W","F"]]`, err: "want [Namespace"},
		{name: "options not last", metrics: `[["T",{"stat":"Sum"},"W"]]`, err: "options object must come last"},
		{name: "a number in a row", metrics: `[["T","W",3,"x"]]`, err: "neither a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rows [][]any
			if err := json.Unmarshal([]byte(tc.metrics), &rows); err != nil {
				t.Fatal(err)
			}
			got, err := parseRows(rows, "Sum", 60)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range got {
				var dims []string
				for _, d := range r.Dims {
					dims = append(dims, d[0]+"="+d[1])
				}
				what := r.Namespace + " " + r.Name + " " + strings.Join(dims, ",")
				if r.Expression != "" {
					what = "expr:" + r.Expression
				}
				out = append(out, strings.Join([]string{r.ID, what, r.Stat, r.label(), map[bool]string{true: "true", false: "false"}[r.Visible]}, " "))
			}
			if strings.Join(out, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(out, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestEvalExpression(t *testing.T) {
	byID := map[string]timeSeries{
		"w": {0: 30, 60: 10},
		"r": {0: 100, 60: 20, 120: 5},
	}
	buckets := []int64{0, 60, 120}
	tests := []struct {
		expr string
		want timeSeries
		err  string
	}{
		{"100*w/r", timeSeries{0: 30, 60: 50}, ""},
		{"r - w + 1", timeSeries{0: 71, 60: 11}, ""},
		{"-(w)", timeSeries{0: -30, 60: -10}, ""},
		{"FILL(w, 0)", timeSeries{0: 30, 60: 10, 120: 0}, ""},
		{"SUM([w, r])", timeSeries{0: 130, 60: 30, 120: 5}, ""},
		{"MAX([w, r])", timeSeries{0: 100, 60: 20, 120: 5}, ""},
		{"7", timeSeries{0: 7, 60: 7, 120: 7}, ""},
		{"w/0", timeSeries{}, ""},
		{"ANOMALY_DETECTION_BAND(w)", nil, "not evaluated locally"},
		{"m9*2", nil, `no metric or expression with id "m9"`},
		{"(w", nil, "missing )"},
	}
	for _, tc := range tests {
		got, err := evalExpression(tc.expr, byID, buckets)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if math.Abs(got[k]-v) > 1e-9 {
				t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
			}
		}
	}
}

func TestPercentileSeries(t *testing.T) {
	at := time.Unix(600, 0)
	var samples []cloudwatchlocal.Sample
	for i := 1; i <= 100; i++ {
		samples = append(samples, cloudwatchlocal.Sample{At: at.Add(time.Duration(i%50) * time.Second), Value: float64(i), Count: 1})
	}
	samples = append(samples, cloudwatchlocal.Sample{At: at.Add(70 * time.Second), Value: 5, Count: 3})
	got := percentileSeries(samples, 0.99, 60)
	if got[600] != 99 || got[660] != 5 {
		t.Errorf("p99 by minute = %v, want 99 in the first minute and 5 in the second", got)
	}
	if p50 := percentileSeries(samples, 0.5, 60); p50[600] != 50 {
		t.Errorf("p50 = %v, want 50", p50)
	}
}

func TestMarkdownEscapesAndRenders(t *testing.T) {
	got := markdown("# Title\nSome **bold** and `code`.\n- one\n- two [docs](https://example.com) [bad](javascript:alert(1))\n<script>x</script>")
	for _, want := range []string{"<h1>Title</h1>", "<b>bold</b>", "<code>code</code>", "<ul><li>one</li><li>two <a href=\"https://example.com\">docs</a> bad)</li></ul>", "&lt;script&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown gave %s; want %s in it", got, want)
		}
	}
	if strings.Contains(got, "javascript:") || strings.Contains(got, "<script>") {
		t.Errorf("markdown let markup through: %s", got)
	}
}

func TestInsightsQueries(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	events := []logLine{
		{at, "s1", "START RequestId: 1 Version: $LATEST"},
		{at.Add(time.Second), "s1", `{"msg":"window result","pipeline":"pageviews","window":"tumbling:1m0s","key":"a","countDelta":3,"result":{"count":3}}`},
		{at.Add(2 * time.Second), "s1", `{"msg":"window result","pipeline":"pageviews","window":"tumbling:1m0s","key":"b","countDelta":5,"result":{"count":5}}`},
		{at.Add(3 * time.Second), "s2", `{"msg":"window result","pipeline":"pageviews","window":"tumbling:1m0s","key":"a","countDelta":1,"result":{"count":4}}`},
		{at.Add(4 * time.Second), "s2", `{"msg":"window result","pipeline":"other","window":"tumbling:1m0s","key":"c","countDelta":9}`},
		{at.Add(5 * time.Second), "s2", "REPORT RequestId: 1\tDuration: 3.00 ms"},
	}
	tests := []struct {
		name, query string
		want        string // columns, then rows, joined
		err         string
	}{
		{"stats by key, sorted",
			`SOURCE '/aws/lambda/a' | SOURCE '/aws/lambda/b' | filter msg = "window result" and pipeline = "pageviews" and window = "tumbling:1m0s"
| stats sum(countDelta) as events, count(*) as results by key
| sort events desc
| limit 20`,
			"key,events,results|b,5,1|a,4,2", ""},
		{"fields of the matching lines, newest first, nested members",
			`SOURCE 'g' | fields @timestamp, key, result.count | filter msg = "window result" and pipeline != "other" | sort @timestamp desc | limit 2`,
			"@timestamp,key,result.count|2026-12-01 12:00:03.000,a,4|2026-12-01 12:00:02.000,b,5", ""},
		{"@message like, default columns and order",
			`SOURCE 'g' | filter @message like /REPORT|START/`,
			"@timestamp,@message|2026-12-01 12:00:05.000,REPORT RequestId: 1\tDuration: 3.00 ms|2026-12-01 12:00:00.000,START RequestId: 1 Version: $LATEST", ""},
		{"a number compares as a number", `SOURCE 'g' | filter countDelta = 9 | fields key`, "key|c", ""},
		{"ispresent", `SOURCE 'g' | filter ispresent(result.count) | stats count(*) as n, max(result.count) as top`, "n,top|3,5", ""},
		{"unsupported command", `SOURCE 'g' | parse @message "* *" as a, b`, "", "command parse is not evaluated locally"},
		{"unsupported condition", `SOURCE 'g' | filter strlen(key) > 3`, "", "is not evaluated locally"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := parseInsights(tc.query)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cols, rows := q.run(events)
			parts := []string{strings.Join(cols, ",")}
			for _, r := range rows {
				parts = append(parts, strings.Join(r, ","))
			}
			if got := strings.Join(parts, "|"); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if got := insightsSources("SOURCE '/aws/lambda/a' | SOURCE '/aws/lambda/b' | fields @message"); strings.Join(got, ",") != "/aws/lambda/a,/aws/lambda/b" {
		t.Errorf("sources %v", got)
	}
}

func TestIteratorAge(t *testing.T) {
	now := time.Unix(1_800_000_010, 0)
	tests := []struct {
		payload string
		want    time.Duration
		ok      bool
	}{
		{`{"Records":[{"kinesis":{"approximateArrivalTimestamp":1800000000.5}},{"kinesis":{"approximateArrivalTimestamp":1800000008.25}}]}`, 1750 * time.Millisecond, true},
		{`{"Records":[{"dynamodb":{"ApproximateCreationDateTime":1800000004}}]}`, 6 * time.Second, true},
		{`{"Records":[{"body":"sqs"}]}`, 0, false},
		{`{"rawPath":"/"}`, 0, false},
	}
	for _, tc := range tests {
		got, ok := iteratorAge([]byte(tc.payload), now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("iteratorAge(%s) = %v %v, want %v %v", tc.payload, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLocalizeNames(t *testing.T) {
	v := &invokeServer{aliases: map[string]resourceAlias{
		"table/profiles":          {kind: "table", physical: "Tributary-ProfilesX1", arn: "arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-ProfilesX1"},
		"queue/tributary-tasks":   {kind: "queue", physical: "Tributary-TasksY2", url: "http://q/Tributary-TasksY2", arn: "arn:aws:sqs:us-east-1:123456789012:Tributary-TasksY2"},
		"stream/tributary-events": {kind: "stream", physical: "Tributary-EventsZ3", arn: "arn:aws:kinesis:us-east-1:123456789012:stream/Tributary-EventsZ3"},
	}}
	tests := []struct{ in, want string }{
		{`{"table":"profiles"}`, `{"table":"Tributary-ProfilesX1"}`},
		{`{"table":"Tributary-ProfilesX1"}`, `{"table":"Tributary-ProfilesX1"}`},
		{`{"key":"profiles","data":{"page":"profiles"}}`, `{"key":"profiles","data":{"page":"profiles"}}`},
		{`{"Records":[{"eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:Tributary-Tasks","body":"x"}]}`, `{"Records":[{"body":"x","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:Tributary-TasksY2"}]}`},
		{`{"Records":[{"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000"}]}`, `{"Records":[{"eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/Tributary-ProfilesX1/stream/2026-11-29T00:00:00.000"}]}`},
		{`{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/Tributary-Events"}]}`, `{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/Tributary-EventsZ3"}]}`},
		{`{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/other"}]}`, `{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/other"}]}`},
	}
	for _, tc := range tests {
		got, _ := v.localizeNames([]byte(tc.in))
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal([]byte(tc.want), &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("localizeNames(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestInvokeNames(t *testing.T) {
	v := &invokeServer{functionIndex: functionIndex{names: map[string]string{"ingest": "ingest", "IngestFn1": "ingest", "Tributary-IngestFn1": "ingest",
		"arn:aws:lambda:us-east-1:123456789012:function:Tributary-IngestFn1": "ingest"}, known: []string{"ingest"}, where: "the running topology"}}
	for _, n := range []string{"ingest", "IngestFn1", "Tributary-IngestFn1", "arn:aws:lambda:us-east-1:123456789012:function:Tributary-IngestFn1",
		"123456789012:function:Tributary-IngestFn1", "ingest:$LATEST", "arn:aws:lambda:us-east-1:123456789012:function:Tributary-IngestFn1:$LATEST"} {
		if b, err := v.binaryFor(n, ""); err != nil || b != "ingest" {
			t.Errorf("binaryFor(%q) = %q, %v; want ingest", n, b, err)
		}
	}
	if _, err := v.binaryFor("ingest", "prod"); err == nil || !strings.Contains(err.Error(), "$LATEST") {
		t.Errorf("an alias: %v, want only $LATEST", err)
	}
	if _, err := v.binaryFor("nope", ""); err == nil || !strings.HasPrefix(err.Error(), `no function "nope" in the running topology; the functions are: ingest (or their`) {
		t.Errorf("unknown: %v, want the local functions listed", err)
	}
	// A name pasted by mistake is repeated bounded, control characters escaped.
	if _, err := v.binaryFor("\x1b[2J"+strings.Repeat("n", 10_000), ""); err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), `"\x1b[2Jnnn`) {
		t.Errorf("a long name: %d bytes, %.120q; want it cut and escaped", len(err.Error()), err)
	}
	// A binary run by one function per pipeline: the error names them.
	v.several = map[string][]string{"aggregate": {"aggregate-checkouts", "aggregate-pageviews"}}
	v.names["aggregate-pageviews"] = "aggregate-pageviews"
	if b, err := v.binaryFor("aggregate-pageviews", ""); err != nil || b != "aggregate-pageviews" {
		t.Errorf("binaryFor(aggregate-pageviews) = %q, %v", b, err)
	}
	if _, err := v.binaryFor("aggregate", ""); err == nil || !strings.Contains(err.Error(), "name one of aggregate-checkouts, aggregate-pageviews") {
		t.Errorf("a binary of several functions: %v, want them named", err)
	}
}

// TestSubSecondWindowsReadApart: hopping windows of 500 ms advancing by
// 250 ms start four to a second; the results table, the bars' titles and
// labels and the data-start attributes give each its own time, with the
// fraction, where they all read 10:30:00 before. Windows on a minute keep
// their short label.
func TestSubSecondWindowsReadApart(t *testing.T) {
	base := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	var vs []state.View
	for i := range 4 {
		start := base.Add(time.Duration(i) * 250 * time.Millisecond)
		vs = append(vs, state.View{Window: window.Window{Start: start, End: start.Add(500 * time.Millisecond)}, Revision: 1, Result: agg.Result{Count: uint64(i + 1)}})
	}
	table, bars := windowTable(vs, agg.Count), windowBars(vs, "count")
	for _, want := range []string{
		`data-start="2026-12-02T10:30:00Z"`, `data-start="2026-12-02T10:30:00.25Z"`, `data-start="2026-12-02T10:30:00.5Z"`, `data-start="2026-12-02T10:30:00.75Z"`,
		"<td>10:30:00.25–10:30:00.75</td>", "<td>10:30:00.75–10:30:01.25</td>",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("results table lacks %s:\n%s", want, table)
		}
	}
	for _, want := range []string{
		"<title>10:30:00.5–10:30:01 open count: 3</title>", ">10:30:00.25</text>", ">10:30</text>", `data-start="2026-12-02T10:30:00.75Z"`,
	} {
		if !strings.Contains(bars, want) {
			t.Errorf("bars lack %s:\n%s", want, bars)
		}
	}
}
