package local

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/emulator/rie"
)

// invoker is what a function URL needs from a running function.
type invoker interface {
	Invoke(ctx context.Context, payload []byte) (rie.Result, error)
}

// functionURL serves one Lambda function URL on 127.0.0.1, translating HTTP
// requests into the payload format 2.0 event Lambda sends and the function's
// response back, as AWS does.
type functionURL struct {
	function string
	inv      invoker
	srv      *http.Server
	ln       net.Listener
}

func newFunctionURL(function string, inv invoker, ln net.Listener) *functionURL {
	u := &functionURL{function: function, inv: inv, ln: ln}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u
}

// URL is the base URL of the function URL, for example http://127.0.0.1:9001/.
func (u *functionURL) URL() string { return "http://" + u.ln.Addr().String() + "/" }

func (u *functionURL) close(ctx context.Context) error { return u.srv.Shutdown(ctx) }

// maxRequestBytes is Lambda's limit on a synchronous invocation's payload
// (6 MB), which a function URL applies to the event it builds from the
// request: the body (base64 text when binary), the headers and the request
// context.
const maxRequestBytes = 6 << 20

// tooLargeBody is what a function URL answers, with 413, for a request
// whose invocation payload would pass maxRequestBytes, before the
// function runs (Lambda's RequestEntityTooLargeException message).
const tooLargeBody = `{"Message":"Request must be smaller than 6291456 bytes for the InvokeFunction operation"}`

func (u *functionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxRequestBytes {
		writeTooLarge(w)
		return
	}
	payload, err := json.Marshal(toURLRequest(r, body, time.Now()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The body fits, but the event does not (a body within about 500
	// bytes of the limit, plus its headers and request context; a binary
	// one past about 4.5 MB, as base64): Lambda refuses the invocation, and
	// the URL answers 413 as for a body over the limit. Handed to the
	// runtime, it failed there and was answered as a function error (502).
	if len(payload) > maxRequestBytes {
		writeTooLarge(w)
		return
	}
	res, err := u.inv.Invoke(r.Context(), payload)
	if err != nil {
		http.Error(w, `{"Message":"Internal Server Error"}`, http.StatusBadGateway)
		return
	}
	if res.FunctionError != "" {
		// Function URLs answer 502 when the function fails.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"Message":"Internal Server Error"}`))
		return
	}
	writeURLResponse(w, res.Payload)
}

// writeTooLarge answers a request over Lambda's invocation payload limit.
func writeTooLarge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write([]byte(tooLargeBody))
}

func toURLRequest(r *http.Request, body []byte, now time.Time) events.LambdaFunctionURLRequest {
	headers := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	query := make(map[string]string)
	for k, v := range r.URL.Query() {
		query[k] = strings.Join(v, ",")
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	req := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.EscapedPath(), // percent-encoded, as a function URL hands it over
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "anonymous",
			RequestID:    fmt.Sprintf("local-%d", now.UnixNano()),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: "local",
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  host,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) && isTextual(headers["content-type"]) {
			req.Body = string(body)
		} else {
			req.Body = base64.StdEncoding.EncodeToString(body)
			req.IsBase64Encoded = true
		}
	}
	return req
}

func isTextual(contentType string) bool {
	ct := strings.ToLower(contentType)
	return ct == "" || strings.HasPrefix(ct, "text/") || strings.Contains(ct, "json") ||
		strings.Contains(ct, "xml") || strings.Contains(ct, "x-www-form-urlencoded") || strings.Contains(ct, "javascript")
}

// writeURLResponse follows the function URL response rules: a JSON object
// with statusCode is a structured response; anything else is the body of a 200.
func writeURLResponse(w http.ResponseWriter, payload []byte) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) == nil {
		if _, ok := probe["statusCode"]; ok {
			var resp events.LambdaFunctionURLResponse
			if err := json.Unmarshal(payload, &resp); err == nil {
				for k, v := range resp.Headers {
					w.Header().Set(k, v)
				}
				for _, c := range resp.Cookies {
					w.Header().Add("Set-Cookie", c)
				}
				body := []byte(resp.Body)
				if resp.IsBase64Encoded {
					if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
						body = b
					}
				}
				if w.Header().Get("Content-Type") == "" {
					w.Header().Set("Content-Type", "application/json")
				}
				status := resp.StatusCode
				if status == 0 {
					status = http.StatusOK
				}
				w.WriteHeader(status)
				_, _ = w.Write(body)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(payload)
}
