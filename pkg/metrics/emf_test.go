package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 11, 29, 10, 41, 7, 250e6, time.UTC) // 1795948867250 ms since the epoch

func TestFlushWritesOneEMFLine(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "aggregate").WithClock(func() time.Time { return at })
	l.Add("RecordsIn", Count, 3)
	l.Add("PoisonRecords", Count, 0)
	l.Add("RecordsIn", Count, 2)
	l.Observe("BatchLatency", Milliseconds, 12.5)
	l.Observe("BatchLatency", Milliseconds, 7)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"_aws":{"Timestamp":1795948867250,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn","Unit":"Count"},{"Name":"PoisonRecords","Unit":"Count"},{"Name":"BatchLatency","Unit":"Milliseconds"}]}]},"Function":"aggregate","RecordsIn":5,"PoisonRecords":0,"BatchLatency":[12.5,7]}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
	// It is one valid JSON object whose members the spec requires.
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}

	// Flush starts afresh: nothing collected, nothing written.
	out.Reset()
	if err := l.Flush(); err != nil || out.Len() != 0 {
		t.Errorf("second Flush wrote %q, %v", out.String(), err)
	}
}

func TestFlushSplitsMoreThan100Values(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "ingest").WithClock(func() time.Time { return at })
	l.Add("Requests", Count, 1)
	for i := range 150 {
		l.Observe("Latency", Milliseconds, float64(i))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), out.String())
	}
	var first, second struct {
		Requests *float64
		Latency  []float64
	}
	_ = json.Unmarshal([]byte(lines[0]), &first)
	_ = json.Unmarshal([]byte(lines[1]), &second)
	if first.Requests == nil || *first.Requests != 1 || len(first.Latency) != 100 {
		t.Errorf("first line: %s", lines[0])
	}
	if second.Requests != nil || len(second.Latency) != 50 || second.Latency[0] != 100 {
		t.Errorf("second line: %s", lines[1])
	}
	if strings.Contains(lines[1], `"Name":"Requests"`) {
		t.Errorf("second line declares a metric it has no value for: %s", lines[1])
	}
}

func TestFlushRejectsNonFinite(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "ingest").WithClock(func() time.Time { return at })
	l.Add("Good", Count, 1)
	l.Observe("Bad", Milliseconds, math.NaN())
	if err := l.Flush(); err == nil || !strings.Contains(err.Error(), "Bad") {
		t.Errorf("Flush error = %v, want one naming Bad", err)
	}
	if !strings.Contains(out.String(), `"Good":1`) || strings.Contains(out.String(), "Bad") {
		t.Errorf("output %q", out.String())
	}
}

func TestNilLoggerIsANoOp(t *testing.T) {
	var l *Logger
	l.Add("X", Count, 1)
	l.Observe("Y", Count, 1)
	if err := l.Flush(); err != nil {
		t.Error(err)
	}
}

func TestWithDimensionWritesOneSetWithFunction(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "aggregate", WithDimension("Pipeline", "checkouts")).WithClock(func() time.Time { return at })
	l.Add("RecordsIn", Count, 4)
	l.Add("Pipeline", Count, 1) // a metric cannot shadow a dimension
	l.Observe("WatermarkLagMs", Milliseconds, 250)
	if err := l.Flush(); err == nil || !strings.Contains(err.Error(), `"Pipeline"`) {
		t.Errorf("Flush error = %v, want one refusing the metric named Pipeline", err)
	}
	want := `{"_aws":{"Timestamp":1795948867250,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function","Pipeline"]],"Metrics":[{"Name":"RecordsIn","Unit":"Count"},{"Name":"WatermarkLagMs","Unit":"Milliseconds"}]}]},"Function":"aggregate","Pipeline":"checkouts","RecordsIn":4,"WatermarkLagMs":250}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
	var doc struct {
		AWS struct {
			CloudWatchMetrics []struct{ Dimensions [][]string }
		} `json:"_aws"`
		Function, Pipeline string
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	// Every dimension a set names is a member of the document, as EMF requires.
	for _, set := range doc.AWS.CloudWatchMetrics[0].Dimensions {
		for _, d := range set {
			if !strings.Contains(out.String(), `"`+d+`":"`) {
				t.Errorf("dimension %s has no value in the document", d)
			}
		}
	}
	if doc.Function != "aggregate" || doc.Pipeline != "checkouts" {
		t.Errorf("Function=%q Pipeline=%q", doc.Function, doc.Pipeline)
	}
}

func TestWithDimensionIgnoresReservedNames(t *testing.T) {
	var a, b bytes.Buffer
	plain := New(&a, "ingest").WithClock(func() time.Time { return at })
	plain.Add("Requests", Count, 1)
	_ = plain.Flush()
	odd := New(&b, "ingest", WithDimension("Function", "x"), WithDimension("", "y"), WithDimension("_aws", "z")).WithClock(func() time.Time { return at })
	odd.Add("Requests", Count, 1)
	_ = odd.Flush()
	if a.String() != b.String() {
		t.Errorf("reserved dimension names changed the output:\n%s\n%s", a.String(), b.String())
	}
}
