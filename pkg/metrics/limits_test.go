package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// emfDoc is what a test reads back of one EMF line.
type emfDoc struct {
	AWS struct {
		CloudWatchMetrics []struct {
			Dimensions [][]string
			Metrics    []struct{ Name string }
		}
	} `json:"_aws"`
	members map[string]json.RawMessage
}

func readDocs(t *testing.T, out string) []emfDoc {
	t.Helper()
	var docs []emfDoc
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(line)+1 > maxDocumentBytes {
			t.Errorf("a document of %d bytes: CloudWatch Logs truncates a log event over %d and the metrics are lost", len(line)+1, maxDocumentBytes)
		}
		var d emfDoc
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		if err := json.Unmarshal([]byte(line), &d.members); err != nil {
			t.Fatal(err)
		}
		if n := len(d.AWS.CloudWatchMetrics[0].Metrics); n > maxMetrics {
			t.Errorf("a document declares %d metrics; CloudWatch extracts none of a directive with more than %d", n, maxMetrics)
		}
		docs = append(docs, d)
	}
	return docs
}

// valuesOf gathers every value of every metric over the documents.
func valuesOf(t *testing.T, docs []emfDoc) map[string][]float64 {
	t.Helper()
	got := map[string][]float64{}
	for _, d := range docs {
		for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
			raw := d.members[m.Name]
			var one float64
			if err := json.Unmarshal(raw, &one); err == nil {
				got[m.Name] = append(got[m.Name], one)
				continue
			}
			var many []float64
			if err := json.Unmarshal(raw, &many); err != nil {
				t.Fatalf("metric %s: %s", m.Name, raw)
			}
			got[m.Name] = append(got[m.Name], many...)
		}
	}
	return got
}

// TestFlushSplitsMoreThan100Metrics: a function that counts more than 100
// metrics between flushes (one per task type, say) lost every metric of
// the flush, its RecordsSetAside alarm's among them; each document now
// carries at most 100 and every value is written.
func TestFlushSplitsMoreThan100Metrics(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "worker").WithClock(func() time.Time { return at })
	for i := range 150 {
		l.Add(fmt.Sprintf("Task%03d", i), Count, float64(i+1))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := readDocs(t, out.String())
	if len(docs) != 2 {
		t.Errorf("%d documents, want 2", len(docs))
	}
	got := valuesOf(t, docs)
	for i := range 150 {
		if v := got[fmt.Sprintf("Task%03d", i)]; len(v) != 1 || v[0] != float64(i+1) {
			t.Errorf("Task%03d: %v, want [%d]", i, v, i+1)
		}
	}
}

// TestFlushKeepsEachDocumentWithinALogEvent: 100 metrics of 100 values
// each fit EMF's counts but not one log event (256 KB); the document is
// split by size, not truncated by CloudWatch Logs.
func TestFlushKeepsEachDocumentWithinALogEvent(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, "aggregate").WithClock(func() time.Time { return at })
	const v = -1.2345678901234567e-100 // 24 bytes as JSON
	for i := range 100 {
		name := fmt.Sprintf("%s%03d", strings.Repeat("m", 200), i)
		for range 100 {
			l.Observe(name, Milliseconds, v)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := readDocs(t, out.String())
	if len(docs) < 2 {
		t.Errorf("%d document(s) of %d bytes, want it split", len(docs), out.Len())
	}
	got := valuesOf(t, docs)
	if len(got) != 100 {
		t.Errorf("%d metrics written, want 100", len(got))
	}
	for name, vs := range got {
		if len(vs) != 100 {
			t.Errorf("metric %s…: %d values, want 100", name[195:], len(vs))
		}
	}
}

// TestDimensionCloudWatchRefuses: a dimension value CloudWatch refuses
// (not ASCII, blank, over 1,024 characters, a control character) made
// CloudWatch drop every metric of every document, silently. The
// dimension is left out, Flush says which, and the metrics are written
// under Function alone, where the alarms look.
func TestDimensionCloudWatchRefuses(t *testing.T) {
	for _, c := range []struct {
		name, dim, value string
		want             string // in Flush's error
	}{
		{"not ASCII", "Pipeline", "café", `dimension Pipeline: value "café"`},
		{"blank", "Pipeline", "  ", `dimension Pipeline: value "  "`},
		{"too long", "Pipeline", strings.Repeat("p", 1025), "1025 characters"},
		{"control", "Pipeline", "a\tb", `dimension Pipeline: value "a\tb"`},
		{"name not ASCII", "Piñata", "x", `dimension "Piñata"`},
		{"name with a colon first", ":Pipeline", "x", `dimension ":Pipeline"`},
		{"name too long", strings.Repeat("d", 256), "x", "256 characters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			l := New(&out, "aggregate", WithDimension(c.dim, c.value)).WithClock(func() time.Time { return at })
			l.Add("RecordsIn", Count, 4)
			err := l.Flush()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Flush error = %v, want one containing %q", err, c.want)
			}
			want := `{"_aws":{"Timestamp":1795948867250,"CloudWatchMetrics":[{"Namespace":"Tributary","Dimensions":[["Function"]],"Metrics":[{"Name":"RecordsIn","Unit":"Count"}]}]},"Function":"aggregate","RecordsIn":4}` + "\n"
			if out.String() != want {
				t.Errorf("got  %s\nwant %s", out.String(), want)
			}
		})
	}
}

// TestAtMost30Dimensions: EMF takes at most 30 dimensions in a set;
// Function and 29 more are written, the rest left out and named.
func TestAtMost30Dimensions(t *testing.T) {
	var out bytes.Buffer
	var opts []Option
	for i := range 31 {
		opts = append(opts, WithDimension(fmt.Sprintf("D%02d", i), "v"))
	}
	l := New(&out, "aggregate", opts...).WithClock(func() time.Time { return at })
	l.Add("RecordsIn", Count, 1)
	err := l.Flush()
	if err == nil || !strings.Contains(err.Error(), "D29") || !strings.Contains(err.Error(), "D30") || strings.Contains(err.Error(), "D28") {
		t.Errorf("Flush error = %v, want one naming D29 and D30 only", err)
	}
	docs := readDocs(t, out.String())
	sets := docs[0].AWS.CloudWatchMetrics[0].Dimensions
	if len(sets) != 1 || len(sets[0]) != maxDimensions || sets[0][0] != "Function" {
		t.Errorf("dimension sets %v, want one set of %d, Function first", sets, maxDimensions)
	}
}

// TestMetricNameCloudWatchRefuses: a metric name CloudWatch refuses is
// not written and named; the others are.
func TestMetricNameCloudWatchRefuses(t *testing.T) {
	for _, name := range []string{strings.Repeat("n", 256), "Récords", "a\nb", " "} {
		var out bytes.Buffer
		l := New(&out, "ingest").WithClock(func() time.Time { return at })
		l.Add("Good", Count, 1)
		l.Add(name, Count, 1)
		if err := l.Flush(); err == nil || !strings.Contains(err.Error(), "metric name") {
			t.Errorf("%.20q: Flush error = %v, want one naming the metric", name, err)
		}
		got := valuesOf(t, readDocs(t, out.String()))
		if len(got) != 1 || got["Good"] == nil {
			t.Errorf("%.20q: written %v, want Good alone", name, got)
		}
	}
}
