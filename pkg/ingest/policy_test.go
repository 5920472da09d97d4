package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/metrics"
)

const throughput = "ProvisionedThroughputExceededException"

var testRoutes = map[string]Policy{"/": Buffer, "/metrics": Drop, "/orders": Backpressure}

func postTo(path, body string) events.LambdaFunctionURLRequest {
	r := post(body)
	r.RawPath = path
	r.RequestContext.HTTP.Path = path
	return r
}

func batchOf(ids ...string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = envelopeJSON(id, "k-"+id)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// fakeTime makes h sleep on a fake clock: sleep advances it at once, and
// retry budgets are measured on it. It returns the total slept.
func fakeTime(h *Handler) *time.Duration {
	now := time.Now()
	var slept time.Duration
	h.mono = func() time.Time { return now.Add(slept) }
	h.sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
	h.jitter = func(n int64) int64 { return n - 1 } // the top of the jitter range
	return &slept
}

// emf reads the summed metric values of the EMF lines in b.
func emf(t *testing.T, b []byte) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("EMF line %s: %v", line, err)
		}
		for k, v := range doc {
			if f, ok := v.(float64); ok {
				got[k] += f
			}
		}
	}
	return got
}

func TestPolicies(t *testing.T) {
	tests := []struct {
		name         string
		path         string
		putter       *scriptedPutter
		deadline     time.Duration // 0: no deadline on ctx
		status       int
		minCalls     int
		maxCalls     int
		wantAccepted []string
		wantFailed   map[string]string // id -> error substring
		wantDropped  []string
		wantMetrics  map[string]float64
	}{
		{
			name:   "backpressure: throttling past the budget answers 429 naming the event",
			path:   "/orders",
			putter: &scriptedPutter{always: map[string]string{"b": throughput}},
			status: 429, minCalls: 4, maxCalls: 4,
			wantAccepted: []string{"a", "c"},
			wantFailed:   map[string]string{"b": throughput},
			wantMetrics:  map[string]float64{"Accepted": 2, "Dropped": 0, "Throttles": 4, "Retries": 3},
		},
		{
			name:   "backpressure: a mix of throttling and internal failure is 503",
			path:   "/orders",
			putter: &scriptedPutter{always: map[string]string{"a": "InternalFailure", "b": throughput}},
			status: 503, minCalls: 4, maxCalls: 4,
			wantAccepted: []string{"c"},
			wantFailed:   map[string]string{"a": "InternalFailure", "b": throughput},
		},
		{
			name: "buffer: keeps retrying past backpressure's budget until it lands",
			path: "/",
			putter: &scriptedPutter{fail: []map[string]string{
				{"a": throughput, "b": throughput}, {"a": throughput, "b": throughput}, {"b": throughput},
				{"b": throughput}, {"b": throughput}, {"b": throughput},
			}},
			deadline: 10 * time.Second,
			status:   202, minCalls: 7, maxCalls: 7,
			wantAccepted: []string{"a", "b", "c"},
			wantMetrics:  map[string]float64{"Accepted": 3, "Throttles": 8, "Retries": 8},
		},
		{
			name:     "buffer: throttled to the deadline answers 503 naming the event",
			path:     "/",
			putter:   &scriptedPutter{always: map[string]string{"c": throughput}},
			deadline: 5 * time.Second,
			status:   503, minCalls: 5, maxCalls: 10,
			wantAccepted: []string{"a", "b"},
			wantFailed:   map[string]string{"c": throughput},
		},
		{
			name:   "buffer: without a deadline retries for bufferWait",
			path:   "/",
			putter: &scriptedPutter{always: map[string]string{"c": throughput}},
			status: 503, minCalls: 5, maxCalls: 20,
			wantAccepted: []string{"a", "b"},
			wantFailed:   map[string]string{"c": throughput},
		},
		{
			name:   "drop: throttled events are dropped at once, 202",
			path:   "/metrics",
			putter: &scriptedPutter{always: map[string]string{"a": throughput, "c": throughput}},
			status: 202, minCalls: 1, maxCalls: 1,
			wantAccepted: []string{"b"},
			wantDropped:  []string{"a", "c"},
			wantMetrics:  map[string]float64{"Accepted": 1, "Dropped": 2, "Throttles": 2, "Retries": 0},
		},
		{
			name: "drop: an internal failure is retried, not dropped",
			path: "/metrics",
			putter: &scriptedPutter{fail: []map[string]string{
				{"a": throughput, "c": "InternalFailure"},
			}},
			status: 202, minCalls: 2, maxCalls: 2,
			wantAccepted: []string{"b", "c"},
			wantDropped:  []string{"a"},
			wantMetrics:  map[string]float64{"Accepted": 2, "Dropped": 1, "Retries": 1},
		},
		{
			name:   "drop: an internal failure to the end is 503, the dropped one stays dropped",
			path:   "/metrics",
			putter: &scriptedPutter{always: map[string]string{"a": throughput, "c": "InternalFailure"}},
			status: 503, minCalls: 4, maxCalls: 4,
			wantAccepted: []string{"b"},
			wantDropped:  []string{"a"},
			wantFailed:   map[string]string{"c": "InternalFailure"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h := New(tt.putter, "events", WithRoutes(testRoutes), WithMetrics(metrics.New(&out, "ingest")),
				WithLogger(slog.New(slog.DiscardHandler)))
			slept := fakeTime(h)
			ctx := context.Background()
			var budget time.Duration
			switch {
			case tt.deadline > 0:
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
				budget = tt.deadline - deadlineMargin
			case tt.path == "/":
				budget = h.bufferWait
			}
			resp, err := h.Handle(ctx, postTo(tt.path, batchOf("a", "b", "c")))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if n := len(tt.putter.calls); n < tt.minCalls || n > tt.maxCalls {
				t.Errorf("%d PutRecords calls, want %d to %d: %v", n, tt.minCalls, tt.maxCalls, tt.putter.calls)
			}
			if budget > 0 && *slept > budget {
				t.Errorf("slept %s, past the retry budget %s", *slept, budget)
			}
			if tt.status != 202 && resp.Headers["Retry-After"] == "" {
				t.Error("no Retry-After on an answer asking to resend")
			}
			var got Response
			if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
				t.Fatal(err)
			}
			if got.Events != 3 || got.Accepted != len(tt.wantAccepted) || got.Dropped != len(tt.wantDropped) || got.Failed != len(tt.wantFailed) {
				t.Errorf("accepted %d dropped %d failed %d of %d, want %d, %d and %d of 3: %s", got.Accepted, got.Dropped, got.Failed, got.Events, len(tt.wantAccepted), len(tt.wantDropped), len(tt.wantFailed), resp.Body)
			}
			ids := []string{"a", "b", "c"} // the request's events, by index
			byID := map[string]Failure{}
			for _, f := range got.Failures {
				byID[ids[f.Index]] = f
			}
			for _, id := range tt.wantAccepted {
				if f, listed := byID[id]; listed {
					t.Errorf("%s: %+v, want accepted (not listed)", id, f)
				}
			}
			for _, id := range tt.wantDropped {
				if f := byID[id]; !f.Dropped || !strings.Contains(f.Error, throughput) {
					t.Errorf("%s: %+v, want dropped with the throttling error (and not to be resent)", id, f)
				}
			}
			for id, want := range tt.wantFailed {
				if f := byID[id]; !strings.Contains(f.Error, want) || f.Dropped {
					t.Errorf("%s: %+v, want error %q", id, f, want)
				}
			}
			m := emf(t, out.Bytes())
			for name, want := range tt.wantMetrics {
				if m[name] != want {
					t.Errorf("metric %s = %v, want %v (all: %v)", name, m[name], want, m)
				}
			}
		})
	}
}

