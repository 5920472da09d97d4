// Package handler is the Go API for a Lambda function of your own with the
// guarantees of Tributary's functions. A main of ten lines gets a windowed
// aggregation over a Kinesis stream of envelopes (package stream) with:
//
//   - decoding: a record that is not an envelope is set aside, naming the field;
//   - your Selector: an event becomes (key, value), is skipped (ErrSkip), or
//     is refused (Refuse, naming the field): set aside with its data, the
//     batch goes on;
//   - your Aggregate: a mergeable type (Add, Merge, a binary encoding); each
//     value is merged into its key's windows, one state item per key:
//     tumbling (WithWindow, the default), hopping (WithHopping: the key
//     keeps panes of the advance's size, a window is the merge of its
//     panes), sliding (WithSliding, Kafka Streams' semantics) or session
//     (WithSession; a record between two sessions merges them) — session
//     and sliding windows are computed from the key's held records by
//     package window's held windows, the code the declared pipelines use;
//   - exactly-once window state: one conditional write per key per batch,
//     fenced by the shard's sequence numbers, so whole, bisected,
//     checkpointed or concurrent redeliveries have no second effect;
//   - duplicate suppression: a producer's copy (same event id) is applied
//     once within the dedupe horizon (package dedupe);
//   - bounded state: a key past Limits sets the record aside (kind
//     state-budget), never fails the batch;
//   - event time and watermarks: a shard's watermark (newest event time
//     minus the allowed out-of-orderness) closes windows; late records are
//     dropped and counted (LateDropped), or, with WithLatePolicy(Correct),
//     applied to their final windows within WithAllowedLateness, judged as
//     Kafka Streams judges them; the scheduled tick advances idle shards,
//     and, with Config.Backlog (FromEnv: EVENTS_STREAM_NAME), not one whose
//     records wait on the stream for a handler that is failing or
//     throttled (see package keyed);
//   - a record whose value alone makes the aggregate a NaN or an infinity
//     (its one-value aggregate does not render as JSON) is set aside,
//     naming data and the value; its windows' results come from the
//     other records;
//   - results: one final Result per key and window on the output stream,
//     and under Correct a correction (revision + 1, carrying the result it
//     retracts) when late records changed a final window, once per batch,
//     and a retraction of a final session a late record merged into a
//     larger one; each with a stable id (emission is at least once, the id
//     tells copies apart). The conformance tests (directory conformance)
//     check every kind and both policies against Kafka Streams;
//   - EMF metrics (package metrics) and batch item failures for what may
//     succeed on a retry (throttling, timeouts).
//
// The logic runs on package keyed's Runner; the state table has package
// state's schema. The CDK construct tributary.NewStreamHandler (module
// infra) creates the table, the output stream, the mapping (batch item
// failures, bisection, an on-failure queue), the schedule and the grants,
// and sets the variables FromEnv reads. A main:
//
//	func main() {
//		h, err := handler.WindowedFromEnv[StatusMix]("statuscodes", SelectStatus,
//			handler.WithWindow(time.Minute), handler.WithOutOfOrderness(5*time.Second))
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		lambda.Start(h)
//	}
//
// examples/functions/statuscodes is such a function, with its aggregate's
// merge laws tested (CheckMergeLaws).
//
// For an SQS function, NewTasks (or TasksFromEnv) runs your TaskFunc once
// per event id over package idempotency (a copy gets the stored result; the
// id reused with other data is refused), reports failed messages by id, and
// sets a message that can never succeed (not an envelope, a *FieldError, an
// error wrapping ErrPermanent) aside on its queue's dead-letter queue with
// the reason (package worker's DeadLetters), instead of retrying it.
package handler
