// Package idempotency makes a function's side effects happen once per
// idempotency key, however often Lambda or SQS delivers the same payload: the
// semantics of Powertools for AWS Lambda's idempotency utility with its
// DynamoDB persistence layer, in Go.
//
// The key is the SHA-256 of a chosen part of the payload (Config.KeyPath, a
// dotted JSON path such as "body" or "data.orderId"), prefixed with the
// function's name. Store.Do writes an INPROGRESS record for the key with one
// conditional PutItem, runs the function, and marks the record COMPLETED with
// the function's result and an expiration (the table's TTL attribute). A
// second call with the same key then gets the stored result without running
// the function; a call while the first is still running gets ErrInProgress
// (an SQS consumer reports that message failed, and SQS redelivers it after
// the visibility timeout). The conditional write returns the existing record
// on failure (ReturnValuesOnConditionCheckFailure ALL_OLD), so a duplicate
// costs one request and no extra read.
//
// An INPROGRESS record expires with the invocation that wrote it (the
// context's deadline): if that invocation crashes between the side effect
// and the COMPLETED mark, a later delivery runs the function again. As with
// Powertools, the guarantee is therefore "at most once per key while records
// live, unless an invocation dies mid-way", and side effects that must never
// repeat need their own conditional write. If the function returns an error
// the INPROGRESS record is deleted so that a retry can run it — unless
// another invocation has taken the key over since the lock expired: its
// record is left alone.
//
// With Config.ValidationPath set, the hash of that part of the payload is
// stored too, and a later payload with the same key but a different hash is
// refused with *PayloadMismatchError instead of getting another payload's
// result.
package idempotency
