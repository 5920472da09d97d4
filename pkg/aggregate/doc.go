// Package aggregate is the declared, event-time windowed aggregation behind
// the aggregate and ticker functions: Kinesis records → envelopes → the
// pipeline's key, value and windows (package pipeline) → per (key, window)
// contributions → the exactly-once view store (package state) → final
// results and corrections on an output stream.
//
// Two write paths, chosen by the event source mapping:
//
//   - per batch (a plain Kinesis mapping): each batch makes one conditional
//     write per (key, window) it touches;
//   - per interval (a mapping with TumblingWindowInSeconds): Lambda carries
//     the partial aggregates between invocations in the window state, and
//     the final invocation of each interval flushes one write per (key,
//     window), so writes follow keys × windows per interval, not the event
//     rate.
//
// A shard's watermark (max event time − allowed out-of-orderness) advances
// only when a batch succeeds entirely, so a retried batch is judged against
// the same watermark. Windows that end before it become final; the ticker
// advances idle shards by processing time so their windows close too. Late
// records are dropped (counted) or, under the correct policy, applied to the
// final window as a correction that carries the previous value.
//
// Window kinds through the store: tumbling and hopping. Sliding and session
// windows are computed by package window but not yet kept here; a pipeline
// declaring them is refused at init with a message naming the window.
package aggregate
