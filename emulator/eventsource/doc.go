// Package eventsource plays the role of Lambda's event source mappings for
// the local runner: it polls Kinesis streams, DynamoDB Streams and SQS queues
// on the stand-in with the AWS SDK and invokes a function (usually a real
// bootstrap under aws-lambda-rie, see package rie) with the same events, the
// same batching and the same failure semantics as Lambda:
//
//   - streams: one reader per shard, in order per shard (per partition key
//     with ParallelizationFactor > 1), BatchSize and MaximumBatchingWindow,
//     StartingPosition, ReportBatchItemFailures (resume at the lowest failed
//     sequence number), BisectBatchOnFunctionError, MaximumRetryAttempts,
//     MaximumRecordAge, the on-failure destination record (KinesisBatchInfo /
//     DDBStreamBatchInfo) sent to an SQS queue, tumbling windows with state;
//   - SQS: long polling, BatchSize and batching window, delete on success,
//     delete all but the reported failures with ReportBatchItemFailures,
//     nothing on a function error (the queue's visibility timeout and redrive
//     policy do the rest), MaximumConcurrency pollers;
//   - filter criteria (EventBridge patterns) for all three, dropping the
//     records that do not match.
//
// Progress (batches, item failures, retries, bisections, on-failure records,
// filtered records) goes to an Observer; Poller.Stats keeps the totals and
// Poller.WaitIdle waits until everything present has been processed.
//
// Where the AWS documentation leaves room, these choices were made:
//
//   - splitting a batch does not consume a retry attempt (as the Kinesis and
//     DynamoDB error-handling pages say); the halves run first half first,
//     and a single record that still fails is retried MaximumRetryAttempts
//     times before it is given up on;
//   - after a partial failure the retry carries the records from the lowest
//     failed one to the end of the same batch (no newer records are added),
//     and it counts as a retry attempt;
//   - an itemIdentifier that is empty, null, misnamed or not in the batch
//     fails the whole batch, like a function error (so it may be bisected);
//   - records older than MaximumRecordAge are never sent: they are given up
//     on (RecordAgeExceeded) before the invocation that would carry them;
//   - the final invocation of a tumbling window carries no records;
//   - a failure to reach the function (the emulator, not the handler) is
//     retried without counting an attempt, until the records are too old;
//   - checkpoints live in memory: a new Poller starts again from
//     StartingPosition.
package eventsource
