package cep

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzParseRule: any definition either is refused with a *RuleError or
// parses into a rule whose stored source parses again to the same rule;
// nothing panics (rules come from users, through the URL and cmd/rules).
func FuzzParseRule(f *testing.F) {
	for _, doc := range randomRules {
		f.Add(doc)
	}
	f.Add(`{"id":"x","pattern":[{"begin":"a","type":"t","where":"not (data.a.b in (1, 'x', true, null)) or exists(key)"}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		r, err := ParseRule([]byte(doc))
		if err != nil {
			if _, ok := err.(*RuleError); !ok {
				t.Fatalf("error %T %v, want *RuleError", err, err)
			}
			return
		}
		again, err := ParseRule(r.Source)
		if err != nil || again.ID != r.ID || again.Kind != r.Kind || len(again.Steps) != len(r.Steps) {
			t.Fatalf("the stored source %s does not parse back: %v", r.Source, err)
		}
	})
}

// FuzzDecodeState: a state item's blob, whatever it holds, decodes or is
// refused; it never panics.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeCEP(nil, &cepState{ord: 2, pending: []pendingEv{{t: 1, id: "e", typ: "A", hits: []hit{{rule: "r", mask: 1}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeCEP(b)
		if err == nil {
			if _, err := decodeCEP(encodeCEP(nil, st)); err != nil {
				t.Fatalf("re-encoding a decoded state: %v", err)
			}
		}
	})
}

// FuzzAdmin sends the rules API what a hostile caller might: any method,
// path, query and body, built from the routes it serves. Every answer is
// one a client can act on — a 2xx, or a 4xx saying what to change, never a
// 503 that has it retry for ever — and its body is one bounded JSON
// document.
func FuzzAdmin(f *testing.F) {
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(f), c.now), c.now, quiet)
	const envelope = `{"id":"1","type":"login_failed","key":"u1","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z"}`
	for _, s := range []struct{ method, path, query, body string }{
		{"POST", "/rules", "", `{"id":"r1","description":"three failures","pattern":[{"begin":"a","type":"login_failed","times":3}],"within":"1m"}`},
		{"GET", "/rules", "after=r0", ""},
		{"GET", "/rules/r1", "", ""},
		{"POST", "/rules/r1/disable", "", ""},
		{"POST", "/rules/r1/enable", "", ""},
		{"DELETE", "/rules/r1", "", ""},
		{"POST", "/test", "", `{"rules":[{"id":"t","pattern":[{"begin":"a","type":"login_failed"}]}],"events":[` + envelope + `],"outOfOrderness":"5s"}`},
		{"PUT", "/rules", "x=1", "{}"},
	} {
		f.Add(s.method, s.path, s.query, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, rawQuery, body string) {
		req := urlRequest(method, path, body)
		req.RawQueryString = rawQuery
		if q, err := url.ParseQuery(rawQuery); err == nil && len(q) > 0 {
			req.QueryStringParameters = map[string]string{}
			for k, v := range q {
				req.QueryStringParameters[k] = v[0]
			}
		}
		resp, err := a.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("%s %s?%s %q: Handle: %v", method, path, rawQuery, body, err)
		}
		if resp.StatusCode >= 500 || resp.StatusCode < 200 {
			t.Fatalf("%s %s?%s %q: %d %s", method, path, rawQuery, body, resp.StatusCode, resp.Body)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("%s %s %q: the answer is not JSON: %q", method, path, body, resp.Body)
		}
		if resp.StatusCode >= 400 && len(resp.Body) > 4096 {
			t.Fatalf("%s %s %q: a refusal of %d bytes", method, path, body, len(resp.Body))
		}
	})
}
