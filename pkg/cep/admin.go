package cep

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/batch"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Admin is the rules function behind an IAM-authenticated function URL:
// the same commands as cmd/rules, over HTTP.
//
//	GET    /rules              list (deleted rules too, until their tombstone expires), by id,
//	                           a page of at most MaxListAnswerBytes: "next" names the last
//	                           rule listed when more follow; GET /rules?after=<next> lists them
//	                           (after is a place in the order of ids: a well-formed id
//	                           of no rule, one gone since, lists the rules after it)
//	GET    /rules/<id>         one rule
//	POST   /rules              add the rule in the body: 201; 200 with "alreadyAdded" when
//	                           that rule is stored and active already (a retry: nothing
//	                           changes); 409 when its id is another rule's, a disabled or
//	                           a deleted one's
//	POST   /rules/<id>/disable stop it
//	POST   /rules/<id>/enable  start it again
//	DELETE /rules/<id>         delete it
//	POST   /test               {"rules": [<rule>...], "events": [<envelope>...], "outOfOrderness": "5s"}:
//	                           run rules over events offline and return the matches: at most
//	                           MaxTestMatches, within MaxTestAnswerBytes; "matchesFound" counts
//	                           them all, "truncated" says some were left out; "eventsRun" counts
//	                           the events run, and "stopped" says why when the function's time
//	                           ran out before the last (the matches made by then are answered)
//
// A refused rule is a 400 naming the part: {"error": "...", "part": "pattern[1].where"}.
// A path is a route exactly (no trailing slash, no empty segment) or a 404
// naming it; a query parameter no route takes, or one given twice, is a
// 400 naming it, as is a body sent to a route that takes none (any but
// POST /rules and POST /test).
type Admin struct {
	store *Store
	now   func() time.Time
	log   *slog.Logger
}

// NewAdmin serves store's rules.
func NewAdmin(store *Store, now func() time.Time, log *slog.Logger) *Admin {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Admin{store: store, now: now, log: log}
}

// Bounds of the answer to POST /test: the first matches made, as many as
// fit both (a function URL answers at most 6 MB). Matches past them are
// counted, not rendered.
const (
	MaxTestMatches     = 1000
	MaxTestAnswerBytes = 1 << 20
	// testAnswerRoom is the answer's room for what is not a match.
	testAnswerRoom = 1 << 10
)

// MaxListAnswerBytes bounds a page of GET /rules (a function URL answers
// at most 6 MB; 2,000 rules of 8 KB would be 16).
const MaxListAnswerBytes = 1 << 20

// list answers GET /rules: the rules whose id sorts after after (all, for
// ""), as many as fit MaxListAnswerBytes, and "next" when more follow.
func (a *Admin) list(rules []*StoredRule, after string) events.LambdaFunctionURLResponse {
	now := a.now()
	views := make([]json.RawMessage, 0, min(len(rules), 256))
	size, last, next := testAnswerRoom, "", ""
	for _, sr := range rules {
		if sr.Rule.ID <= after {
			continue
		}
		b, err := json.Marshal(sr.View(now))
		if err != nil {
			return respond(http.StatusInternalServerError, apiError{Error: fmt.Sprintf("encoding rule %q failed", sr.Rule.ID)})
		}
		if size+len(b)+1 > MaxListAnswerBytes && len(views) > 0 {
			next = last
			break
		}
		size += len(b) + 1
		views, last = append(views, b), sr.Rule.ID
	}
	answer := map[string]any{"rules": views}
	if next != "" {
		answer["next"] = next
	}
	return respond(http.StatusOK, answer)
}

// Bounds of a request.
const (
	maxAdminBody   = 1 << 20
	MaxTestEvents  = 10_000
	maxTestRules   = 100
	maxOutOfOrder  = time.Hour
	adminJSONTypes = "application/json"
)

// maxEchoBytes bounds what an answer repeats of a request's path, method
// or fields: an answer is bounded whatever was asked.
const maxEchoBytes = 200

type apiError struct {
	Error string `json:"error"`
	Part  string `json:"part,omitempty"`
}

func respond(status int, v any) events.LambdaFunctionURLResponse {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: map[string]string{"Content-Type": adminJSONTypes}, Body: string(b)}
}

