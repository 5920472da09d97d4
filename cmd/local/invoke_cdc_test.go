package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// make invoke of a cdc sample against a running stack: a change whose
// image has no version attribute is refused, naming the missing member
// (cdc would take the sample's sequence number, whatever make invoke made
// it, as the item's version, and hide the key's real changes or be hidden
// by them); the shipped samples, which carry versions, are sent.
func TestInvokeRefusesVersionlessCDCSampleOnARunningStack(t *testing.T) {
	var invoked atomic.Int32
	lambdaAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invoked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"batchItemFailures":[]}`))
	}))
	defer lambdaAPI.Close()
	u, err := url.Parse(lambdaAPI.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	shipped := filepath.Join(root, "events", "cdc", "dynamodb-modify.json")
	raw, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	versionless := filepath.Join(t.TempDir(), "no-version.json")
	if err := os.WriteFile(versionless, []byte(strings.ReplaceAll(string(raw), `"version": { "N": "2" },`, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, fn, event string
		refused         string // "" = sent
	}{
		{"a change without version, to cdc", "cdc", versionless, "Records[0].dynamodb.NewImage.version is missing"},
		{"the same, by logical id", "ProfilesCDCFunction453DCB16", versionless, "Records[0].dynamodb.NewImage.version is missing"},
		{"the shipped sample, with its version", "cdc", shipped, ""},
		{"a change without version, to timeline (no versions there)", "timeline", versionless, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := invoked.Load()
			err := invoke(context.Background(), &options{root: root, fn: c.fn, event: c.event, lambdaPort: port})
			switch {
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Errorf("make invoke FN=%s: %v; want refused naming %s", c.fn, err, c.refused)
			case c.refused != "" && invoked.Load() != before:
				t.Errorf("make invoke FN=%s was refused and still invoked the function", c.fn)
			case c.refused == "" && (err != nil || invoked.Load() != before+1):
				t.Errorf("make invoke FN=%s: %v (invoked %d times); want it sent once", c.fn, err, invoked.Load()-before)
			}
		})
	}
}

// make invoke of an event file the strict reader refuses (a key twice, text
// that is not UTF-8) is refused naming the place, before anything is
// invoked: the event is rewritten fresh for the stack, which would keep the
// last copy of the key and mend the text, so the function would get
// another event than the file.
func TestInvokeRefusesAnEventFileThatReadsTwoWays(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, doc, want string }{
		{"a key twice", `{"Records":[],"Records":[{"eventSource":"aws:kinesis"}]}`, "Records"},
		{"text that is not UTF-8", "{\"Records\":[{\"eventSource\":\"aws:kinesis\xff\"}]}", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := invoke(context.Background(), &options{root: filepath.Join("..", ".."), fn: "aggregate", event: file, lambdaPort: 1})
			if err == nil || !strings.Contains(err.Error(), "event file "+file) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("make invoke of %s: %v; want refused naming %s", c.name, err, c.want)
			}
		})
	}
}