func TestDropLogsOneInN(t *testing.T) {
	var logs bytes.Buffer
	h := New(&scriptedPutter{always: map[string]string{"a": throughput, "b": throughput, "c": throughput, "d": throughput, "e": throughput, "f": throughput, "g": throughput}},
		"events", WithRoutes(testRoutes), WithDropSample(3), WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	fakeTime(h)
	resp, _ := h.Handle(context.Background(), postTo("/metrics", batchOf("a", "b", "c", "d", "e", "f", "g")))
	if resp.StatusCode != 202 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	var logged []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Msg, ID string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "event dropped" {
			logged = append(logged, rec.ID)
		}
	}
	if fmt.Sprint(logged) != "[a d g]" {
		t.Errorf("dropped events logged: %v, want [a d g] (1 in 3)", logged)
	}
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name     string
		routes   map[string]Policy // nil: the default
		path     string
		status   int
		wantText string
	}{
		{name: "default root", path: "/", status: 202},
		{name: "empty path is the root", path: "", status: 202},
		{name: "default knows no other path", path: "/orders", status: 404, wantText: `path "/orders" is not a route; known routes: / (backpressure)`},
		{name: "configured route", routes: testRoutes, path: "/orders", status: 202},
		{name: "unknown path names the routes", routes: testRoutes, path: "/order", status: 404,
			wantText: `path "/order" is not a route; known routes: / (buffer), /metrics (drop), /orders (backpressure)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.routes != nil {
				opts = append(opts, WithRoutes(tt.routes))
			}
			p := &scriptedPutter{}
			h := New(p, "events", opts...)
			resp, _ := h.Handle(context.Background(), postTo(tt.path, batchOf("a")))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if tt.status == http.StatusNotFound {
				var er ErrorResponse
				_ = json.Unmarshal([]byte(resp.Body), &er)
				if er.Error != tt.wantText {
					t.Errorf("error %q, want %q", er.Error, tt.wantText)
				}
				if len(p.calls) != 0 {
					t.Error("a request to an unknown path was written")
				}
			}
		})
	}
}

func TestEnvOptions(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		wantErr    string
		wantRoutes map[string]Policy
		wantSample int
		wantMaxAge time.Duration
		wantExpiry time.Duration // 0: no idempotency records
	}{
		{name: "unset keeps the defaults", env: nil, wantRoutes: map[string]Policy{"/": Backpressure}, wantSample: 100, wantMaxAge: DefaultMaxEventAge},
		{name: "the three policies", env: map[string]string{EnvRoutes: `{"/": "buffer", "/metrics": "drop", "/orders": "backpressure"}`, EnvDropSample: "10"},
			wantRoutes: testRoutes, wantSample: 10, wantMaxAge: DefaultMaxEventAge},
		{name: "idempotency table and a week of event age", env: map[string]string{EnvIdempotencyTable: "requests", EnvMaxEventAge: "168h", EnvAuth: AuthIAM},
			wantRoutes: map[string]Policy{"/": Backpressure}, wantSample: 100, wantMaxAge: 168 * time.Hour, wantExpiry: DefaultIdempotencyExpiry},
		{name: "idempotency expiry", env: map[string]string{EnvIdempotencyTable: "requests", EnvIdempotencyExpiry: "2h"},
			wantRoutes: map[string]Policy{"/": Backpressure}, wantSample: 100, wantMaxAge: DefaultMaxEventAge, wantExpiry: 2 * time.Hour},
		{name: "not JSON", env: map[string]string{EnvRoutes: `/:buffer`}, wantErr: "INGEST_ROUTES: not a JSON object"},
		{name: "a route twice", env: map[string]string{EnvRoutes: `{"/orders": "drop", "/": "buffer", "/orders": "backpressure"}`}, wantErr: `INGEST_ROUTES: not a JSON object of path to policy such as {"/": "backpressure"}: ["/orders"]: duplicate object key "/orders"`},
		{name: "a policy not a string", env: map[string]string{EnvRoutes: `{"/": 1}`}, wantErr: `["/"]: must be a JSON string, not a number`},
		{name: "unknown policy", env: map[string]string{EnvRoutes: `{"/": "queue"}`}, wantErr: `INGEST_ROUTES: route "/": policy "queue" is not one of buffer, backpressure, drop`},
		{name: "path without slash", env: map[string]string{EnvRoutes: `{"orders": "drop"}`}, wantErr: `INGEST_ROUTES: route "orders": a path starts with /`},
		{name: "no routes", env: map[string]string{EnvRoutes: `{}`}, wantErr: "INGEST_ROUTES: no routes"},
		{name: "sample zero", env: map[string]string{EnvDropSample: "0"}, wantErr: `INGEST_DROP_SAMPLE: "0" is not a whole number of at least 1`},
		{name: "event age not a duration", env: map[string]string{EnvMaxEventAge: "1 day"}, wantErr: `INGEST_MAX_EVENT_AGE: "1 day" is not a duration between 1m0s and 8760h0m0s`},
		{name: "expiry over a week", env: map[string]string{EnvIdempotencyTable: "requests", EnvIdempotencyExpiry: "200h"}, wantErr: `INGEST_IDEMPOTENCY_EXPIRY: "200h" is not a duration between 1m0s and 168h0m0s`},
		{name: "the old NONE", env: map[string]string{EnvAuth: "NONE"}, wantErr: `INGEST_AUTH: "NONE" is not AWS_IAM or HMAC`},
		{name: "idempotency table ARN of a stream", env: map[string]string{EnvIdempotencyTable: "arn:aws:kinesis:us-east-1:123456789012:stream/requests"}, wantErr: `INGEST_IDEMPOTENCY_TABLE: "arn:aws:kinesis:us-east-1:123456789012:stream/requests" is not a DynamoDB table name`},
		{name: "HMAC without a secret", env: map[string]string{EnvAuth: AuthHMAC}, wantErr: "environment variable INGEST_SECRET_ARN is not set: INGEST_AUTH=HMAC checks signatures with that secret"},
	}
	clients := Clients{DynamoDB: dynamodb.New(dynamodb.Options{Region: "us-east-1"})} // no call is made
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := EnvOptions(context.Background(), func(k string) string { return tt.env[k] }, clients)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h := New(&scriptedPutter{}, "events", opts...)
			if fmt.Sprint(h.routes) != fmt.Sprint(tt.wantRoutes) || h.dropSample != tt.wantSample || h.maxEventAge != tt.wantMaxAge {
				t.Errorf("routes %v sample %d max age %s, want %v %d %s", h.routes, h.dropSample, h.maxEventAge, tt.wantRoutes, tt.wantSample, tt.wantMaxAge)
			}
			if (h.requests != nil) != (tt.wantExpiry > 0) || h.idemExpiry != tt.wantExpiry {
				t.Errorf("idempotency records %v for %s, want them for %s", h.requests != nil, h.idemExpiry, tt.wantExpiry)
			}
			if h.signatures != nil {
				t.Error("requests are checked for signatures without INGEST_AUTH=HMAC")
			}
		})
	}
}

// TestQueryParametersRefused: ingest takes no query parameters, so one sent
// (a producer trying ?dryRun=true, ?stream=other) is a 400 naming it and
// nothing is written, where it was ignored and every event put.
func TestQueryParametersRefused(t *testing.T) {
	for _, q := range []map[string]string{{"dryRun": "true"}, {"stream": "other", "a": "1"}} {
		p := &scriptedPutter{}
		h := New(p, "events")
		req := postTo("/", batchOf("a"))
		req.QueryStringParameters = q
		resp, _ := h.Handle(context.Background(), req)
		var er ErrorResponse
		_ = json.Unmarshal([]byte(resp.Body), &er)
		first := slices.Sorted(maps.Keys(q))[0]
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(er.Error, first+": POST / takes no query parameters") {
			t.Errorf("POST /?%v: %d %s; want 400 naming %s", q, resp.StatusCode, resp.Body, first)
		}
		if len(p.calls) != 0 {
			t.Errorf("POST /?%v: %d puts; want nothing written", q, len(p.calls))
		}
	}
}