// Handle serves one function URL request.
func (a *Admin) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	if msg, compressed := strictjson.CompressedBody(req.Headers); compressed {
		r := respond(http.StatusUnsupportedMediaType, apiError{Error: msg, Part: "Content-Encoding"})
		r.Headers["Accept-Encoding"] = "identity"
		return r, nil
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return respond(http.StatusBadRequest, apiError{Error: "the body is not valid base64"}), nil
		}
		body = b
	}
	if len(body) > maxAdminBody {
		return respond(http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("the body is %d bytes; at most %d", len(body), maxAdminBody)}), nil
	}
	method := req.RequestContext.HTTP.Method
	// The path is a route exactly or none: "/rules/hr-all/" or
	// "/rules//hr-all" is not "/rules/hr-all" (trimmed, the first deleted
	// hr-all).
	path, rooted := strings.CutPrefix(req.RawPath, "/")
	parts := strings.Split(path, "/")
	if !rooted || slices.Contains(parts, "") {
		return a.notARoute(method, req.RawPath), nil
	}
	// Only the list is paged (after); a parameter no route takes is
	// refused before anything is done, never ignored.
	var known []string
	if path == "rules" && method == http.MethodGet {
		known = []string{"after"}
	}
	if name, msg := strictjson.UnknownParameter(req.QueryStringParameters, "this route", known...); name != "" {
		return respond(http.StatusBadRequest, apiError{Error: msg, Part: name}), nil
	}
	// A parameter given twice reaches us joined by a comma: refused, as
	// any value nobody sent.
	if name, msg := strictjson.RepeatedParameter(req.RawQueryString); name != "" {
		return respond(http.StatusBadRequest, apiError{Error: msg, Part: name}), nil
	}
	// Only POST /rules and POST /test read a body; one sent to another
	// route is refused before anything is done, never ignored (POST
	// /rules/big/disable {"at": ...} disabled big now).
	if route := bodylessRoute(method, parts); route != "" && len(bytes.Trim(body, jsonSpace)) > 0 {
		part := firstField(body)
		return respond(http.StatusBadRequest, apiError{Part: part, Error: fmt.Sprintf("%s: %s takes no body; send none (this one is %s)",
			part, route, strictjson.QuoteCut(string(body), maxEchoBytes))}), nil
	}
	switch {
	case path == "rules" && method == http.MethodGet:
		after, paged := req.QueryStringParameters["after"]
		if paged && !idPattern.MatchString(after) {
			return respond(http.StatusBadRequest, apiError{Part: "after", Error: fmt.Sprintf(
				"after: %s is not a rule id (the \"next\" of the answer before); given twice, a parameter arrives joined by a comma: give it once", strictjson.QuoteCut(after, maxEchoBytes))}), nil
		}
		rules, err := a.store.List(ctx)
		if err != nil {
			return a.fail(ctx, err), nil
		}
		return a.list(rules, after), nil
	case path == "rules" && method == http.MethodPost:
		r, err := ParseRule(body)
		if err != nil {
			return a.fail(ctx, err), nil
		}
		sr, added, err := a.store.Add(ctx, r)
		if err != nil {
			return a.fail(ctx, err), nil
		}
		from := sr.Intervals[0].From
		if !added {
			// A retry of an add that went through: what it asks for is
			// stored. It reads events from its current interval on (a
			// rule disabled and enabled again read none in between).
			from = sr.Intervals[len(sr.Intervals)-1].From
			return respond(http.StatusOK, map[string]any{"rule": sr.View(a.now()), "appliesFrom": from, "alreadyAdded": true,
				"note": fmt.Sprintf("the rule was already added with this definition (nothing changed); it reads events that reach the stream from %s on", from.Format(time.RFC3339))}), nil
		}
		a.log.InfoContext(ctx, "rule added", "rule", r.ID, "appliesFrom", from)
		return respond(http.StatusCreated, map[string]any{"rule": sr.View(a.now()), "appliesFrom": from,
			"note": fmt.Sprintf("the rule reads events that reach the stream from %s on (%s after it was added)", from.Format(time.RFC3339), a.store.ActivationDelay())}), nil
	case len(parts) == 2 && parts[0] == "rules" && method == http.MethodGet:
		sr, err := a.store.Get(ctx, parts[1])
		if err != nil {
			return a.fail(ctx, err), nil
		}
		return respond(http.StatusOK, map[string]any{"rule": sr.View(a.now())}), nil
	case len(parts) == 2 && parts[0] == "rules" && method == http.MethodDelete:
		return a.changed(ctx, "deleted", parts[1], a.store.Delete)
	case len(parts) == 3 && parts[0] == "rules" && parts[2] == "disable" && method == http.MethodPost:
		return a.changed(ctx, "disabled", parts[1], a.store.Disable)
	case len(parts) == 3 && parts[0] == "rules" && parts[2] == "enable" && method == http.MethodPost:
		return a.changed(ctx, "enabled", parts[1], a.store.Enable)
	case path == "test" && method == http.MethodPost:
		return a.test(ctx, body), nil
	}
	return a.notARoute(method, req.RawPath), nil
}

