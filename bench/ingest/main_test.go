package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestFunctionURL checks the translation the benchmark puts in front of the
// handler: path, method, headers, body (base64 when not UTF-8), a deadline,
// and the handler's answer back as HTTP.
func TestFunctionURL(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantB64  bool
		wantBody string
	}{
		{name: "JSON body as text", body: `[{"id":"a"}]`, wantBody: `[{"id":"a"}]`},
		{name: "binary body as base64", body: "\xff\xfe", wantB64: true, wantBody: base64.StdEncoding.EncodeToString([]byte("\xff\xfe"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got events.LambdaFunctionURLRequest
			var deadline time.Duration
			h := functionURL(func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				got = req
				if dl, ok := ctx.Deadline(); ok {
					deadline = time.Until(dl)
				}
				return events.LambdaFunctionURLResponse{StatusCode: 429, Headers: map[string]string{"Retry-After": "1"}, Body: `{"accepted":0}`}, nil
			}, 3*time.Second)
			r := httptest.NewRequest(http.MethodPost, "/orders?x=1", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if got.RawPath != "/orders" || got.RequestContext.HTTP.Path != "/orders" || got.RequestContext.HTTP.Method != "POST" ||
				got.RawQueryString != "x=1" || got.Headers["content-type"] != "application/json" {
				t.Errorf("request %+v", got)
			}
			if got.Body != tt.wantBody || got.IsBase64Encoded != tt.wantB64 {
				t.Errorf("body %q base64 %v, want %q %v", got.Body, got.IsBase64Encoded, tt.wantBody, tt.wantB64)
			}
			if deadline <= 0 || deadline > 3*time.Second {
				t.Errorf("deadline in %s, want within 3s", deadline)
			}
			if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Body.String() != `{"accepted":0}` {
				t.Errorf("answer %d %v %q", w.Code, w.Header(), w.Body.String())
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	r := result{}
	for i := 100; i >= 1; i-- {
		r.latencies = append(r.latencies, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := r.pct(50), r.pct(99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %v p99 %v, want 50 and 99", p50, p99)
	}
}
