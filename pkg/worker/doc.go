// Package worker is the SQS consumer for expensive tasks: Lambda spreads a
// queue's messages over as many concurrent invocations as the mapping allows
// (load balancing), and each task's side effect — its item in the results
// table — happens once per task id however often SQS delivers it, through
// package idempotency.
//
// A message body is an envelope (package stream) of type "task" whose data
// is a Task. Failed messages are reported by message id
// (ReportBatchItemFailures) and come back after the visibility timeout,
// reaching the dead-letter queue after the queue's maxReceiveCount. A
// failure no redelivery can fix (Permanent: not a task, a task id reused
// with other data) is sent by the worker itself to the dead-letter queue,
// with the reason, the source queue and the receive count as message
// attributes (DeadLetters), and reported processed; package redrive brings
// it back once the cause is fixed.
//
// A task whose data.after names a task with no result yet waits: SQS does
// not order a standard queue, nor a FIFO queue across message groups, so
// the dependency may not have run yet. It is reported failed (metric
// DependencyWaiting) and redelivered after the visibility timeout; on the
// source queue's last receive (ApproximateReceiveCount reaching the
// RedrivePolicy's maxReceiveCount) it is dead-lettered with the reason
// (*DependencyError) like a permanent failure.
//
// Each result records the execution environment that produced it. On a
// FIFO queue a failure, a waiting task's too, also fails the later
// messages of its message group (batch.SQS), so a group's order holds: a
// dependency sent in the same group after the task that needs it runs
// only once that task has been dead-lettered. A poison message the worker
// dead-letters is reported processed, so its group goes on at once; one it
// cannot (no DeadLetters, or the send refused) fails on every receive, and
// SQS moves it and the later messages of its group received with it to the
// dead-letter queue with no reason: each held message's log line names its
// group and the message it was held behind (blockedBy). The worker does
// not send the held ones there itself: they would land ahead of the
// message SQS moves later, out of their group's order on redrive.
package worker