// bodylessRoute is the route, as the 404 lists it, of a request to a route
// that takes no body; "" for POST /rules, POST /test and what is no route.
func bodylessRoute(method string, parts []string) string {
	switch {
	case len(parts) == 1 && parts[0] == "rules" && method == http.MethodGet:
		return "GET /rules"
	case len(parts) == 2 && parts[0] == "rules" && (method == http.MethodGet || method == http.MethodDelete):
		return method + " /rules/<id>"
	case len(parts) == 3 && parts[0] == "rules" && (parts[2] == "disable" || parts[2] == "enable") && method == http.MethodPost:
		return "POST /rules/<id>/" + parts[2]
	}
	return ""
}

// jsonSpace is the white space JSON allows around a value: a body of only
// it says nothing.
const jsonSpace = " \t\r\n"

// firstField names what a refused body holds: its first key when it is a
// well-formed JSON object with one (cut, as a query parameter's name is),
// else "body".
func firstField(body []byte) string {
	if strictjson.Check(body, strictjson.Options{MaxBytes: maxAdminBody, Name: "body"}) != nil {
		return "body"
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "body"
	}
	if t, err := d.Token(); err == nil {
		if k, ok := t.(string); ok {
			return strictjson.Cut(k, maxEchoBytes)
		}
	}
	return "body"
}

// notARoute is the 404 of a request whose method and path, as sent, are
// no route.
func (a *Admin) notARoute(method, path string) events.LambdaFunctionURLResponse {
	return respond(http.StatusNotFound, apiError{Error: fmt.Sprintf("%s %s: not a route (GET /rules, GET /rules/<id>, POST /rules, POST /rules/<id>/disable, POST /rules/<id>/enable, DELETE /rules/<id>, POST /test)", strictjson.QuoteCut(method, maxEchoBytes), strictjson.QuoteCut(path, maxEchoBytes))})
}

func (a *Admin) changed(ctx context.Context, what, id string, f func(context.Context, string) (*StoredRule, error)) (events.LambdaFunctionURLResponse, error) {
	sr, err := f(ctx, id)
	if err != nil {
		return a.fail(ctx, err), nil
	}
	a.log.InfoContext(ctx, "rule "+what, "rule", id, "status", sr.Status, "intervals", sr.Intervals)
	return respond(http.StatusOK, map[string]any{"rule": sr.View(a.now())}), nil
}

// fail turns an error into its answer.
func (a *Admin) fail(ctx context.Context, err error) events.LambdaFunctionURLResponse {
	var re *RuleError
	var se *StateError
	switch {
	case errors.As(err, &re):
		return respond(http.StatusBadRequest, apiError{Error: err.Error(), Part: re.Part})
	case errors.Is(err, ErrNotFound):
		return respond(http.StatusNotFound, apiError{Error: err.Error()})
	case errors.Is(err, ErrExists), errors.As(err, &se):
		return respond(http.StatusConflict, apiError{Error: err.Error()})
	case errors.Is(err, ErrTooMany):
		return respond(http.StatusUnprocessableEntity, apiError{Error: err.Error()})
	}
	a.log.ErrorContext(ctx, "rules request failed", "error", err.Error())
	return respond(http.StatusServiceUnavailable, apiError{Error: err.Error()})
}

// TestRequest is the body of POST /test.
type TestRequest struct {
	Rules          []json.RawMessage `json:"rules"`
	Events         []json.RawMessage `json:"events"`
	OutOfOrderness string            `json:"outOfOrderness,omitempty"`
}

