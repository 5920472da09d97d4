package cloudwatchlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

func emfLine(ts time.Time, fn, key string, processed any) string {
	return fmt.Sprintf(`{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"TributaryTest","Dimensions":[["function"],["function","key"]],"Metrics":[{"Name":"Processed","Unit":"Count"}]},{"Namespace":"TributaryTest","Dimensions":[[]],"Metrics":[{"Name":"Late","Unit":"Count"}]}]},"function":%q,"key":%q,"Processed":%v,"Late":1,"msg":"batch done"}`,
		ts.UnixMilli(), fn, key, processed)
}

func TestSink(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	start := time.Now().Add(-time.Second)

	t.Run("lines land in the function's log group in order", func(t *testing.T) {
		s, err := NewSink(ctx, cfg, SinkOptions{RunID: "run1", FlushInterval: time.Hour, LogGroups: map[string]string{"other": "Tributary-OtherLogGroupA1B2C3D4"}})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		var wg sync.WaitGroup
		// Another function logs at the same time; its lines go elsewhere.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				s.Line("other", fmt.Sprintf("other %d", i))
			}
		}()
		for i := range 300 {
			line := fmt.Sprintf("line %03d of ingest", i)
			want = append(want, line)
			s.Line("Tributary-Ingest", line+"\n")
			if i == 150 {
				if err := s.Flush(ctx); err != nil { // a flush in the middle must not reorder
					t.Fatal(err)
				}
			}
		}
		s.Line("Tributary-Ingest", "") // dropped, as CloudWatch stores no empty events
		wg.Wait()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		events, err := ReadEvents(ctx, cfg, "/aws/lambda/Tributary-Ingest", start)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range events {
			got = append(got, e.Message)
			if !regexp.MustCompile(`^\d{4}/\d{2}/\d{2}/\[\$LATEST\]run1$`).MatchString(e.Stream) {
				t.Fatalf("stream %q, want <yyyy/mm/dd>/[$LATEST]run1", e.Stream)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got %d events %q…, want %d in order", len(got), got[:min(3, len(got))], len(want))
		}
		// A function with its own log group (LoggingConfig.LogGroup) logs there.
		other, err := ReadEvents(ctx, cfg, "Tributary-OtherLogGroupA1B2C3D4", start)
		if err != nil || len(other) != 100 {
			t.Errorf("other function: %d events, %v; want 100 in its own log group", len(other), err)
		}
	})

	t.Run("lines are sent on the flush interval without Close", func(t *testing.T) {
		s, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		s.Line("ticker", "tick")
		deadline := time.Now().Add(5 * time.Second)
		for {
			events, err := ReadEvents(ctx, cfg, "/aws/lambda/ticker", start)
			if err == nil && len(events) == 1 && events[0].Message == "tick" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("line not sent within 5s of a 20ms flush interval: %v, %v", events, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("Tail prints time, stream and message", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Tail(ctx, cfg, "/aws/lambda/Tributary-Ingest", start, &buf); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 300 {
			t.Fatalf("Tail printed %d lines, want 300", len(lines))
		}
		if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z \d{4}/\d{2}/\d{2}/\[\$LATEST\]run1 line 000 of ingest$`).MatchString(lines[0]) {
			t.Errorf("first line %q", lines[0])
		}
		err := Tail(ctx, cfg, "/aws/lambda/never-ran", start, &buf)
		if !errors.Is(err, ErrNoLogGroup) {
			t.Errorf("Tail of a missing group: %v, want ErrNoLogGroup", err)
		}
	})

	t.Run("EMF lines become metrics with the right sums", func(t *testing.T) {
		s, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		s.Line("aggregate", emfLine(now, "aggregate", "k1", 2))
		s.Line("aggregate", emfLine(now, "aggregate", "k1", "[3,3,4]"))
		s.Line("aggregate", emfLine(now, "aggregate", "k2", 5))
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := Metrics(ctx, cfg, "TributaryTest", start)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"Late{}":                               "sum=3 count=3 min=1 max=1",
			"Processed{function=aggregate}":        "sum=17 count=5 min=2 max=5",
			"Processed{function=aggregate,key=k1}": "sum=12 count=4 min=2 max=4",
			"Processed{function=aggregate,key=k2}": "sum=5 count=1 min=5 max=5",
		}
		if len(got) != len(want) {
			t.Errorf("Metrics() = %v, want %d series", got, len(want))
		}
		for _, m := range got {
			s := m.String()
			i := strings.Index(s, " ")
			if w, ok := want[s[:i]]; !ok || w != s[i+1:] {
				t.Errorf("%s: got %q, want %q", s[:i], s[i+1:], w)
			}
		}
		// The EMF lines are log events too, as on AWS.
		events, err := ReadEvents(ctx, cfg, "/aws/lambda/aggregate", start)
		if err != nil || len(events) != 3 {
			t.Errorf("aggregate log: %d events, %v; want the 3 EMF lines", len(events), err)
		}
	})

	t.Run("an invalid EMF document is logged, reported and gives no metric", func(t *testing.T) {
		var reported []error
		var mu sync.Mutex
		s, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: time.Hour, OnError: func(err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		bad := fmt.Sprintf(`{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"BadTest","Dimensions":["function"],"Metrics":[{"Name":"X"}]}]},"function":"quarantine","X":1}`, time.Now().UnixMilli())
		s.Line("quarantine", bad)
		err = s.Close(ctx)
		var emfErr *EMFError
		if !errors.As(err, &emfErr) || emfErr.Function != "quarantine" || !strings.Contains(emfErr.Reason, "flat array") {
			t.Errorf("Close() = %v, want an *EMFError for quarantine about the flat dimensions", err)
		}
		mu.Lock()
		if len(reported) != 1 {
			t.Errorf("OnError got %v, want the one EMF error", reported)
		}
		mu.Unlock()
		events, err := ReadEvents(ctx, cfg, "/aws/lambda/quarantine", start)
		if err != nil || len(events) != 1 || events[0].Message != bad {
			t.Errorf("quarantine log = %v, %v; want the line kept", events, err)
		}
		ms, err := Metrics(ctx, cfg, "BadTest", start)
		if err != nil || len(ms) != 0 {
			t.Errorf("Metrics(BadTest) = %v, %v; want none", ms, err)
		}
	})

	t.Run("each execution environment's lines go to its own log stream", func(t *testing.T) {
		s, err := NewSink(ctx, cfg, SinkOptions{RunID: "runner", FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		envA, envB := "2026/12/01/[$LATEST]aaaa", "2026/12/01/[$LATEST]bbbb"
		for i := range 3 {
			s.StreamLine("worker", envA, fmt.Sprintf("a %d", i))
			s.StreamLine("worker", envB, fmt.Sprintf("b %d", i))
		}
		s.StreamLine("worker", "", "from the runner")
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		events, err := ReadEvents(ctx, cfg, "/aws/lambda/worker", start)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string][]string{}
		for _, e := range events {
			by[e.Stream] = append(by[e.Stream], e.Message)
		}
		if got := strings.Join(by[envA], ","); got != "a 0,a 1,a 2" {
			t.Errorf("stream %s holds %q, want a 0..a 2", envA, got)
		}
		if got := strings.Join(by[envB], ","); got != "b 0,b 1,b 2" {
			t.Errorf("stream %s holds %q, want b 0..b 2", envB, got)
		}
		if got := strings.Join(by[s.LogStream()], ","); got != "from the runner" {
			t.Errorf("the sink's own stream %s holds %q, want the line without a stream", s.LogStream(), got)
		}
	})

	t.Run("a run reads back only its own span and knows what it put", func(t *testing.T) {
		// An earlier run on the same endpoint published a minute ago.
		earlier, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-50 * time.Second)
		span := func(line string) string {
			// Its own namespace and metric name: moto matches GetMetricData
			// queries by name and dimensions, across namespaces.
			return strings.ReplaceAll(strings.ReplaceAll(line, "TributaryTest", "SpanTest"), "Processed", "SpanProcessed")
		}
		earlier.Line("aggregate", span(emfLine(old, "aggregate", "k1", 100)))
		if err := earlier.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// Reads are to the second: begin on a whole second.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		began := time.Now()
		s, err := NewSink(ctx, cfg, SinkOptions{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s.Line("aggregate", span(emfLine(time.Now(), "aggregate", "k1", 7)))
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ms, err := MetricsBetween(ctx, cfg, "SpanTest", began, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, m := range ms {
			if m.Name != "SpanProcessed" || len(m.Dimensions) != 2 {
				continue
			}
			found = true
			if m.Sum != 7 || s.Own(m) != 7 {
				t.Errorf("%s: read back %g, own %g; want this run's 7 only (the earlier run's 100 is before it began)", m, m.Sum, s.Own(m))
			}
		}
		if !found {
			t.Fatalf("MetricsBetween = %v: no SpanProcessed{function,key} series", ms)
		}
		// Over the whole minute, the earlier run's data would be counted too.
		all, err := Metrics(ctx, cfg, "SpanTest", old)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range all {
			if m.Name == "SpanProcessed" && len(m.Dimensions) == 2 && m.Sum != 107 {
				t.Errorf("Metrics since the earlier run: %s, want both runs' 107", m)
			}
		}
	})
}
