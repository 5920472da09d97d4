package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Request limits. A request over one of them is refused whole (nothing is
// written) with an answer naming the limit.
const (
	// MaxEvents is the most events one request may hold (413 past it): one
	// PutRecords call takes 500 records, so a request is one call on the
	// normal path, and the per-event part of the answer stays small.
	MaxEvents = 500
	// MaxRequestBytes is Lambda's limit on a synchronous invocation's
	// payload, 6 MB (6,291,456 bytes). AWS refuses a bigger request before
	// the function runs; the handler refuses it too (413), so that a local
	// run, whose HTTP front end may be more lenient, answers as AWS does.
	// The handler counts the body as Lambda hands it over (base64 text when
	// the body is binary) plus the headers and requestContextAllowance.
	MaxRequestBytes = 6 << 20
	// requestContextAllowance is what the rest of the invocation payload
	// (request context, JSON framing) takes, counted against MaxRequestBytes.
	requestContextAllowance = 1 << 10
	// DefaultMaxEventAge is how old an event may be when it is sent
	// (sentAt − occurredAt, both by the producer's clock): the events
	// stream's default retention. A replay rebuilds windows from what the
	// stream still holds, so an event older than the retention could never
	// be recomputed with the rest of its window. The stack sets
	// INGEST_MAX_EVENT_AGE to the stream's retention.
	DefaultMaxEventAge = 24 * time.Hour
)

// parseEvents validates the events split from a body: each holds only the
// envelope's fields, spelt exactly, and decodes as an envelope
// (stream.UnmarshalExact, then Validate), its id, type and key hold no
// control, line-breaking or invisible characters (Validate) — none of
// them blank either (Validate) —, its id is not the id of an earlier
// event of the same request, and it is at most maxAge old when sent. It
// returns every refused event, in request order.
func parseEvents(raws [][]byte, maxAge time.Duration) ([]stream.Envelope, []EventError) {
	envs := make([]stream.Envelope, len(raws))
	var errs []EventError
	firstIndex := make(map[string]int, len(raws))
	for i, raw := range raws {
		e := &envs[i]
		err := stream.UnmarshalExact(raw, e)
		if err == nil {
			err = e.Validate()
		}
		if err == nil && cdc.IsChangelogType(e.Type) {
			err = &stream.FieldError{Field: "type", Reason: fmt.Sprintf(
				"%q is a change data capture record type, written only from the profiles table (package cdc); enrich would take it as the profile's new version, so a producer cannot send it", e.Type)}
		}
		if err == nil {
			err = checkAge(e, maxAge)
		}
		if err == nil {
			if first, dup := firstIndex[e.ID]; dup {
				err = &stream.FieldError{Field: "id", Reason: fmt.Sprintf("duplicates events[%d].id: each event of a request needs its own id (the producer's idempotency key)", first)}
			} else {
				firstIndex[e.ID] = i
			}
		}
		if err != nil {
			ee := EventError{Index: i, ID: e.ID, Reason: err.Error()}
			var fe *stream.FieldError
			if errors.As(err, &fe) {
				ee.Field, ee.Reason = fe.Field, fe.Reason
			}
			if ee.ID == "" {
				var ambiguous bool
				if ee.ID, ambiguous = peekID(raw); ambiguous {
					ee.Reason += `; the event's "id" is given more than once with different values, so it is not named`
				}
			}
			errs = append(errs, ee)
		}
	}
	return envs, errs
}

// checkAge refuses an event older than maxAge when it was sent. Both times
// come from the producer's clock, so a device clock that is off does not
// change the age; the age is how far behind the server's receivedAt the
// event's corrected event time is.
func checkAge(e *stream.Envelope, maxAge time.Duration) error {
	if maxAge <= 0 {
		return nil
	}
	if age := e.SentAt.Sub(e.OccurredAt); age > maxAge {
		return &stream.FieldError{Field: "occurredAt", Reason: fmt.Sprintf(
			"the event is %s old when sent (sentAt − occurredAt); the pipeline uses events at most %s old (the events stream's retention), so it is refused",
			age.Round(time.Second), maxAge)}
	}
	return nil
}
