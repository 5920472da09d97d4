// Package quarantine keeps the records a stream consumer gave up on. When a
// Kinesis (or DynamoDB Streams) event source mapping exhausts its retries or
// the records grow too old, Lambda sends an on-failure invocation record to
// the failures queue. That record carries only the batch's coordinates
// (stream, shard, first and last sequence number), not the data, and the
// stream keeps data for 24 hours by default. The quarantine function reads
// each such message, fetches the records from the shard while they are still
// there (GetShardIterator AT_SEQUENCE_NUMBER, GetRecords up to the end
// sequence number) and writes each one to the quarantine table with why it
// failed, for 14 days (TTL expiresAt).
//
// Nothing is lost without a trace: if some or all records are already gone
// (trimmed, stream deleted), one marker item says so, with the batch's
// coordinates. A message that is not an on-failure record is reported by
// message id; after the queue's maxReceiveCount it lands in the DLQ.
// Writing is idempotent (same source and sequence number, same item), so a
// redelivered message does no harm.
package quarantine
