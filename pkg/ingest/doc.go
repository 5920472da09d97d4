// Package ingest is the HTTP front door of Tributary: the handler behind the
// ingest function's Lambda Function URL. It accepts one envelope or a JSON
// array of envelopes, validates every one (400 naming the field and the
// event's index and id, and nothing is written), stamps receivedAt from the
// server's clock, and writes them to the events stream with PutRecords, the
// envelope's key as partition key.
//
// PutRecords can fail for some entries and not others (throttling, internal
// failures). Only the failed entries are retried, a bounded number of times
// with jittered exponential backoff, and never past the invoke deadline. If
// some still fail, the answer says which, per event, with 429 when all that
// failed was throttling (backpressure: slow down) and 503 otherwise; the
// producer resends those ids. Nothing is dropped silently: every event of the
// request is in the results, accepted with its sequence number and shard or
// failed with the reason.
//
// A retried entry lands on the stream after entries of the same key that got
// through on an earlier try, so stream order is arrival order, not request
// order. Consumers place events by event time, not by stream position.
package ingest
