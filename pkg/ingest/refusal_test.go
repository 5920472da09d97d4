package ingest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ev is an envelope with the given id and key and the rest valid; extra is
// spliced in before the closing brace (`,"data":...`).
func ev(id, key, extra string) string {
	return fmt.Sprintf(`{"id":%q,"type":"page_view","key":%q,"occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"%s}`, id, key, extra)
}

func arr(evs ...string) string { return "[" + strings.Join(evs, ",") + "]" }

// refusalCases are requests that must be refused whole, each naming where
// the problem is. The fuzz target's corpus starts from them too.
var refusalCases = []struct {
	name   string
	body   string
	status int
	// index and field of errors[0]; index -1: a problem of the body as a
	// whole (no per-event errors).
	index int
	field string
	text  string // in the error message
}{
	{"duplicate id names both events", arr(ev("a", "k", ""), ev("b", "k", ""), ev("c", "k", ""), ev("b", "k2", "")),
		400, 3, "id", `events[3].id: duplicates events[1].id`},
	{"duplicate key in the envelope", arr(ev("a", "k", ""), `{"id":"b","id":"c","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
		400, 1, "id", `events[1].id: duplicate object key "id"`},
	{"duplicate key spelled with an escape", `{"key":"k","id":"a","type":"t","k\u0065y":"other","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`,
		400, 0, "key", `events[0].key: duplicate object key "key"`},
	{"duplicate key deep in data", arr(ev("a", "k", `,"data":{"cart":{"items":[{"sku":"x"},{"sku":"y","qty":1,"qty":2}]}}`)),
		400, 0, "data.cart.items[1].qty", `events[0].data.cart.items[1].qty: duplicate object key "qty"`},
	{"duplicate key among many", arr(ev("a", "k", `,"data":{`+manyKeys(200)+`,"k7":0}`)),
		400, 0, "data.k7", `duplicate object key "k7"`},
	{"invalid UTF-8 in data", arr(ev("a", "k", ""), ev("b", "k", `,"data":{"name":"caf`+"\xe9"+`"}`)),
		400, 1, "data.name", "events[1].data.name: invalid UTF-8 at byte"},
	{"invalid UTF-8 in an object key", arr(ev("a", "k", `,"data":{"n`+"\xff"+`":1}`)),
		400, 0, "data", "invalid UTF-8 at byte"},
	{"invalid UTF-8 in the key", `{"id":"a","type":"t","key":"k` + "\xc3\x28" + `","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`,
		400, 0, "key", "events[0].key: invalid UTF-8"},
	{"lone surrogate escape", arr(ev("a", "k", `,"data":"\ud83d"`)),
		400, 0, "data", `events[0].data: invalid UTF-8: \ud83d at byte`},
	{"lone low surrogate escape", arr(ev("a", "k", `,"data":"x\udc00"`)),
		400, 0, "data", "lone low surrogate"},
	// An id of only white space is no id: `make setaside` would list the
	// event as "record  :", and a log search cannot find it.
	{"blank id", arr(ev("a", "k", ""), ev("  ", "k", "")),
		400, 1, "id", `events[1].id: is blank (only white space): the event's id is required`},
	{"blank id of other white space", arr(ev("\u00a0\u2003", "k", "")),
		400, 0, "id", `events[0].id: is blank (only white space)`},
	{"blank key", arr(ev("a", " ", "")),
		400, 0, "key", `events[0].key: is blank (only white space)`},
	{"blank type", `{"id":"a","type":"   ","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`,
		400, 0, "type", `events[0].type: is blank (only white space)`},
	{"leap second", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"k","occurredAt":"2016-12-31T23:59:60Z","sentAt":"2016-12-31T23:59:60.5Z"}`),
		400, 1, "occurredAt", `events[1].occurredAt: "2016-12-31T23:59:60Z" is a leap second (second 60), which is not accepted`},
	// time.Parse takes +24:00, which time.Time cannot encode: the
	// envelope's stamp failed, and ingest answered 500 for the request.
	{"offset of 24 hours", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"k","occurredAt":"2026-12-07T10:00:00+24:00","sentAt":"2026-12-07T10:00:00+24:00"}`),
		400, 1, "occurredAt", `events[1].occurredAt: "2026-12-07T10:00:00+24:00" has the offset +24:00: RFC 3339 allows hours 00 to 23 and minutes 00 to 59`},
	{"control character in key", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"user\u0007","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
		400, 1, "key", "events[1].key: holds control character U+0007"},
	{"escaped newline in key", arr(ev("a", `user`+"\n"+`42`, "")),
		400, 0, "key", "holds control character U+000A"},
	{"C1 control in key", arr(ev("a", "user\u0085", "")),
		400, 0, "key", "holds control character U+0085"},
	// "\ufeffuser-1" and "user-1" look the same in every log and listing
	// but would be two keys; U+2028 ends a line in log viewers.
	{"byte order mark in key", arr(ev("a", "user-1", ""), ev("b", "\ufeffuser-1", "")),
		400, 1, "key", "events[1].key: holds invisible character U+FEFF at byte 0; identifiers are printable text"},
	{"raw line separator in id", `[{"id":"a` + "\u2028" + `b","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}]`,
		400, 0, "id", "events[0].id: holds line separator U+2028 at byte 1"},
	{"control character in type", `{"id":"a","type":"page\u0000view","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`,
		400, 0, "type", "events[0].type: holds control character U+0000"},
	{"raw control character in a string", "[" + ev("a", "k", `,"data":"a`+"\x01"+`b"`) + "]",
		400, 0, "data", "control character 0x01"},
	{"event older than the stream keeps", arr(ev("a", "k", ""), `{"id":"old","type":"t","key":"k","occurredAt":"2026-11-27T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
		400, 1, "occurredAt", "events[1].occurredAt: the event is 48h0m1s old when sent"},
	{"field name in another case", arr(ev("a", "k", ""), `{"id":"b","ID":"c","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`),
		400, 1, "ID", `events[1].ID: unknown field; did you mean "id"? (names are case-sensitive`},
	{"unknown field", arr(ev("a", "k", `,"bogus":1`)),
		400, 0, "bogus", `events[0].bogus: unknown field (names are case-sensitive; known: id, type, key, occurredAt, sentAt, receivedAt, data)`},
	// A name that is no identifier is a quoted path step, as every path
	// is: a top-level "data.amount" is not data's amount.
	{"unknown field that reads as a path", arr(ev("a", "k", `,"data.amount":1`)),
		400, 0, `["data.amount"]`, `events[0]["data.amount"]: unknown field`},
	{"unknown field holding an escape sequence", arr(ev("a", "k", `,"\u001b[2J":1`)),
		400, 0, `["\x1b[2J"]`, `events[0]["\x1b[2J"]: unknown field`},
	{"a change data capture record type", arr(ev("a", "k", ""), `{"id":"forge-1","type":"profile_changed","key":"victim","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z","data":{"key":"victim","version":"99999999","image":{"userId":"victim","plan":"attacker"}}}`),
		400, 1, "type", `events[1].type: "profile_changed" is a change data capture record type`},
	{"event from the year 9999", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"k","occurredAt":"9999-12-31T23:00:00Z","sentAt":"9999-12-31T23:00:01Z"}`),
		400, 1, "occurredAt", "events[1].occurredAt: 9999-12-31T23:00:00Z is outside 1970-01-01T00:00:00Z to 2200-01-01T00:00:00Z"},
	{"occurredAt the zero time", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"k","occurredAt":"0001-01-01T00:00:00Z","sentAt":"2026-11-29T07:41:08Z"}`),
		400, 1, "occurredAt", "events[1].occurredAt: 0001-01-01T00:00:00Z is outside 1970-01-01T00:00:00Z to 2200-01-01T00:00:00Z"},
	{"sentAt the zero time", arr(ev("a", "k", ""), `{"id":"b","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"0001-01-01T00:00:00Z"}`),
		400, 1, "sentAt", "events[1].sentAt: 0001-01-01T00:00:00Z is outside"},
	{"nested too deep", arr(ev("a", "k", `,"data":`+strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth))),
		400, 0, "data" + strings.Repeat("[0]", MaxDepth-2), fmt.Sprintf("nests arrays and objects deeper than %d levels", MaxDepth)},
	{"too many events", arr(repeatEvents(MaxEvents + 1)...), 413, -1, "", fmt.Sprintf("body: holds more than %d events", MaxEvents)},
	{"trailing data", ev("a", "k", "") + ` {"id":"b"}`, 400, -1, "", "body: not valid JSON: unexpected '{' at byte"},
	{"missing comma between events", "[" + ev("a", "k", "") + ev("b", "k", "") + "]", 400, -1, "", "after events[0], want ',' or ']'"},
	{"a number is not an envelope", `42`, 400, -1, "", "body: must be one envelope (a JSON object) or a JSON array of envelopes"},
	// Windows tools (PowerShell's UTF8 encoding, Notepad) write one; the
	// body is an object after it, so "must be an object" would mislead.
	{"a byte order mark", "\xef\xbb\xbf" + ev("a", "k", ""), 400, -1, "", "body: starts with a UTF-8 byte order mark (EF BB BF): send the JSON without it"},
	{"array element not an object", arr(ev("a", "k", ""), `"b"`), 400, 1, "", "events[1]: must be a JSON object"},
	{"truncated", `[{"id":"a","type":"t","key":"k","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07`,
		400, 0, "sentAt", "events[0].sentAt: not valid JSON: the body ends at byte"},
	{"bad escape", arr(ev("a", "k", `,"data":"\x"`)), 400, 0, "data", `in an escape`},
	{"bad number", arr(ev("a", "k", `,"data":01`)), 400, 0, "", "events[0]: not valid JSON: unexpected '1' at byte 116 in an object"},
	{"bad fraction", arr(ev("a", "k", `,"data":1.`)), 400, 0, "data", "after a decimal point"},
	{"bad literal", arr(ev("a", "k", `,"data":nul`)), 400, 0, "data", "in a literal"},
}