func (a *Admin) test(ctx context.Context, body []byte) events.LambdaFunctionURLResponse {
	var req TestRequest
	if err := strictjson.Decode(body, &req, strictjson.Options{MaxBytes: maxAdminBody, Name: "body"}); err != nil {
		var se *strictjson.Error
		errors.As(err, &se)
		part := ""
		if se != nil {
			part = se.Path
		}
		return respond(http.StatusBadRequest, apiError{Error: "not a test request: " + err.Error(), Part: part})
	}
	if len(req.Rules) == 0 || len(req.Rules) > maxTestRules {
		return respond(http.StatusBadRequest, apiError{Error: fmt.Sprintf("rules: give 1 to %d rules", maxTestRules), Part: "rules"})
	}
	if len(req.Events) > MaxTestEvents {
		return respond(http.StatusBadRequest, apiError{Error: fmt.Sprintf("events: at most %d", MaxTestEvents), Part: "events"})
	}
	var ooo time.Duration
	if req.OutOfOrderness != "" {
		d, err := time.ParseDuration(req.OutOfOrderness)
		if err != nil || d < 0 || d > maxOutOfOrder {
			return respond(http.StatusBadRequest, apiError{Error: fmt.Sprintf("outOfOrderness: %s: want a duration from 0s to %s", strictjson.QuoteCut(req.OutOfOrderness, maxEchoBytes), maxOutOfOrder), Part: "outOfOrderness"})
		}
		ooo = d
	}
	var rules []*Rule
	// A match is named by its rule's id: two rules of one id would make
	// matches that cannot be told apart.
	places := map[string]int{}
	for i, raw := range req.Rules {
		r, err := ParseRule(raw)
		if err == nil {
			if j, ok := places[r.ID]; ok {
				err = ruleErr("id", "%s is the id of rules[%d] too: give each rule its own id (a match is named by its rule's id)", strictjson.QuoteCut(r.ID, maxEchoBytes), j)
			}
		}
		if err != nil {
			var re *RuleError
			errors.As(err, &re)
			part := fmt.Sprintf("rules[%d]", i)
			if re != nil && re.Part != "" {
				part += "." + re.Part
			}
			return respond(http.StatusBadRequest, apiError{Error: fmt.Sprintf("rules[%d]: %v", i, err), Part: part})
		}
		places[r.ID] = i
		rules = append(rules, r)
	}
	evs := make([]stream.Envelope, len(req.Events))
	for i, raw := range req.Events {
		// As ingest reads them, so a test runs on what ingest accepts.
		if part, err := decodeEvent(fmt.Sprintf("events[%d]", i), raw, &evs[i]); err != nil {
			return respond(http.StatusBadRequest, apiError{Error: err.Error(), Part: part})
		}
	}
	// A match's record (its envelope) is longer than its entry here, so
	// records that fit MaxTestAnswerBytes less the room make an answer
	// that fits it.
	// 100 rules over 10,000 events is seconds of a whole core, and the
	// function has a fraction of one: the run stops in time to answer.
	ctx, cancel := batch.Reserve(ctx, testReserve)
	defer cancel()
	ms, o, ran, err := TestRulesUntil(ctx, rules, evs, ooo, MaxTestMatches, MaxTestAnswerBytes-testAnswerRoom)
	if err != nil {
		return respond(http.StatusBadRequest, apiError{Error: err.Error()})
	}
	if ms == nil {
		ms = []OfflineMatch{}
	}
	ans := testAnswer{Matches: ms, MatchesFound: o.Found, Truncated: o.Truncated, Late: o.Late, SetAside: o.Aside, Events: len(evs), EventsRun: ran}
	if ran < len(evs) {
		ans.Stopped = fmt.Sprintf("the function's time ran out after %d of the %d events: these are the matches made by then (partial matches still open are not closed); send fewer events or rules, or run `rules test` on your machine", ran, len(evs))
	}
	return respond(http.StatusOK, ans)
}

// testReserve is the time POST /test keeps to answer: it stops running
// events when less is left before the invocation's deadline.
const testReserve = 2 * time.Second

// testAnswer is the answer of POST /test.
type testAnswer struct {
	Matches []OfflineMatch `json:"matches"`
	// MatchesFound counts every match; Truncated says Matches lists fewer
	// (MaxTestMatches, MaxTestAnswerBytes).
	MatchesFound int  `json:"matchesFound"`
	Truncated    bool `json:"truncated"`
	Late         int  `json:"late"`
	// SetAside counts events the function would set aside (a key's state
	// budget, a value no sum holds).
	SetAside int `json:"setAside"`
	Events   int `json:"events"`
	// EventsRun is how many of the events were run: all of them unless
	// the function's time ran out, which Stopped then says.
	EventsRun int    `json:"eventsRun"`
	Stopped   string `json:"stopped,omitempty"`
}
