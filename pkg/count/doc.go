// Package count is the aggregate function's consumer: it counts events per
// key per event-time minute from the events stream into the DynamoDB table
// counts (partition key "key", sort key "window" = the minute's start,
// RFC 3339 UTC; attributes count, windowEnd, updatedAt).
//
// A batch is read in order. The first record that does not decode or
// validate stops it: that record's sequence number is the batch item
// failure, nothing at or after it is counted, and Lambda redelivers from it
// (after MaximumRetryAttempts the on-failure destination gets the batch and
// the quarantine function keeps the records). Records before it are summed
// in memory and written with one UpdateItem (ADD count) per (key, minute).
//
// Not exactly-once yet, and on purpose said so: the ADD is not fenced. A
// batch that Lambda redelivers after some of its UpdateItems succeeded (a
// failed write reported as a batch item failure, a timeout, a crash, or a
// duplicate concurrent invocation) counts those records again. Exactly-once
// effects come with the windowed aggregation (next issue), which fences each
// (key, window) write with the shard's sequence numbers so a replay is
// recognised and skipped. Until then these counts are at-least-once.
package count