func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	return strings.Join(parts, ",")
}

func repeatEvents(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ev(fmt.Sprintf("e-%d", i), "k", "")
	}
	return out
}

// TestHandleRefusesNamingTheField runs every refusal case through the
// handler: the status, the event's index and field in errors[0] and in the
// message, and nothing written.
func TestHandleRefusesNamingTheField(t *testing.T) {
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			h := New(refusingPutter{t}, "events", WithClock(func() time.Time { return serverNow }))
			resp, err := h.Handle(context.Background(), post(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, resp.Body)
			}
			var er ErrorResponse
			if err := json.Unmarshal([]byte(resp.Body), &er); err != nil {
				t.Fatalf("body %q: %v", resp.Body, err)
			}
			if !strings.Contains(er.Error, tc.text) {
				t.Errorf("error %q does not contain %q", er.Error, tc.text)
			}
			if tc.index < 0 {
				if len(er.Errors) != 0 {
					t.Errorf("per-event errors %+v for a problem of the whole body", er.Errors)
				}
				return
			}
			if len(er.Errors) == 0 {
				t.Fatalf("no per-event errors: %s", resp.Body)
			}
			if e := er.Errors[0]; e.Index != tc.index || e.Field != tc.field {
				t.Errorf("errors[0] = %+v, want index %d field %q", e, tc.index, tc.field)
			}
		})
	}
}

