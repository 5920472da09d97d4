// Package worker is the SQS consumer for expensive tasks: Lambda spreads a
// queue's messages over as many concurrent invocations as the mapping allows
// (load balancing), and each task's side effect — its item in the results
// table — happens once per task id however often SQS delivers it, through
// package idempotency.
//
// A message body is an envelope (package stream) of type "task" whose data
// is a Task. Failed messages are reported by message id
// (ReportBatchItemFailures) and come back after the visibility timeout; a
// message that cannot be a task (poison) is reported too, with the reason
// logged, and reaches the dead-letter queue after the queue's
// maxReceiveCount. On a FIFO queue a failure also fails the later messages
// of its message group (batch.SQS), so a group's order holds.
package worker
