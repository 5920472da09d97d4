// Package ingest is the HTTP front door of Tributary: the handler behind the
// ingest function's Lambda Function URL. It accepts one envelope or a JSON
// array of envelopes, validates every one (400 naming the field and the
// event's index and id, and nothing is written), stamps receivedAt from the
// server's clock, and writes them to the events stream with PutRecords, the
// envelope's key as partition key.
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
//     per-event results: the producer resends only the events not accepted.
//   - buffer: the stream is the buffer; failed entries are retried until the
//     invoke deadline minus a margin, and only then the answer is 503 with
//     per-event results.
//   - drop: throttled entries are dropped at once, counted in the Dropped
//     metric, 1 in INGEST_DROP_SAMPLE logged, and marked dropped in a 202;
//     other failures are answered as backpressure does.
//
// Nothing is lost silently: every event of the request is in the results,
// accepted with its sequence number and shard, dropped (drop routes only),
// or failed with the reason. EMF metrics: Accepted, Dropped, Throttles
// (throttled entry tries), Retries (entries resent), EventsIn,
// EventsRejected, EventsFailed.
//
// A retried entry lands on the stream after entries of the same key that got
// through on an earlier try, so stream order is arrival order, not request
// order. Consumers place events by event time, not by stream position.
package ingest
