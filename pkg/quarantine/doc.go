// Package quarantine keeps the records of stream batches Lambda gave up on.
//
// Records that can never succeed do not get here by retries: every stream
// consumer sets them aside itself (package setaside), with their data and a
// reason naming the field, and moves its shard on. What still reaches a
// mapping's on-failure destination (the failures queue) is a batch whose
// transient errors — throttling, timeouts, 5xx — outlasted the mapping's
// retries or record age. Lambda's on-failure record carries only the
// batch's coordinates (stream, shard, first and last sequence number), not
// the data, and the stream keeps data for 24 hours by default. The
// quarantine function reads each such message, fetches the records from the
// shard while they are still there (GetShardIterator AT_SEQUENCE_NUMBER,
// GetRecords up to the end sequence number) and writes each one to the
// quarantine table (kind "record") with its data, whole, and a reason that
// says its batch's retries ran out and that it may have been applied
// already (the range is the whole batch of the last attempt), for 14 days
// (TTL expiresAt). The one exception to "whole": a DynamoDB stream
// record's images lose their personal data (the attribute
// setaside.PersonalAttribute, the events table's es.AttrPersonal), which
// would otherwise outlive its erasure here; the copy keeps the keys that
// find the item, and its reason and redacted attribute say what was
// removed. An item a function set aside (kind "set-aside") is never
// replaced by such a copy: its reason is the precise one. So that the two
// meet, a copy has the source a function gives the record: the stream ARN
// alone for DynamoDB Streams (whose Lambda events name no shard; the
// "missing" marker's reason names it), "<stream ARN>/<shard>" for Kinesis.
//
// Nothing is lost without a trace: if some or all records are already gone
// (trimmed, stream deleted), one marker item (kind "missing") says so, with
// the batch's coordinates. A range can hold many MB (a filtered batch's
// holds every record between its first and last), so one message copies at
// most MaxCopyBytes of it in at most 50 GetRecords calls; past either (or
// after 3 empty answers short of a Kinesis shard's tip), the
// marker names the records not copied by their sequence numbers (they may
// still be in the stream), and RecordsMissing counts them (at least 1, which
// its alarm sees). A message is read as every JSON entry point is
// (package strictjson: no key twice, the record's keys spelt exactly; a key
// Lambda may add later is skipped) and each field is held to the bound of the API it comes from
// (Parse: sequence numbers of at most 129 digits, RFC 3339 times of at most
// 64 bytes, ARNs of at most 1,024 bytes, ...), so whatever it writes fits
// DynamoDB's key and item limits. A message that is not such an on-failure
// record can never succeed: it is set aside itself (its body, the field at
// fault, counted in RecordsSetAside and UnparseableMessages) and reported
// processed, never retried. Only a message whose records could not be read
// or written for a transient reason (throttling, a timeout) is reported by
// message id, retried, and after the queue's maxReceiveCount lands in the
// DLQ.
// Writing is idempotent (same source and sequence number, same item), so a
// redelivered message does no harm.
package quarantine
