package cep

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// TestRulesAPIRefusesAmbiguousRequests sends the rules API what it used to
// store with another meaning than the sender's: a key twice (the engine ran
// the last copy while the stored rule kept both), invalid UTF-8 in a
// description, unknown fields of a test request. Each is a 400 naming the
// part, and no rule is stored.
func TestRulesAPIRefusesAmbiguousRequests(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	const steps = `"pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y"}]`
	const envelope = `{"id":"1","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`
	for _, tc := range []struct {
		name, path, body, part, text string
	}{
		{"within twice", "/rules", `{"id":"r",` + steps + `,"within":"1m","afterMatch":"skipPastLastEvent","within":"24h"}`, "within", `duplicate object key "within"`},
		{"id twice", "/rules", `{"id":"one","id":"two",` + steps + `,"within":"1m"}`, "id", `duplicate object key "id"`},
		{"a step's key twice", "/rules", `{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y","type":"z"}],"within":"1m"}`, "pattern[1].type", "duplicate object key"},
		{"invalid UTF-8 in the description", "/rules", `{"id":"r","description":"caf` + "\xe9" + `",` + steps + `,"within":"1m"}`, "description", "invalid UTF-8"},
		{"a lone surrogate in the description", "/rules", `{"id":"r","description":"x\ud83d",` + steps + `,"within":"1m"}`, "description", "surrogate"},
		{"a misspelt step field", "/rules", `{"id":"r","pattern":[{"begin":"a","type":"x","whre":"data.x > 1"}]}`, "pattern[0].whre", `unknown field; did you mean "where"?`},
		{"nested past the bound", "/rules", `{"id":"r","keys":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "keys" + strings.Repeat("[0]", 63), "deeper than 64"},
		{"a test request's rule with a key twice", "/test", `{"rules":[{"id":"r",` + steps + `,"within":"1m","within":"24h"}],"events":[]}`, "rules[0].within", "duplicate object key"},
		{"a test request's misspelt field", "/test", `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[` + envelope + `],"outOfOrdernes":"5s"}`, "outOfOrdernes", `did you mean "outOfOrderness"?`},
		{"a test request's event with a name in other case", "/test", `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[{"id":"1","TYPE":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]}`, "events[0].TYPE", `did you mean "type"?`},
		{"a test request's event with an unknown field", "/test", `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[{"id":"1","type":"x","tpyo":1,"key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]}`, "events[0].tpyo", "unknown field"},
		{"a test request's event with a control character in its key", "/test", `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[{"id":"1","type":"x","key":"a\u0007","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]}`, "events[0].key", "holds control character U+0007"},
		{"a test request's event with a key twice", "/test", `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[{"id":"1","id":"2","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]}`, "events[0].id", "duplicate object key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, a, urlRequest("POST", tc.path, tc.body), tc.part, tc.text)
		})
	}
	resp, err := a.Handle(ctx, urlRequest("GET", "/rules", ""))
	if err != nil || resp.StatusCode != 200 || resp.Body != `{"rules":[]}` {
		t.Fatalf("rules after the refusals: %v %d %s, want none", err, resp.StatusCode, resp.Body)
	}
}

// TestRulesAPIRefusesACompressedBody: a body sent with a Content-Encoding
// other than identity is a 415 naming the header, as at ingest; the rules
// API read a gzip body as JSON ("unexpected byte 0x1f") and took a plain
// one labelled gzip. No rule is stored.
func TestRulesAPIRefusesACompressedBody(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	req := urlRequest("POST", "/rules", `{"id":"r","pattern":[{"begin":"a","type":"x"}]}`)
	req.Headers = map[string]string{"content-encoding": "gzip"}
	resp, err := a.Handle(ctx, req)
	if err != nil || resp.StatusCode != http.StatusUnsupportedMediaType || resp.Headers["Accept-Encoding"] != "identity" ||
		!strings.Contains(resp.Body, `"part":"Content-Encoding"`) || !strings.Contains(resp.Body, "Content-Encoding: gzip: the body must be sent uncompressed") {
		t.Fatalf("POST /rules with Content-Encoding gzip: %v %d %v %s; want 415 naming Content-Encoding", err, resp.StatusCode, resp.Headers, resp.Body)
	}
	if resp, err := a.Handle(ctx, urlRequest("GET", "/rules", "")); err != nil || resp.Body != `{"rules":[]}` {
		t.Fatalf("rules after the refusal: %v %s, want none", err, resp.Body)
	}
}

// TestCEPConfigRefusesDuplicatesAndUnknownFields: the detect function's
// config (CEP_CONFIG) is read as strictly as the APIs.
func TestCEPConfigRefusesDuplicatesAndUnknownFields(t *testing.T) {
	for _, tc := range []struct{ doc, field, text string }{
		{`{"name":"detect","outOfOrderness":"5s","outOfOrderness":"1h"}`, "outOfOrderness", "duplicate object key"},
		{`{"name":"det` + "\xff" + `ect"}`, "name", "invalid UTF-8"},
		{`{"name":"detect","idelTimeout":"1m"}`, "idelTimeout", `did you mean "idleTimeout"?`},
		{`{"name":"detect","idleTimeout":60}`, "idleTimeout", "must be a JSON string, not a number"},
	} {
		_, err := ParseConfig([]byte(tc.doc))
		ce, ok := err.(*pipeline.ConfigError)
		if !ok || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.text) {
			t.Errorf("%s: %v, want field %q with %q", tc.doc, err, tc.field, tc.text)
		}
	}
}