// TestHandleRefusesRequestsOverLambdasLimits: a body over 6 MB (as Lambda
// counts it: base64 text included) is refused before it is decoded, as AWS
// refuses it before the function runs.
func TestHandleRefusesRequestsOverLambdasLimits(t *testing.T) {
	// Four events of 1.2 MB each fit in 6 MB as JSON, but not once base64.
	pad := strings.Repeat("x", 1200<<10)
	var evs []string
	for i := range 4 {
		evs = append(evs, ev(fmt.Sprintf("e-%d", i), "k", `,"data":"`+pad+`"`))
	}
	body := arr(evs...)
	if len(body) > MaxRequestBytes {
		t.Fatalf("test body is %d bytes: it should fit as text", len(body))
	}
	b64 := post(base64.StdEncoding.EncodeToString([]byte(body)))
	b64.IsBase64Encoded = true
	tooMany := post(strings.Repeat(" ", MaxRequestBytes) + ev("a", "k", ""))
	for name, req := range map[string]events.LambdaFunctionURLRequest{"base64 over 6 MB": b64, "text over 6 MB": tooMany} {
		t.Run(name, func(t *testing.T) {
			h := New(refusingPutter{t}, "events")
			resp, _ := h.Handle(context.Background(), req)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(resp.Body, "Lambda accepts at most 6291456") {
				t.Errorf("status %d %s, want 413 naming Lambda's 6 MB", resp.StatusCode, cutText(resp.Body, 300))
			}
		})
	}
	// The same events as text are within the limit; each is over the 1 MiB
	// record limit, which is what refuses them then.
	h := New(refusingPutter{t}, "events", WithClock(func() time.Time { return serverNow }))
	resp, _ := h.Handle(context.Background(), post(body))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(resp.Body, "events[0].data: the record would be") {
		t.Errorf("status %d %s, want 413 naming events[0].data", resp.StatusCode, cutText(resp.Body, 300))
	}
}

