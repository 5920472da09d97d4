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
// never serves a stale version. Reads are one BatchGetItem per batch (the
// tail plus the keys not in the cache); the one corner that needs a second
// round trip — a cache older than the tail reaches back — is counted in the
// metric ExtraReadRoundTrips.
package enrich
