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
//     the partial aggregates between invocations in the window state — one
//     per key and pane (the records that go to the same hopping windows),
//     not one per window, so that a shard's keys fit the 1 MB Lambda
//     carries — and the final invocation of each interval flushes one write
//     per (key, window), so writes follow keys × windows per interval, not
//     the event rate. The flush knows the watermark it commits, so a window
//     that ends by it is made final by that same write and published at
//     once (state.Update.CloseBy): an update and a finalize in one write.
//     When each key's records stay on one shard (partitionKeyIsGroupingKey)
//     the flush writes a tumbling or hopping window only when it closes,
//     once, with the records of every interval it spans, and keeps the
//     partials of the windows still open in the shard's carry, eight items
//     per shard (carry.go): the ticker closes what an idle shard carries,
//     and a child shard takes over its parents' after a reshard. Such a
//     window, with no item before it closes, is created by that write
//     already marked published (state.Update.Fresh): one write, its
//     result sent and logged after it; with the shard's parents known
//     (WithShardLister, as deployed) the results of the keys of one page
//     bucket closing in one window are one such write, a result page
//     (state.Views.ApplyFresh).
//
// A shard's watermark (max event time − allowed out-of-orderness) advances
// by the records a batch applied: all of them when it succeeds entirely,
// else those before its lowest failed record (Lambda resumes from that
// record and never delivers the ones before it again), so a retried batch
// is judged against the watermark its first record saw. Windows that end before it become final; the ticker
// advances idle shards by processing time so their windows close too.
// Records are judged against the shard's stored watermark: the ticker's
// advance, and the batches Lambda ran in another execution environment,
// are stored and told to no process that keeps a copy, so an invocation
// with records reads it first (one consistent GetItem; catchUp), and per
// interval takes the later of it and the one the window state carries. On
// the per-interval path the shard's stored watermark moves only at the
// flush, so an invocation that carries partials to it first holds the shard
// at the earliest window they add to that the stored watermark has not
// closed (state.Views.Hold) — an open window, or one a late record corrects
// that only the interval's own watermark has closed: the ticker's idle
// advance stops there until the flush clears the hold (or for at most
// holdFor), and records Lambda carries are not closed out of their windows
// (a late record's window, closed by the ticker first, would get a result
// without it and then its correction, where a batch's first result has it).
// The watermark is stored with the last record whose effects it commits
// (state.Views.CommitWatermark); with WithBacklog the ticker reads the
// stream after that record before it advances a shard as idle, and a
// record found there (a function failing or throttled for longer than
// idleTimeout) bounds the advance by its arrival (idleHold), so the
// records a stuck function has yet to process are not made late. Late
// records are dropped (counted) or, under the correct policy, applied to the
// final window as a correction that carries the previous value.
//
// Final results and corrections of tumbling and hopping windows reach the
// output stream at least once, each revision under one id with the same
// bytes, and are logged once (publish, output.go): the window item holds
// the result from the write that makes it (Finalize, or the correction's
// write) and stays listed until the result is on the stream and that
// revision is marked published. A batch (per interval: the flush) lists the
// windows it wrote after writing them (listing.go, state.ListWindow: one
// write per window naming its keys), and the finalize finds them there. A
// failed emission or listing fails the batch (per interval: the final
// invocation); its retry finds the windows applied, lists them, and is
// handed the correction back, or finalizes again, and publishes it; a
// process that is not retried leaves it to the ticker, which finds the
// window listed. A correction that meets the window's
// result unpublished publishes it first, so no revision is skipped. The
// normal path pays one more write per correction (the mark); final results
// cost what they did. A window the shard's carry held to its close is
// created final and marked published in one write (state.Update.Fresh;
// with the shard's parents known, in a result page with the other keys of
// its bucket that close in that window), its line logged by that write; the write's retry, or the next flush or
// tick that meets the window created, sends it again under the same id
// should its sender have died before sending it.
//
// A replay (package replay) fills a new version of the views table with
// this processor and moves the readers to it mid-stream. Publishers on such
// a version (WithHandover) ask the version before it first, so a result it
// sent is only marked, and the replay's own processor, which sends
// nothing, leaves listed (or, for session and sliding windows, pending) a
// result it cannot tell was sent, for the live function to send once it
// has moved (handover.go).
//
// The LateDropped metric counts records, like RecordsIn, so 100 ×
// LateDropped / RecordsIn (the lateDroppedPercent alarm) is a share: a
// record dropped from at least one of its windows counts once, also when it
// was applied to others of its windows (a hopping window still open, or one
// the correct policy corrects). A record Lambda delivers again after it was
// processed (a batch delivered twice, a retry from a few records back) is
// not judged late again, so retries do not raise the alarm: the dedupe
// ledger knows it as redelivered (a session or sliding record is also below
// its key's fence, which a fold moves past the records it drops too). On the
// per-interval path the records an invocation drops as late when it routes
// them are carried in the state and counted at the flush, once: Lambda
// sends an invocation whose response it lost again with the state it sent
// it with, whose claims do not know them; and a final invocation sent again
// counts them only if its writes are the first to apply the interval (or,
// with none to make, if it is the first to mark the interval's records
// counted: state.Views.FirstToCount). Without the ledger (dedupeHorizon "0s") such a
// tumbling or hopping record, found late, counts again; and a record whose
// first delivery failed before its window was written, the ticker making
// the window final before the retry, is dropped uncounted. On the
// per-interval path, records dropped at the flush (their windows made final
// by the ticker during the interval) are known only as per-window counts:
// per key, the window kind accounting for the most records is taken, exact
// for tumbling windows, a lower bound for overlapping hopping windows only
// partly dropped.
//
// Tumbling and hopping windows are window items updated in place, or,
// closed from a shard's carry, entries of result pages until a late record
// makes the window an item of its own (state.Update.Paged). Session
// and sliding windows are defined by the records themselves (a late record
// can merge two sessions or create sliding windows), so each key's recent
// records are kept in one keyed state item per window kind, folded in with
// one fenced write per key per batch; finalization recomputes the key's
// windows, writes the final ones, corrects changed ones and retracts merged
// sessions (keyed.go). Finalization records the results it makes in the
// keyed state (a fenced write) before it writes their window items and
// publishes them, and clears them after (a second write, only when there
// are results): a finalize that dies, is throttled or loses a race between
// the two leaves them pending and the state listed, and the next (a retry,
// the next batch, the ticker) writes and publishes them again under the
// same ids before anything else, so no window item is final without a
// state that knows it and retracts it when a late record merges its
// session. They need each key's records on one shard
// (partitionKeyIsGroupingKey). On the per-interval path their records ride
// in Lambda's window state, each with the close time it arrived at, and are
// folded once per key at the flush (keyedcarry.go); what outgrows its
// share of the state waits in overflow items of the shard (overflow.go),
// read back by the flush; the shard's hold keeps the ticker from
// closing their windows meanwhile. The flush's fold also records the
// results of the windows that the watermark it commits closes, so the
// finalize after the commit only writes, publishes and clears them: one
// write of the state fewer.
//
// A key that never pauses for its session gap keeps one session open
// as long as it sends; its state holds each run of on-time records as the
// run's bounds and aggregate wherever that is smaller than the records
// (sessionfold.go, DefaultSessionFoldBytes), which replays to the same
// sessions, so a session of any length takes a few KB.
//
// Their late records are judged as Kafka Streams judges them
// (keyedwindows.go), with the close time the record arrives at (the
// watermark, less the allowed lateness under the correct policy) as Kafka's
// stream time less grace: a session record joins the sessions within the
// gap not yet closed and is dropped only if the session it makes is closed;
// a sliding record counts in its windows still open, makes only windows it
// counts in (its right window, not its closed left window) and is dropped
// only if it counts in none. A record dropped from at least one window
// counts once in LateDropped. A final window changes only through a late
// record the correct policy accepts (a correction, or a retraction when
// such a record merges sessions), never by housekeeping: each finalize
// freezes the windows that end by its close time (no later record can
// change them; they are never recomputed) and only then prunes the points
// no unfrozen window needs.
package aggregate