// TestReadEventsIsStrict: cmd/rules test reads its events file as ingest
// reads a request, naming the event and the field.
func TestReadEventsIsStrict(t *testing.T) {
	const e0 = `{"id":"1","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`
	for _, tc := range []struct{ in, want string }{
		{e0 + "\n\n" + `{"id":"2","id":"3","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`, `events[1] (line 3).id: duplicate object key "id"`},
		{`[` + e0 + `,{"id":"2","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"n":"\udc00"}}]`, "events[1].data.n: invalid UTF-8"},
		{`[` + e0 + `,` + e0 + `,` + e0 + `]`, "events: more than 2 events"},
		{e0 + "\n" + `{"id":"2","TYPE":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`, `events[1] (line 2).TYPE: unknown field; did you mean "type"?`},
		// A field error names the line too, as a syntax error does: with a
		// blank line before it, events[1] is on line 3 of the file.
		{e0 + "\n\n" + `{"id":"2","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z"}`, "events[1] (line 3).sentAt: is required"},
		{`[{"id":"2","type":"x","tpyo":1,"key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]`, `events[0].tpyo: unknown field`},
		// As ingest refuses them: cmd/rules test printed the key raw.
		{e0 + "\n" + `{"id":"2","type":"x","key":"a\u001b[2J","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`, "events[1] (line 2).key: holds control character U+001B"},
		{`[{"id":"2\u0085","type":"x","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}]`, "events[0].id: holds control character U+0085"},
		// A line past the bound is named, not "token too long".
		{e0 + "\n" + strings.Repeat(" ", maxEventLine+1) + e0, "events[1] (line 2): longer than 2097152 bytes"},
	} {
		_, err := ReadEvents(strings.NewReader(tc.in), 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.in, err, tc.want)
		}
	}
	for _, in := range []string{e0 + "\n" + e0, "[" + e0 + "]", "[]", ""} {
		if _, err := ReadEvents(strings.NewReader(in), 2); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestRulesAPIAnswersAreBounded sends the rules API what it repeats in its
// answers — the path of a route that is not one, a rule id, a test
// request's outOfOrderness — each far longer than any valid one: the
// answer names the part and quotes the value cut, never whole.
func TestRulesAPIAnswersAreBounded(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	long := strings.Repeat("x", 100_000)
	const rules = `{"rules":[{"id":"r","pattern":[{"begin":"a","type":"x"}]}],"events":[],"outOfOrderness":"`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		text                     string
	}{
		{"not a route", "GET", "/" + long, "", http.StatusNotFound, "not a route"},
		{"an unknown method", long, "/rules", "", http.StatusNotFound, "not a route"},
		{"get a long id", "GET", "/rules/" + long, "", http.StatusNotFound, "no such rule"},
		{"delete a long id", "DELETE", "/rules/" + long, "", http.StatusNotFound, "no such rule"},
		{"disable a long id", "POST", "/rules/" + long + "/disable", "", http.StatusNotFound, "no such rule"},
		{"enable a long id", "POST", "/rules/" + long + "/enable", "", http.StatusNotFound, "no such rule"},
		{"a long outOfOrderness", "POST", "/test", rules + long + `"}`, http.StatusBadRequest, "outOfOrderness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := a.Handle(ctx, urlRequest(tc.method, tc.path, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.text) || len(resp.Body) > 2*maxEchoBytes+1024 {
				t.Fatalf("%d, %d bytes: %.300s\nwant %d with %q in at most %d bytes", resp.StatusCode, len(resp.Body), resp.Body, tc.status, tc.text, 2*maxEchoBytes+1024)
			}
		})
	}
}

