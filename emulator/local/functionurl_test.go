package local

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/emulator/rie"
)

// recordingInvoker stands in for a running function: it records the
// payloads it is handed and answers 202.
type recordingInvoker struct{ payloads [][]byte }

func (r *recordingInvoker) Invoke(_ context.Context, payload []byte) (rie.Result, error) {
	r.payloads = append(r.payloads, payload)
	return rie.Result{Payload: []byte(`{"statusCode":202,"body":"{\"accepted\":1}"}`)}, nil
}

// startFunctionURL serves function's URL on a free port of 127.0.0.1,
// invoking inv, until the test ends.
func startFunctionURL(t *testing.T, function string, inv invoker) *functionURL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := newFunctionURL(function, inv, ln)
	t.Cleanup(func() { _ = u.close(context.Background()) })
	return u
}

// A request whose invocation payload (the event the URL builds: body,
// headers, request context) would pass Lambda's 6 MB limit is answered as
// AWS answers it, 413 with Lambda's message, and never reaches the
// function: a body of 6,290,998 to 6,291,456 bytes fits the limit but its
// event does not, and was handed to the runtime, which refused it, and
// answered 502 {"Message":"Internal Server Error"}. docs/events.md says a
// local run answers as AWS does.
func TestFunctionURLAnswersTooLargeAsAWSDoes(t *testing.T) {
	inv := &recordingInvoker{}
	u := startFunctionURL(t, "ingest", inv)

	post := func(body, contentType string) (int, string, string) {
		t.Helper()
		res, err := http.Post(u.URL(), contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	const awsBody = `{"Message":"Request must be smaller than 6291456 bytes for the InvokeFunction operation"}`
	tests := []struct {
		name, body, contentType string
		tooLarge                bool
	}{
		{"a small body", `{"id":"e1"}`, "application/json", false},
		{"a body 458 bytes short of the limit", strings.Repeat("a", maxRequestBytes-458), "application/json", true},
		{"a body exactly at the limit", strings.Repeat("a", maxRequestBytes), "application/json", true},
		{"a body over the limit", strings.Repeat("a", maxRequestBytes+1), "application/json", true},
		{"a binary body whose base64 is over the limit", strings.Repeat("\xff", 4_800_000), "application/octet-stream", true},
		{"a binary body whose base64 fits", strings.Repeat("\xff", 4_000_000), "application/octet-stream", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv.payloads = nil
			status, ct, body := post(tc.body, tc.contentType)
			if !tc.tooLarge {
				if status != http.StatusAccepted || len(inv.payloads) != 1 {
					t.Fatalf("answered %d %s after %d invocations, want the function's 202 after one", status, body, len(inv.payloads))
				}
				if n := len(inv.payloads[0]); n > maxRequestBytes {
					t.Errorf("the function got a %d-byte event, over Lambda's %d", n, maxRequestBytes)
				}
				return
			}
			if status != http.StatusRequestEntityTooLarge || body != awsBody || ct != "application/json" {
				t.Errorf("answered %d %s %.200s, want 413 application/json %s", status, ct, body, awsBody)
			}
			if len(inv.payloads) != 0 {
				t.Errorf("the function was invoked with a %d-byte event", len(inv.payloads[0]))
			}
		})
	}
}

// The event's rawPath is the path as it was sent, percent-encoded, as a
// function URL hands it over: a decoded rawPath made POST
// /rules/kd%2Fdisable reach rule kd's disable locally, where on AWS it is
// the path of no route.
func TestFunctionURLRawPathKeepsItsEncoding(t *testing.T) {
	inv := &recordingInvoker{}
	u := startFunctionURL(t, "rules", inv)
	for _, path := range []string{"rules/kd%2Fdisable", "customers/a%20b/bookings", "rules/plain"} {
		inv.payloads = nil
		res, err := http.Post(u.URL()+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		var ev events.LambdaFunctionURLRequest
		if len(inv.payloads) != 1 || json.Unmarshal(inv.payloads[0], &ev) != nil {
			t.Fatalf("%s: %d invocations", path, len(inv.payloads))
		}
		if ev.RawPath != "/"+path {
			t.Errorf("rawPath %q, want /%s as sent", ev.RawPath, path)
		}
	}
}
