package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvokeOfNoSuchFunctionNamesFNAndTheFunctions: make invoke FN=nope
// says which argument is wrong and lists the running functions, as the
// local Invoke API's ResourceNotFoundException gives them, where it printed
// the SDK's "operation error Lambda: Invoke, https response error
// StatusCode: 404, RequestID: , ResourceNotFoundException: …". The API is
// played by a server answering as emulator/local's does.
func TestInvokeOfNoSuchFunctionNamesFNAndTheFunctions(t *testing.T) {
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := `Function not found: "nope": no function "nope" in the running topology; the functions are: aggregate-pageviews, ingest, worker (or their logical ids, physical names or ARNs)`
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": msg, "message": msg})
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api.Listener = ln
	api.Start()
	defer api.Close()
	event := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(event, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = invoke(context.Background(), &options{root: filepath.Join("..", ".."), fn: "nope", event: event, lambdaPort: ln.Addr().(*net.TCPAddr).Port})
	want := `-fn "nope" (make invoke FN=): no function "nope" in the running topology; the functions are: aggregate-pageviews, ingest, worker (or their`
	if _, usage := err.(usageError); !usage || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "StatusCode") {
		t.Errorf("make invoke FN=nope: %T %v;\nwant a usage error %q…", err, err, want)
	}
}

// TestInvokeOfNoSuchFunctionRefusedBeforeTheTopologyStarts: with no make
// local-up answering, make invoke FN=nope brings the topology up for one
// invocation (a stand-in, the deploy, every function: seconds) only to
// hear that no function has that name. The template it would deploy says
// so at once: the name is refused, with the template's functions, before
// anything starts (here nothing could: -functions names no bootstraps).
// -check (make invoke's, before it builds) stops there, a name taken too.
func TestInvokeOfNoSuchFunctionRefusedBeforeTheTopologyStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing answers there: no make local-up
	event := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(event, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join("..", "..", "emulator", "template", "testdata", "Tributary.template.json")
	refused := `-fn "nope" (make invoke FN=): no function "nope" in ` + tmpl + `; the functions are: aggregate, ingest, quarantine (or their`
	for _, tc := range []struct {
		fn    string
		check bool
		want  string // the usage error's start; "" for none
	}{
		{"nope", false, refused},
		{"nope", true, refused},
		{"ingest", true, ""},
	} {
		o := &options{root: filepath.Join("..", ".."), template: tmpl, bin: t.TempDir(), addr: "127.0.0.1:0",
			fn: tc.fn, event: event, checkOnly: tc.check, lambdaPort: port, urlPort: 0, dashboardPort: -1, set: map[string]bool{}}
		err := invoke(context.Background(), o)
		if _, usage := err.(usageError); tc.want != "" && (!usage || !strings.HasPrefix(err.Error(), tc.want)) || tc.want == "" && err != nil {
			t.Errorf("invoke -fn %s (-check %v) with nothing running: %T %v;\nwant %q…", tc.fn, tc.check, err, err, tc.want)
		}
	}
}
