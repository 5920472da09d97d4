package standin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"testing"
)

// The launcher keeps moto's connections open between requests that say
// their length (what the AWS SDKs send): werkzeug closed every one, and
// connecting and starting a thread for each request cost moto more CPU than
// the DynamoDB work itself. A request whose length is not known in advance
// (chunked) is still answered and its connection closed after it, so the
// next request never starts in the middle of an unread body.
func TestMotoKeepsConnectionsOpenForRequestsOfKnownLength(t *testing.T) {
	ctx := context.Background()
	bin, err := Install(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	launcher, err := writeLauncher(filepath.Dir(filepath.Dir(bin)))
	if err != nil {
		t.Fatal(err)
	}
	srv, backend, err := launchMotoRetrying(ctx, bin, launcher, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}

	// do sends a ListTables and says whether it went on a connection a
	// request before it had used.
	do := func(t *testing.T, chunked bool) bool {
		t.Helper()
		r := signed(t, backend, "dynamodb", "DynamoDB_20120810.ListTables", `{}`)
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		if chunked {
			r.Body = io.NopCloser(strings.NewReader(`{}`)) // length unknown: sent chunked
			r.ContentLength = -1
		}
		reused := false
		r = r.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "TableNames") {
			t.Fatalf("ListTables: %s %s", resp.Status, body)
		}
		return reused
	}

	do(t, false)
	for i := range 3 {
		if !do(t, false) {
			t.Fatalf("request %d with a Content-Length opened a new connection: moto closed the last one", i+2)
		}
	}
	do(t, true)
	if do(t, false) {
		t.Fatal("the request after a chunked one reused its connection: moto kept open a connection whose body it had not measured")
	}
	if !do(t, false) {
		t.Fatal("after a chunked request, connections were no longer kept open")
	}
}
