package standin

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The launcher keeps moto's connections open between requests that say
// their length (what the AWS SDKs send): werkzeug closed every one, and
// connecting and starting a thread for each request cost moto more CPU than
// the DynamoDB work itself. A request whose length is not known in advance
// (chunked) is still answered and its connection closed after it, so the
// next request never starts in the middle of an unread body.
func TestMotoKeepsConnectionsOpenForRequestsOfKnownLength(t *testing.T) {
	ctx := context.Background()
	backend := launchTestMoto(t)
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
		wantTableList(t, resp, "ListTables")
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

// The launcher buffers moto's writes (a response's head and body go out in
// one send); the "100 Continue" werkzeug writes for a request that asks for
// one (the AWS SDKs do, for large uploads) is still sent before moto reads
// the body, which the client holds back until it comes.
func TestMotoAnswersExpectContinueBeforeTheBody(t *testing.T) {
	backend := launchTestMoto(t)
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := signed(t, backend, "dynamodb", "DynamoDB_20120810.ListTables", `{}`)
	head := "POST / HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
	for _, k := range []string{"Authorization", "X-Amz-Target"} {
		head += k + ": " + r.Header.Get(k) + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	// Without the 100 Continue the client would wait for ever; moto would
	// too, for the body.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	replies := bufio.NewReader(conn)
	line, err := replies.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("before the body moto answered %q (%v), want HTTP/1.1 100 Continue", line, err)
	}
	if blank, err := replies.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q (%v)", blank, err)
	}
	if _, err := io.WriteString(conn, `{}`); err != nil {
		t.Fatal(err)
	}
	// http.server and werkzeug each answer the Expect (a client skips a
	// 1xx it did not wait for).
	resp, err := http.ReadResponse(replies, nil)
	for err == nil && resp.StatusCode == http.StatusContinue {
		resp, err = http.ReadResponse(replies, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantTableList(t, resp, "ListTables after 100 Continue")
}

// wantTableList fails the test unless resp, read to its end and closed,
// is a ListTables answer.
func wantTableList(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "TableNames") {
		t.Fatalf("%s: %s %s", what, resp.Status, body)
	}
}

// launchTestMoto starts a moto from the launcher (no zygote) for the test
// and returns its URL.
func launchTestMoto(t *testing.T) string {
	t.Helper()
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
	return backend
}