// TestRulesAPIRefusesUnknownQueryParameters: a query parameter no route
// takes is a 400 naming it, before anything is done, where it was ignored:
// DELETE /rules/big?dryRun=true deleted the rule, and GET /rules?afer=x
// answered the first page as if it were the next.
func TestRulesAPIRefusesUnknownQueryParameters(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	if resp, err := a.Handle(ctx, urlRequest("POST", "/rules", `{"id":"big","pattern":[{"begin":"p","type":"payment"}]}`)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("adding the rule: %v %+v", err, resp)
	}
	for _, tc := range []struct {
		method, path string
		query        map[string]string
		part, text   string
	}{
		{"DELETE", "/rules/big", map[string]string{"dryRun": "true"}, "dryRun", "takes no query parameters"},
		{"POST", "/rules/big/disable", map[string]string{"at": "2026-12-01T00:00:00Z"}, "at", "takes no query parameters"},
		{"POST", "/rules", map[string]string{"after": "x"}, "after", "takes no query parameters"},
		{"GET", "/rules", map[string]string{"afer": "big"}, "afer", `did you mean "after"?`},
		{"GET", "/rules/big", map[string]string{"version": "1"}, "version", "takes no query parameters"},
		{"POST", "/test", map[string]string{"verbose": "1"}, "verbose", "takes no query parameters"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := urlRequest(tc.method, tc.path, `{"id":"other","pattern":[{"begin":"p","type":"payment"}]}`)
			req.QueryStringParameters = tc.query
			wantRefused(t, a, req, tc.part, tc.text)
		})
	}
	// Nothing was done: the rule is still there, active, and no other
	// was added.
	resp, err := a.Handle(ctx, urlRequest("GET", "/rules", ""))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"id":"big"`) || strings.Contains(resp.Body, `"other"`) || !strings.Contains(resp.Body, `"status":"active"`) {
		t.Fatalf("rules after the refusals: %v %d %s, want big alone, active", err, resp.StatusCode, resp.Body)
	}
	// The parameter a route does take still works.
	req := urlRequest("GET", "/rules", "")
	req.QueryStringParameters = map[string]string{"after": "big"}
	if resp, err := a.Handle(ctx, req); err != nil || resp.StatusCode != http.StatusOK || strings.Contains(resp.Body, `"id":"big"`) {
		t.Fatalf("GET /rules?after=big: %v %d %s, want 200 without big", err, resp.StatusCode, resp.Body)
	}
}

// wantRefused sends req and fails t unless the answer is a 400 naming part
// with text in its error.
func wantRefused(t *testing.T, a *Admin, req events.LambdaFunctionURLRequest, part, text string) {
	t.Helper()
	resp, err := a.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got apiError
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatalf("%d %q: %v", resp.StatusCode, resp.Body, err)
	}
	if resp.StatusCode != http.StatusBadRequest || got.Part != part || !strings.Contains(got.Error, text) {
		t.Fatalf("%d %s\nwant 400 with part %q and %q", resp.StatusCode, resp.Body, part, text)
	}
}

// TestRulesAPIRoutesExactPaths: a path that is not exactly a route — a
// trailing slash, an empty segment — is a 404 naming it, as any other
// path that is no route, where DELETE /rules/hr-all/ deleted hr-all (the
// slashes were trimmed). Nothing is done.
func TestRulesAPIRoutesExactPaths(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	if resp, err := a.Handle(ctx, urlRequest("POST", "/rules", `{"id":"hr-all","pattern":[{"begin":"p","type":"payment"}]}`)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("adding the rule: %v %+v", err, resp)
	}
	for _, tc := range []struct{ method, path string }{
		{"DELETE", "/rules/hr-all/"},
		{"DELETE", "/rules//hr-all"},
		{"POST", "/rules/hr-all/disable/"},
		{"POST", "/rules/hr-all//disable"},
		{"GET", "/rules/hr-all/"},
		{"GET", "/rules/"},
		{"GET", "//rules"},
		{"POST", "/rules/"},
		{"POST", "/test/"},
		{"DELETE", "rules/hr-all"},
		// A function URL hands the path over percent-encoded: an encoded
		// slash is part of a segment, not a route's.
		{"POST", "/rules/hr-all%2Fdisable"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, err := a.Handle(ctx, urlRequest(tc.method, tc.path, `{"id":"other","pattern":[{"begin":"p","type":"payment"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			quoted, _ := json.Marshal(strconv.Quote(tc.path))
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(resp.Body, "not a route") || !strings.Contains(resp.Body, strings.Trim(string(quoted), `"`)) {
				t.Fatalf("%d %s\nwant 404 naming %q as not a route", resp.StatusCode, resp.Body, tc.path)
			}
		})
	}
	resp, err := a.Handle(ctx, urlRequest("GET", "/rules/hr-all", ""))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"status":"active"`) {
		t.Fatalf("hr-all after the refusals: %v %d %s, want it active", err, resp.StatusCode, resp.Body)
	}
	if resp, err := a.Handle(ctx, urlRequest("GET", "/rules", "")); err != nil || strings.Contains(resp.Body, `"other"`) {
		t.Fatalf("rules after the refusals: %v %s, want no rule other", err, resp.Body)
	}
}

// TestRulesAPIRefusesARepeatedParameter: ?after=a&after=b (which a
// function URL hands over joined, "a,b") is a 400 naming after, as the
// commands API refuses a repeated minVersion, where it listed the rules
// after "a,b" as if one had been asked for.
func TestRulesAPIRefusesARepeatedParameter(t *testing.T) {
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	for _, tc := range []struct {
		name, raw  string
		query      map[string]string
		part, text string
	}{
		{"after twice", "after=a&after=b", map[string]string{"after": "a,b"}, "after", "after: given 2 times"},
		{"after twice, escaped", "after=a&%61fter=b", map[string]string{"after": "a,b"}, "after", "after: given 2 times"},
		// An event made by hand, without the raw query: the joined value
		// is no rule id.
		{"after joined, no raw query", "", map[string]string{"after": "a,b"}, "after", `"a,b" is not a rule id`},
		{"after not an id", "after=a%20b", map[string]string{"after": "a b"}, "after", `"a b" is not a rule id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := urlRequest("GET", "/rules", "")
			req.RawQueryString, req.QueryStringParameters = tc.raw, tc.query
			wantRefused(t, a, req, tc.part, tc.text)
		})
	}
}