// TestRefusalListIsBounded: a request of 500 events that are all wrong, with
// megabyte-long ids, answers with a bounded list.
func TestRefusalListIsBounded(t *testing.T) {
	longID := strings.Repeat("i", 10_000)
	var evs []string
	for i := range MaxEvents {
		evs = append(evs, fmt.Sprintf(`{"id":"%s-%d","type":"t","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}`, longID, i))
	}
	h := New(refusingPutter{t}, "events")
	resp, _ := h.Handle(context.Background(), post(arr(evs...)))
	var er ErrorResponse
	if err := json.Unmarshal([]byte(resp.Body), &er); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || len(er.Errors) != MaxListedErrors || er.ErrorsOmitted != MaxEvents-MaxListedErrors {
		t.Errorf("status %d, %d errors listed and %d omitted; want 400, %d and %d", resp.StatusCode, len(er.Errors), er.ErrorsOmitted, MaxListedErrors, MaxEvents-MaxListedErrors)
	}
	if len(resp.Body) > 30_000 {
		t.Errorf("the answer is %d bytes: the ids are echoed unbounded", len(resp.Body))
	}
	if e := er.Errors[0]; e.Field != "id" || !strings.HasSuffix(e.ID, "…") {
		t.Errorf("errors[0] = field %q id %q…, want the id field, the id cut", e.Field, cutText(e.ID, 20))
	}
}

func TestEventAgeLimit(t *testing.T) {
	old := `{"id":"old","type":"t","key":"k","occurredAt":"2026-11-28T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}` // 24h0m1s
	tests := []struct {
		name   string
		opts   []Option
		status int
	}{
		{"default: the stream's 24 h retention", nil, 400},
		{"a week's retention", []Option{WithMaxEventAge(7 * 24 * time.Hour)}, 202},
		{"no limit", []Option{WithMaxEventAge(0)}, 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(&scriptedPutter{}, "events", tt.opts...)
			resp, _ := h.Handle(context.Background(), post(old))
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
		})
	}
	// A device clock hours off does not make an event old: the age is read
	// from the producer's own two times.
	skewed := `{"id":"skewed","type":"t","key":"k","occurredAt":"2026-11-25T07:41:07Z","sentAt":"2026-11-25T07:41:08Z"}`
	h := New(&scriptedPutter{}, "events", WithClock(func() time.Time { return serverNow }))
	if resp, _ := h.Handle(context.Background(), post(skewed)); resp.StatusCode != 202 {
		t.Errorf("an event sent a second after it happened, by a clock four days behind: status %d %s, want 202", resp.StatusCode, resp.Body)
	}
}

// TestResponseIsBounded: the worst answer — every one of MaxEvents events
// failed with an error text at its limit — fits MaxResponseBytes, and an
// answer over a smaller bound is cut, with the cut counted.
func TestResponseIsBounded(t *testing.T) {
	r := Response{Events: MaxEvents, Failed: MaxEvents}
	for i := range MaxEvents {
		r.Failures = append(r.Failures, Failure{Index: i, Error: errorText(throughput, strings.Repeat("<é>", 200))})
	}
	full := encodeResponse(r, MaxResponseBytes)
	var back Response
	if err := json.Unmarshal(full, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Failures) != MaxEvents || back.FailuresOmitted != 0 {
		t.Errorf("worst-case answer (%d bytes) lists %d failures, omits %d; want all %d within %d bytes", len(full), len(back.Failures), back.FailuresOmitted, MaxEvents, MaxResponseBytes)
	}
	size := recordSize(recordID("iam:arn:aws:iam::123456789012:user/x", "/orders", strings.Repeat("k", MaxIdempotencyKeyLength)),
		StatusPartial, storedResponse{Status: 429, Headers: map[string]string{"Content-Type": "application/json", "Retry-After": "1"}, Body: string(full)}, repeatIndexes(MaxEvents))
	if size > MaxItemBytes {
		t.Errorf("the worst-case idempotency record is %d bytes, over DynamoDB's %d", size, MaxItemBytes)
	}
	t.Logf("worst-case answer %d bytes, its record %d bytes (limit %d)", len(full), size, MaxItemBytes)

	cut := encodeResponse(r, 10_000)
	if len(cut) > 10_000 {
		t.Fatalf("cut answer is %d bytes, over 10000", len(cut))
	}
	if err := json.Unmarshal(cut, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Failures) == 0 || len(back.Failures)+back.FailuresOmitted != MaxEvents || back.Failed != MaxEvents {
		t.Errorf("cut answer lists %d, omits %d, failed %d; want the list cut, the rest counted, the total exact", len(back.Failures), back.FailuresOmitted, back.Failed)
	}
}

func repeatIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
