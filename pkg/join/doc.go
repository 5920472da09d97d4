// Package join is the stream–stream window join of DESIGN.md "Joins": two
// event types on the events stream (search and click in the notes) with the
// same join key (the session: the envelope key) are joined when the right
// record's event time is within [left − before, left + within], in either
// order of arrival; each matching pair becomes a "joined" record on the
// joins stream, and — the notes' point — a left record that joined nothing
// becomes an "unmatched" record once the watermark passes its window (left
// join; the outer join does the same for right records; the inner join
// emits pairs only). A derived click-through rate per key and tumbling
// window of the left records' event time (left records that joined, out of
// all) is emitted as a "join_rate" record once every left record of the
// window has closed.
//
// Semantics follow Kafka Streams' KStream–KStream join with a grace
// period (JoinWindows.ofTimeDifferenceAndGrace): the watermark of a shard
// is its newest event time minus allowedLateness (the grace), a record
// joins the other side's records still open when it arrives, a record's
// window closes when the watermark passes its time + within (left) or
// + before (right), and a record arriving after its own window closed is
// late: dropped and counted. Non-matches are emitted only after the window
// closed, never eagerly. engine_test.go replays the table of Kafka
// Streams' documentation row by row (its records come in time order), and
// conformance/join_test.go checks the join function against Kafka Streams'
// own join (docs/stream-joins.md, "Kafka Streams"). Two
// differences, for records more than allowedLateness out of order: a
// record whose window has closed is out of the join for good (Kafka
// Streams keeps every record in its window store for before + within +
// grace, and may still join it, after having emitted it as unmatched), so
// here a left record ends with joined records or with one unmatched
// record, never both; and a late record is dropped (Kafka Streams still
// joins it with what its stores keep, or emits it unmatched at once). With
// before 0, a right record's window is only the grace: a click more than
// allowedLateness behind its shard's newest event time is late, though its
// search may still be open.
//
// Exactly once, bounded state and set-aside records come from package
// keyed, which runs the join: one state item per join key (its open
// records of both sides, its open rate windows, and the last fold's
// outputs by reference), fenced by the shard's sequence numbers, written
// once per key per batch; producer copies suppressed by event id. A key's
// state is bounded (Limits): a record whose data is over 16 KiB, that
// would take its key's open records over 128 KiB, or whose joined records
// would be over 512 KiB on the stream, is set aside (kind state-budget)
// naming the field — a rule on the record and the key's history only, so
// replays decide the same. A fold ends early once the key's state and its
// outputs reach 192 KiB, so that the outputs put in one go fit what one
// shard of the joins stream takes. A close is not bounded so: the
// unmatched records of a key's open records come out at once and are
// bigger on the stream than in the state (a session of small records under
// a long key can close into several MB on one shard); they are put in calls
// of at most 500 records, throttled entries retried (emit.Put), and a call
// that still fails fails the batch or tick, which puts them all again.
//
// Output ids are stable: "<join>:" and 32 hex digits of a hash of the kind,
// the key and the records' ids (or the rate window's start), so every
// emission of one output carries one id and the next stage deduplicates by
// it. Emission is at least once.
//
// The join key must put both sides on one shard: it is the envelope key
// (the Kinesis partition key) or a data field producers also use as the
// envelope key (partitionKeyIsJoinKey; a record whose data field is not
// its partition key is set aside, naming the field). Keep the mapping's
// ParallelizationFactor at 1.
package join