// TestRulesAPIRefusesLooseRequests sends the rules API requests it took
// and read otherwise than the sender could mean, as a hostile trial found
// them: each is a 400 naming the part, and nothing is done (the rule big
// stays active, and no other rule is stored).
func TestRulesAPIRefusesLooseRequests(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	if resp, err := a.Handle(ctx, urlRequest("POST", "/rules", `{"id":"big","pattern":[{"begin":"p","type":"payment"}]}`)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("adding the rule: %v %+v", err, resp)
	}
	const event = `{"id":"e1","type":"payment","key":"u1","occurredAt":"2026-12-01T10:00:00Z","sentAt":"2026-12-01T10:00:00Z"}`
	for _, tc := range []struct {
		name, method, path, body, part, text string
	}{
		// null was read as an object with no field ("id: required").
		{"a rule of null", "POST", "/rules", ` null `, "", "rule: must be a JSON object, not null"},
		{"a test request of null", "POST", "/test", `null`, "", "not a test request: must be a JSON object, not null"},
		{"a test rule of null", "POST", "/test", `{"rules":[null],"events":[` + event + `]}`, "rules[0]", "rules[0]: rule: must be a JSON object, not null"},
		// A body sent to a route that takes none was ignored: the rule was
		// disabled, or deleted, as if it had not been sent.
		{"disable with a body", "POST", "/rules/big/disable", `{"junk":1}`, "junk", "POST /rules/<id>/disable takes no body"},
		{"enable with a body", "POST", "/rules/big/enable", `{"at":"2026-12-01T00:00:00Z"}`, "at", "POST /rules/<id>/enable takes no body"},
		{"delete with a body", "DELETE", "/rules/big", `{"dryRun":true}`, "dryRun", "DELETE /rules/<id> takes no body"},
		{"get with a body", "GET", "/rules/big", `x`, "body", `GET /rules/<id> takes no body; send none (this one is "x")`},
		{"list with a body", "GET", "/rules", `[{"after":"big"}]`, "body", "GET /rules takes no body"},
		// An empty keys list read every key (it matched u1).
		{"keys empty", "POST", "/rules", `{"id":"other","pattern":[{"begin":"p","type":"payment"}],"keys":[]}`, "keys", "leave keys out to read every key"},
		// Two rules of one id ran, their matches named alike.
		{"a test rule's id twice", "POST", "/test", `{"rules":[{"id":"other","pattern":[{"begin":"p","type":"payment"}]},{"id":"b","pattern":[{"begin":"p","type":"refund"}]},{"id":"other","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}],"events":[` + event + `]}`, "rules[2].id", `"other" is the id of rules[0] too`},
		{"a test rule given twice", "POST", "/test", `{"rules":[{"id":"other","pattern":[{"begin":"p","type":"payment"}]},{"id":"other","pattern":[{"begin":"p","type":"payment"}]}],"events":[` + event + `]}`, "rules[1].id", `"other" is the id of rules[0] too`},
		{"a test rule's keys empty", "POST", "/test", `{"rules":[{"id":"other","pattern":[{"begin":"p","type":"payment"}],"keys":[]}],"events":[` + event + `]}`, "rules[0].keys", "leave keys out to read every key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, a, urlRequest(tc.method, tc.path, tc.body), tc.part, tc.text)
		})
	}
	resp, err := a.Handle(ctx, urlRequest("GET", "/rules", ""))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"id":"big"`) || strings.Contains(resp.Body, `"other"`) || !strings.Contains(resp.Body, `"status":"active"`) {
		t.Fatalf("rules after the refusals: %v %d %s, want big alone, active", err, resp.StatusCode, resp.Body)
	}
}
