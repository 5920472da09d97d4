// Package replay rebuilds a view by replaying the events stream into a new
// version of its table, then moves the readers to it; and it bootstraps a new
// consumer from a snapshot of a CDC table (Bootstrap).
//
// A rebuild (Run) is the notes' "replaying old messages" done without dual
// writes: the current views table is named by an SSM String parameter (the
// "current views" registry; the aggregate and ticker functions read it via
// VIEWS_PARAMETER_NAME and re-read it every VIEWS_REFRESH_SECONDS). Run
//
//  1. checks what it would do: a From in the future or older than the
//     stream's retention (without an Archive), and a target that exists, is
//     current or is not named <base>-vN, are refused (ErrRefused) before
//     anything is created;
//  2. creates the next version of that table (<base>-v2, -v3, …; a name
//     is never reused) with the current one's key schema, indexes, TTL and
//     stream settings, tagged as rebuild's (TagCreatedBy, TagParameter);
//  3. reads every shard of the events stream from a timestamp
//     (AT_TIMESTAMP; a closed parent shard before its children) — or, with
//     an Archive (package archive), each shard's archived records up to a
//     seam and the stream AFTER_SEQUENCE_NUMBER of the last of them,
//     refusing a gap or an overlap there, or a hole in the archive part
//     (archive.CheckChain; see planSeam) — turns each
//     GetRecords page into a Lambda-shaped KinesisEvent and hands it to the
//     same aggregate Processor the function runs, writing to the new
//     version, retrying from the lowest failed record as Lambda does;
//  4. when every shard has caught up (an empty page at MillisBehindLatest 0,
//     closed shards read to their end), and the new version holds items if
//     the current one does (or AllowEmpty), writes the new table's name into
//     the parameter;
//  5. keeps following the stream for a handover period at least as long as
//     the readers' refresh interval, so the records the live function
//     consumed while it still wrote the old version are in the new one too.
//
// During the handover both the replay and the live function write the new
// version. That is safe because every window item carries a per-shard
// sequence fence (package state): a record the other writer already
// applied is skipped, so each record is counted once whichever writer gets
// there first, and a batch both write concurrently is resolved by the
// items' conditional writes.
//
// Every swap is a new version of the parameter, so the parameter's history
// says which table was current before which (Registry.History, Previous).
// UseVersion and Rollback point the readers back at a version with the same
// checks: it must be a version (tagged by rebuild for this parameter, or
// named by the parameter before), it is caught up first — replayed on each
// shard from the last record whose batch it finished (the position its
// watermark items hold, the lowest of the pipelines it runs: a run cut
// short in a batch leaves some of the batch's items written and others
// not, so the highest fence is not where it got to; a shard where one of
// them finished no batch, from the version's start; a table of no
// pipeline, a projection's, from its highest fence), less a margin, the
// fences skipping what it has — and it must hold items when the current
// one does. Versions lists them with their item counts and those
// positions.
//
// The old version is left as it was; DeleteVersion removes it when the user
// says so, only if rebuild created it for this parameter (its tags and
// name), never the current one nor any other table.
//
// Tables created here are outside CloudFormation: the stack's grants must
// cover <base>-v* (infra's NewViewsRegistry does), and a later stack update
// does not know them.
package replay
