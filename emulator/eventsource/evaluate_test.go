package eventsource

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/rie"
)

func TestCompareSeqIsNumeric(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"9", "10", -1},
		{"10", "9", 1},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", -1},
		{"1100000000017454423010", "1100000000017454423010", 0},
		{"", "1", -1},
	}
	for _, tt := range tests {
		if got := compareSeq(tt.a, tt.b); got != tt.want {
			t.Errorf("compareSeq(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestEvaluateStreamResponse(t *testing.T) {
	batch := &attempt{recs: []*record{{seq: "8"}, {seq: "9"}, {seq: "10"}, {seq: "11"}}}
	tests := []struct {
		name      string
		rbif      bool
		res       rie.Result
		wantWhole bool
		wantFrom  int
	}{
		{"success", true, rie.Result{Payload: []byte(`{"batchItemFailures":[]}`)}, false, -1},
		{"null list", true, rie.Result{Payload: []byte(`{"batchItemFailures":null}`)}, false, -1},
		{"empty response", true, rie.Result{Payload: []byte(`{}`)}, false, -1},
		{"null response", true, rie.Result{Payload: []byte(`null`)}, false, -1},
		{"function error", true, rie.Result{FunctionError: "Unhandled", Payload: []byte(`{"errorMessage":"x","errorType":"y"}`)}, true, -1},
		{"lowest by number, not text", true, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"11"},{"itemIdentifier":"9"},{"itemIdentifier":"10"}]}`)}, false, 1},
		{"empty identifier", true, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":""}]}`)}, true, -1},
		{"null identifier", true, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":null}]}`)}, true, -1},
		{"misnamed key", true, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemId":"9"}]}`)}, true, -1},
		{"not in the batch", true, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"12"}]}`)}, true, -1},
		{"ignored without ReportBatchItemFailures", false, rie.Result{Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"9"}]}`)}, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lane{st: &stream{s: Settings{ReportBatchItemFailures: tt.rbif}}}
			out := l.evaluate(tt.res, batch)
			if out.whole != tt.wantWhole || out.failedFrom != tt.wantFrom {
				t.Errorf("evaluate = whole %v from %d, want whole %v from %d", out.whole, out.failedFrom, tt.wantWhole, tt.wantFrom)
			}
		})
	}
}

func TestEvaluateWindowResponseNeedsState(t *testing.T) {
	l := &lane{st: &stream{}, win: &window{start: time.Unix(0, 0), end: time.Unix(60, 0)}}
	batch := &attempt{recs: []*record{{seq: "1"}}}
	if out := l.evaluate(rie.Result{Payload: []byte(`{"batchItemFailures":[]}`)}, batch); !out.whole {
		t.Error("a tumbling-window response without state must fail the batch")
	}
	out := l.evaluate(rie.Result{Payload: []byte(`{"state":{"count":"3","n":4}}`)}, batch)
	if out.whole || out.state["count"] != "3" || out.state["n"] != "4" {
		t.Errorf("evaluate = %+v, want success with state count 3, n 4", out)
	}
}

func TestSettingsErrorsNameTheField(t *testing.T) {
	base := Settings{FunctionName: "f", SourceARN: "arn:aws:kinesis:us-east-1:123456789012:stream/s", Enabled: true}
	tests := []struct {
		name  string
		mod   func(*Settings)
		kind  string
		field string
	}{
		{"bad ARN", func(s *Settings) { s.SourceARN = "stream/s" }, "kinesis", "SourceARN"},
		{"wrong service", func(s *Settings) {}, "sqs", "SourceARN"},
		{"position", func(s *Settings) { s.StartingPosition = "EARLIEST" }, "kinesis", "StartingPosition"},
		{"timestamp", func(s *Settings) { s.StartingPosition = AtTimestamp }, "kinesis", "StartingPositionTimestamp"},
		{"retries", func(s *Settings) { s.MaximumRetryAttempts = -2 }, "kinesis", "MaximumRetryAttempts"},
		{"parallel", func(s *Settings) { s.ParallelizationFactor = 11 }, "kinesis", "ParallelizationFactor"},
		{"filter", func(s *Settings) { s.FilterPatterns = []string{`{"data":1}`} }, "kinesis", "FilterPatterns[0]"},
		{"destination", func(s *Settings) { s.OnFailureARN = "arn:aws:sns:us-east-1:1:t" }, "kinesis", "OnFailureARN"},
		{"sqs batch", func(s *Settings) {
			s.SourceARN = "arn:aws:sqs:us-east-1:123456789012:q"
			s.BatchSize = 50
		}, "sqs", "MaximumBatchingWindow"},
		{"sqs bisect", func(s *Settings) {
			s.SourceARN = "arn:aws:sqs:us-east-1:123456789012:q"
			s.BisectBatchOnFunctionError = true
		}, "sqs", "BisectBatchOnFunctionError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.mod(&s)
			_, _, err := s.normalize(tt.kind)
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
		})
	}
}
