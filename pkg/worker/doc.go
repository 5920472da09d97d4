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
// with other data, a task whose data.after names a task with no result) is
// sent by the worker itself to the dead-letter queue, with the reason, the
// source queue and the receive count as message attributes (DeadLetters),
// and reported processed; package redrive brings it back once the cause is
// fixed. Each result records the execution environment that produced it. On a FIFO queue a failure also fails the later messages
// of its message group (batch.SQS), so a group's order holds.
package worker
