// Package redrive moves messages from an SQS dead-letter queue back to the
// queue they came from, or prints them without moving them.
//
// Moving is at-least-once: a batch is received from the DLQ, sent to the
// source with SendMessageBatch, and only the entries the send accepted are
// deleted from the DLQ. If the tool stops at any point (Ctrl-C, a crash, a
// network error) no message is lost; at worst a message that was sent but not
// yet deleted is sent again by the next run. Tributary's consumers are
// idempotent (effects are exactly-once), so a duplicate is harmless; for FIFO
// sources the message id is used as the deduplication id, so a re-send
// within SQS's 5-minute deduplication interval is dropped by SQS itself.
//
// A message the source refuses (over its MaximumMessageSize, say) stays in
// the DLQ, named; on a FIFO source the later messages of its group stay
// behind it (HeldBehindRefused), so the source never gets a group out of
// order. A message that fails again while the run goes on (its cause not
// yet fixed: the consumer dead-letters it, or SQS moves it after
// maxReceiveCount) is back in the DLQ as a new message; the run knows it by
// its content (body, attributes, group), leaves it there (FailedAgain) and
// ends, rather than move it round for ever. The summary ends with what the DLQ still reports holding (SQS's
// approximate count) beyond the messages the run names.
//
// The cmd/redrive command is the user-facing tool.
package redrive
