// Package ingest is the HTTP front door of Tributary: the handler behind the
// ingest function's Lambda Function URL. It accepts one envelope or a JSON
// array of up to MaxEvents envelopes, checks the whole request before
// writing anything, stamps receivedAt from the server's clock, and writes the
// events to the events stream with PutRecords, the envelope's key as
// partition key.
//
// # What is refused, and how
//
// A request is refused whole (nothing written) with an answer that names
// the event by its index and the field by its JSON path
// ("events[3].id: duplicates events[1].id"):
//
//   - 413: over Lambda's 6 MB invocation limit (MaxRequestBytes, checked by
//     the handler so that local runs answer as AWS does), more than
//     MaxEvents events, or an event whose stream record would exceed 1 MiB;
//   - 415: a Content-Encoding header naming a coding other than identity
//     (the body is taken uncompressed; the answer carries
//     Accept-Encoding: identity);
//   - 400: a body that is not well-formed JSON (one that starts with
//     gzip's magic bytes is told so), has invalid UTF-8 anywhere
//     (a lone surrogate escape included), an object with the same key twice
//     (anywhere, data included), nesting deeper than MaxDepth (checked in
//     one pass by package strictjson, the reader every JSON entry point
//     shares); an envelope
//     that does not decode or validate (package stream); a control
//     character in id, type or key, or one of them blank (only white
//     space); an id used twice in the request; an
//     event older, when sent, than the events stream keeps records
//     (DefaultMaxEventAge, INGEST_MAX_EVENT_AGE).
//
// Answers are bounded: a 400 lists at most MaxListedErrors events with
// texts cut to MaxErrorTextBytes; a 202/429/503 counts the events and lists
// only those not accepted, by index (MaxResponseBytes).
//
// # Load policies
//
// PutRecords can fail for some entries and not others (throttling, internal
// failures). Only the failed entries are retried, with full-jitter
// exponential backoff, never past the invoke deadline. What happens when
// producers send faster than the stream takes is chosen per route — the
// Function URL path — among the three options of a messaging system
// (INGEST_ROUTES, default {"/": "backpressure"}; other paths get 404):
//
//   - backpressure: a bounded number of tries; then 429 with Retry-After
//     when all that failed was throttling (slow down), 503 otherwise, and
//     the failures by index: the producer resends only those (or the same
//     request with the same Idempotency-Key).
//   - buffer: the stream is the buffer; failed entries are retried until the
//     invoke deadline minus a margin, and only then the answer is 503 naming
//     the events not accepted.
//   - drop: throttled entries are dropped at once, counted in the Dropped
//     metric, 1 in INGEST_DROP_SAMPLE logged, and marked dropped in a 202;
//     other failures are answered as backpressure does.
//
// # Idempotency-Key
//
// With a RequestStore (INGEST_IDEMPOTENCY_TABLE), a request carrying an
// Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header) claims
// a record for its key, scoped by route and caller, with one conditional
// write, and stores its answer with a second: a retry gets that answer
// back byte for byte (plus Idempotency-Replayed: true) and writes nothing; a
// request with the same key and another body gets 422; one that arrives
// while the first is still running gets 409. A request answered 429 or 503
// is remembered as partial: its retry with the same key and body writes only
// the events not yet on the stream and answers for the whole request. A try
// that dies holding the key is taken over once its lock (its invoke
// deadline) has passed: a resume's takeover writes only the indexes the
// record still lists as pending, so no retry writes what an answer said was
// on the stream. The events a retry writes carry the receivedAt of the
// request's first try, which the record keeps: the retry's body, sentAt
// included, is that try's, so the retry's own receivedAt would move their
// event time late by the time between the tries. Keys are remembered
// DefaultIdempotencyExpiry after the last answer.
//
// # Signed requests
//
// With WithSignedRequests (INGEST_AUTH=HMAC) every request must carry an
// HMAC-SHA256 signature (see Sign and StringToSign) made with a secret kept
// in Secrets Manager, and a timestamp within MaxClockSkew; a signed request
// without an Idempotency-Key is made idempotent by its signature, so a
// replay within the window writes nothing.
//
// Nothing is lost silently: every event of the request is accepted,
// dropped (drop routes only) or listed as failed with the reason. EMF
// metrics: Accepted, Dropped, Throttles (throttled entry tries), Retries
// (entries resent), EventsIn, EventsRejected, EventsFailed, Replayed,
// Resumed, IdempotencyConflicts, IdempotencyMismatches,
// IdempotencyStoreErrors, AuthFailures.
//
// A retried entry lands on the stream after entries of the same key that got
// through on an earlier try, so stream order is arrival order, not request
// order. Consumers place events by event time, not by stream position.
package ingest
