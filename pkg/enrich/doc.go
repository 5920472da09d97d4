// Package enrich is the stream–table join of DESIGN.md "Joins": it consumes
// the events Kinesis stream, where cdc's changelog records of an entity
// (profile_changed, profile_deleted, profile_snapshot) and that entity's
// activity events share the partition key and so meet on one shard in order,
// and writes one enriched record per activity event to another Kinesis
// stream, carrying the original event, the profile as of the event's position
// in the shard, and the profile version it used.
//
// The profile as of a position is the highest-version changelog record for
// the key before it in the shard (the version rule of package cdc: a
// duplicate or a late-retried older version never regresses the profile).
// Replaying any part of the shard — a whole batch redelivered, bisected, a
// checkpointed retry, a crash after some writes — gives byte-identical
// enriched records.
//
// The join's copy of the table is the compacted changelog in one DynamoDB
// table whose only key is the string partition key "pk":
//
//	pk = "k#<key>"    the key's history: one attribute e_<fenced sequence> per
//	                  applied change {v: version, i: image JSON, absent for a
//	                  tombstone}, and p, the first sequence number of the
//	                  last batch that wrote it (the fence)
//	pk = "t#<shard>"  the shard's tail: last (the last sequence number
//	                  applied), from (every applied change after it is in c),
//	                  c (the most recent applied changes, bounded)
//
// A batch keeps, per key, the changes at or after its first record plus the
// best one before it, so the profile as of the first record of a batch can be
// recomputed after a crash wrote later changes. A warm instance keeps the
// histories it has seen; before a batch it catches up from the shard's tail
// with the changes other instances applied since it last saw the shard, so it
// never serves a stale version. The caches are bounded: 200,000 keys a
// shard, and a quarter of the function's memory for all shards together
// (WithMaxCacheBytes: a shard's cache past it starts afresh, and the caches
// of other shards, those the instance no longer runs among them, give way
// to the one just used); a dropped cache costs reads, never a stale join.
// Reads are one BatchGetItem per batch (the
// tail plus the keys not in the cache); the one corner that needs a second
// round trip — a cache older than the tail reaches back — is counted in the
// metric ExtraReadRoundTrips.
//
// Writes at the end of a batch are idempotent (an entry is keyed by its
// sequence number) and fenced: a key item refuses a batch that starts before
// the batch that last wrote it (ErrSuperseded: a stale duplicate), and the
// tail refuses a batch that ends before the one that last wrote it (it holds
// that batch's changes already). State is written before the enriched
// records, so a crash between the writes is replayed from the table to the
// same bytes.
//
// Size budget of a key item. A key item holds the versions a batch needs
// (the one before the batch and the batch's own changes of the key), and
// must fit DynamoDB's 400 KB; it is checked against a budget of 400,000
// bytes as DynamoDB counts them before each change is applied. A profile
// image (compact JSON) over MaxImageBytes (128 KiB) is never kept: its
// changelog record is set aside (kind state-budget, field data.image) and
// the key keeps its previous version — a rule on the record alone, so
// replays join the same versions. Three versions of that size fit; when a
// batch holds more changes of one key than its item can keep, the batch
// ends before the change that would not fit and reports it (metric
// KeyBudgetCheckpoints): Lambda checkpoints there and resumes from it, and
// a batch starting there keeps only the one version before it. Records
// before the checkpoint are done, so the output is the same bytes as with
// any other batching; the report does count as one of the mapping's retry
// attempts, so a batch needing more checkpoints than MaximumRetryAttempts
// (more than about 2 × (attempts + 1) versions of 128 KiB of one key in one
// batch) ends at the on-failure destination, whose records quarantine keeps.
// The shard's tail item is bounded by WithTailLimits (at most 256 KiB).
//
// Records that can never be joined — not an envelope, a changelog record
// without key or version or with an image over MaxImageBytes, an activity
// whose enriched record would exceed Kinesis' 1 MiB with its profile — are
// set aside (package setaside: the record's data, its shard and sequence
// number and a reason naming the field, in the quarantine table, counted in
// RecordsSetAside) and the batch goes on without them. Throttling, timeouts
// and other failed reads or writes are transient: reported, retried.
//
// The event source mapping must keep ParallelizationFactor at 1 (the
// default): the tail and the cache follow a shard's batches in order, which
// concurrent batches of one shard would break.
//
// Enriched records. The activity event's envelope is kept (id, type, key,
// times) and its data becomes Data: the original data under "event", the
// profile image (null when none or deleted), "profileVersion" (null when
// none) and the source shard and sequence number. The id is the producer's,
// so downstream deduplicates as upstream does; the sequence number tells
// copies of one event apart from two events a producer sent with one id.
// Like cdc's changelog, an enriched record is JSON without HTML escaping: a
// '<' in the event or the profile stays one byte, not six ("\u003c").
// PutRecords retries only the entries Kinesis failed, so on the output
// stream records of one key can be out of order after a retry: order by
// sequenceNumber.
//
// Starting from a snapshot (cdc.Handler.Snapshot). The snapshot is tied to a
// position of the table's stream taken before its scan, but cdc keeps
// running: a change made during the scan can reach the events stream before
// the snapshot's own records. A consumer that starts at the first snapshot
// record misses it (its snapshot record may carry the older image). Start the
// consumer at a Kinesis position taken before calling Snapshot (the shards'
// latest sequence numbers, or AT_TIMESTAMP of that moment): every change
// after the snapshot's position is then read, and records the snapshot
// covers are skipped by the version rule. Items deleted before the snapshot
// are absent from it, so such a consumer has no tombstone for them (the
// same outcome for a join: no profile).
package enrich
