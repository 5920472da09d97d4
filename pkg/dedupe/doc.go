// Package dedupe suppresses producer duplicates: an event whose id was
// already accepted within a horizon has no second effect, whichever way it
// came back (a producer retrying after a timeout or a 429, one request holding
// an id twice, a copy sent minutes later).
//
// Lambda's own retries are handled elsewhere, by sequence-number fences
// (package state): they redeliver the same record. A producer's copy is a new
// record with a new sequence number, so it needs the event's own identity.
//
// # Identity and claims
//
// An event is identified by its key and id: ids need to be unique per key
// (the key is the Kinesis partition key, so every copy of an event lands on
// the same shard, in order, and one key's ledger is enough to see them all).
// The identity is the first 128 bits of SHA-256 over key and id: for n ids of
// one key within the horizon the chance that two distinct ids collide — the
// only way a real event could be taken for a duplicate — is about n²/2¹²⁹,
// 1.5·10⁻²⁷ for a million.
//
// The first record that carries an identity claims it: the ledger keeps, per
// identity, a fingerprint of the record that claimed it (shard and sequence
// number), a fingerprint of its content (type, occurredAt, data), and when it
// arrived. A record whose identity is claimed by itself is Lambda redelivering
// it (the fences decide what it still has to do); by another record with the
// same content, a Duplicate; with other content, a Conflict — a different
// event reusing the id, refused with a reason rather than merged.
//
// # The ledger
//
// Each key has one small head item, rewritten with optimistic concurrency
// (its version) when a batch (per-batch path) or an interval (per-interval
// path) claims new identities, and sealed segment items written once, when the
// head would outgrow its budget (so a hot key never outgrows DynamoDB's 400 KB
// item, and a rewrite is billed for a small item). A warm process keeps each
// key's ledger in memory; a stale copy can only lack claims, which makes a
// record look New, and New records are only accepted once the conditional
// write of the head succeeds — when it fails, DynamoDB hands back the head as
// it is and the key is judged again. Duplicate and Redelivered verdicts never
// need that check: claims are immutable.
//
// Sealing is two plain writes, the segment then the head, at half a
// transaction's write units: the head's conditional write is the commit,
// and only the segments a head names are read. A segment's item is its
// number and a salt, a hash of its claims, which the head records, and it
// is put only where no item is or the same claims are (else under the next
// salt): a process sealing other claims from a stale head, whose head write
// then fails, never overwrites a segment another process committed; what
// it wrote, named by no head, expires.
//
// Claims older than the horizon (by the claiming record's arrival time) are
// dropped; a copy that arrives later than that counts again.
package dedupe
