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
package eventsource
