// Package keyed runs a keyed stateful operator — the stream–stream join
// (package join), the CEP rules (package cep) — over a Kinesis shard with
// the guarantees of the windowed aggregation: event time, per-shard
// watermarks, exactly-once effects on state under every Lambda retry,
// producer copies suppressed by event id, bounded state, and records that
// can never succeed set aside.
//
// The data's path, per batch:
//
//  1. each record is decoded (a record that is not an envelope is set aside,
//     naming the field) and the Operator selects it: fold it under a key,
//     only observe its event time, or ignore it;
//  2. the records to fold are judged against their keys' dedupe ledgers
//     (package dedupe: one conditional write per key with new ids): a
//     producer's copy has no effect, an id reused with other content is set
//     aside;
//  3. the shard's watermark just before each record is computed from the
//     records before it — the committed watermark (read from the store for
//     every batch: a tick in another execution environment may have moved
//     an idle shard's), then each record's
//     event time in shard order — so every decision (late or not, what is
//     open when a record arrives, whether a key's state has room) depends
//     only on the shard's records, never on how Lambda cut the batches;
//  4. each key's records are folded into its state item (package state's
//     keyed state: one item per key, a version for optimistic concurrency
//     and a fence per shard, the highest sequence number folded in, so a
//     redelivered record is skipped) with one conditional write per key
//     per batch; the state is then advanced to the batch's end watermark;
//  5. the outputs of a fold are written in the same item (its outbox)
//     before they are put on the output stream: a crash between the two
//     writes leaves them in the state, and whoever next loads the state
//     without knowing them sent — a cold start, a retry, the tick — sends
//     them again; a state write that fails (maybe made, its answer lost)
//     with outputs in it is followed by one that lists the key as due at
//     once, so the next batch or tick loads it and sends them. Once they
//     are on the stream, one more conditional write clears them from the
//     state and lists the key at its own next due time: without it a tick
//     in another execution environment, which cannot know from memory that
//     they were sent, sent every output a second time. Emission is at
//     least once (a crash or a failed clearing write sends again), each
//     output with a stable id; an output never exists without the state
//     change that made it;
//  6. the watermark is committed as of Lambda's checkpoint (before the
//     lowest failed record), and the states of other keys that it made
//     due (listed in the views table's open index by the time their next
//     window closes) are advanced and their outputs emitted.
//
// Tick, run on a schedule, advances idle shards' watermarks by processing
// time and closes what they pass, as the ticker does for windows. A shard
// whose function is stuck (failing, throttled, redeploying for longer than
// IdleTimeout) stops moving its watermark too, while its records wait on
// the stream: with WithBacklog each batch stores the last record whose
// effects it committed with the watermark (state.Views.CommitWatermark,
// also when only that moved), and Tick reads the stream after it before
// an idle advance (backlog.IdleHold), which then stops IdleTimeout +
// OutOfOrderness before the first waiting record arrived. A stream Tick
// cannot read advances nothing and fails the tick, naming the shard.
// Records of state.SampleShard come from no stream: no position is stored
// for them.
//
// A record the Operator folds can still be set aside for a part of it that
// skips the record (a CEP sum rule that cannot add its value, while the
// other rules read it): State.Add returns its fate with a RecordError, and
// the fold writes the set-aside before the state, once per record. With a
// dedupe ledger, such a set-aside says the ledger took the record's id
// (setaside.Record.IDTaken): a copy put back would be dropped, so package
// putback refuses it.
//
// Bounds: an Operator keeps a key's state within its own limits (records
// past them are set aside, kind state-budget, deterministically); a key
// whose stored state does not decode has its records set aside (kind
// state-unreadable, naming the item) and, when a close finds it due, a copy
// of its state set aside and the key unlisted, so it never fails a batch or
// a tick; a fold
// round that makes a key's state reach Settings.FoldBytes ends there,
// written and its outputs sent, and the next round goes on from the key's
// next record in the same invocation (counted in FoldCheckpoints); only
// when the invocation's time is short is that record reported, so Lambda
// resumes there (each partial failure spends one of the mapping's
// retries); a blob over Settings.MaxStateBytes is never written:
// no retry would write it either (the same state, records and watermark
// make the same blob), so a fold's records are set aside (kind
// state-budget, field key) and a close that makes one sets a copy of the
// stored state aside and unlists the key, as for an unreadable state. A
// state whose Encode fails (a user's aggregate that does not encode) is
// treated the same, its reason quoting the encoding error, not a size.
// A close loads each key the open index lists and leaves alone one no
// longer listed as due under its shard by then (another close got there
// first, its own unlisting write whose answer was lost, or the index,
// eventually consistent, lagging): a parked state is set aside once.
package keyed
