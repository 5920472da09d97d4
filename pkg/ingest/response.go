package ingest

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Bounds on what the handler answers. A response is stored whole as an
// idempotency record's result (DynamoDB items hold at most 400 KB), so its
// size is bounded by construction: failures are listed by index, never by
// echoing events, and each error text is cut to MaxErrorTextBytes.
const (
	// MaxResponseBytes bounds the body of a 202, 429 or 503. With MaxEvents
	// failures of MaxErrorTextBytes each the body is about 130 KB, so the
	// bound only matters if those limits are raised; past it the list of
	// failures is cut and FailuresOmitted counts the rest.
	MaxResponseBytes = 300 << 10
	// MaxErrorTextBytes bounds one failure's error text (Kinesis' code and
	// message) and one refused event's reason.
	MaxErrorTextBytes = 256
	// MaxListedErrors bounds how many refused events a 400 lists.
	MaxListedErrors = 50
	// maxIDShown bounds how much of an event id an error repeats.
	maxIDShown = 64
)

// Response is the body of a 202, 429 or 503 answer: how many of the
// request's events are on the stream, and the ones that are not, by index.
type Response struct {
	// Events is how many events the request held.
	Events int `json:"events"`
	// Accepted is how many are on the stream.
	Accepted int `json:"accepted"`
	// Dropped is how many a drop route dropped under throttling (do not
	// resend them).
	Dropped int `json:"dropped,omitempty"`
	// Failed is how many are not on the stream and may be resent.
	Failed int `json:"failed,omitempty"`
	// Failures lists the events not accepted (dropped or failed), in
	// request order.
	Failures []Failure `json:"failures,omitempty"`
	// FailuresOmitted counts failures left out of Failures to keep the
	// body within MaxResponseBytes.
	FailuresOmitted int `json:"failuresOmitted,omitempty"`
}

// Failure is one event of the request that is not on the stream: Index is
// its position in the request (0 for a single envelope).
type Failure struct {
	Index int `json:"index"`
	// Error is Kinesis' error code and message, cut to MaxErrorTextBytes.
	Error string `json:"error"`
	// Dropped is set when a drop route dropped the event: do not resend it.
	Dropped bool `json:"dropped,omitempty"`
}

// ErrorResponse is the body of an answer to a request nothing of which was
// written: 400, 401, 404, 405, 409, 413, 422.
type ErrorResponse struct {
	Error string `json:"error"`
	// Errors lists the refused events (at most MaxListedErrors).
	Errors []EventError `json:"errors,omitempty"`
	// ErrorsOmitted counts refused events not listed.
	ErrorsOmitted int `json:"errorsOmitted,omitempty"`
}

// EventError says which event of the request is refused and why: Index is
// its position in the request, Field the JSON path inside it ("data.items[2]"),
// ID the event's id when it has one.
type EventError struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

// Path is where the error is: events[3].occurredAt.
func (e EventError) Path() string {
	p := fmt.Sprintf("events[%d]", e.Index)
	switch {
	case e.Field == "":
	case strings.HasPrefix(e.Field, "["):
		p += e.Field
	default:
		p += "." + e.Field
	}
	return p
}

func (e EventError) String() string {
	s := e.Path() + ": " + e.Reason
	if e.ID != "" {
		s += fmt.Sprintf(" (event id %q)", e.ID)
	}
	return s
}

// bounded cuts the texts of an error to their limits.
func (e EventError) bounded() EventError {
	e.ID = cutText(e.ID, maxIDShown)
	e.Reason = cutText(e.Reason, MaxErrorTextBytes)
	return e
}

// cutText cuts s to at most n bytes on a character boundary, marking the cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(strictjson.TruncateUTF8([]byte(s), n-len("…"))) + "…"
}

// refuse is the answer to a request nothing of which is written because of
// the events in errs (the first one is the headline).
func refuse(status int, errs []EventError) events.LambdaFunctionURLResponse {
	body := ErrorResponse{Error: errs[0].bounded().String()}
	for i, e := range errs {
		if i == MaxListedErrors {
			body.ErrorsOmitted = len(errs) - i
			break
		}
		body.Errors = append(body.Errors, e.bounded())
	}
	return reply(status, body)
}

// problem is an answer with only a message: what is wrong with the request
// as a whole (its path, method, headers, size).
func problem(status int, format string, args ...any) events.LambdaFunctionURLResponse {
	return reply(status, ErrorResponse{Error: cutText(fmt.Sprintf(format, args...), 4*MaxErrorTextBytes)})
}

// encodeResponse encodes r within maxBytes, cutting the list of failures
// when it would not fit. FailuresOmitted is set to the failures counted
// (Dropped + Failed) but not listed.
func encodeResponse(r Response, maxBytes int) []byte {
	all := r.Failures
	enc := func(n int) []byte {
		r.Failures = all[:n]
		if n == 0 {
			r.Failures = nil
		}
		r.FailuresOmitted = max(r.Dropped+r.Failed-n, 0)
		b, _ := marshal(r) // ints and valid UTF-8 strings: always encodes
		return b
	}
	if b := enc(len(all)); len(b) <= maxBytes {
		return b
	}
	lo, hi := 0, len(all) // the most failures that fit is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(enc(mid)) <= maxBytes {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return enc(lo)
}

// marshal encodes v as JSON without escaping <, > and & (the answers are not
// HTML), so that an error text costs what it holds.
func marshal(v any) ([]byte, error) { return strictjson.Marshal(v) }

func reply(status int, body any) events.LambdaFunctionURLResponse {
	b, err := marshal(body)
	if err != nil {
		b = []byte(`{"error":"encoding the response failed"}`)
		status = http.StatusInternalServerError
	}
	return rawReply(status, b)
}

func rawReply(status int, body []byte) events.LambdaFunctionURLResponse {
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}
}

// errorText is a failure's error text: code and message, valid UTF-8 with
// control characters as spaces (so that JSON escapes do not inflate it), cut
// to MaxErrorTextBytes.
func errorText(code, message string) string {
	s := code
	if message != "" {
		s += ": " + message
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return cutText(s, MaxErrorTextBytes)
}
