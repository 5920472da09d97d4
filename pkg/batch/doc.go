// Package batch builds the partial batch responses Lambda reads when an event
// source mapping has FunctionResponseTypes [ReportBatchItemFailures].
//
// Kinesis and DynamoDB Streams are ordered per shard: Lambda checkpoints
// before the lowest sequence number reported and redelivers from it, so
// everything after a failed record is redelivered too. StreamFailures reports
// sequence numbers lowest first, and InOrder stops at the first failure so a
// handler applies nothing that will come again.
//
// SQS reports individual message ids. In a FIFO queue a failed message must
// not be overtaken by later messages of its message group, so SQS fails those
// too without processing them; other groups go on.
package batch
