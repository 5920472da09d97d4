// Package events holds sample events, one directory per function, that a
// user pastes into the Lambda console's "Test" tab (or sends to a function
// running under aws-lambda-rie). The Go code here is only their test:
// events_test.go runs every sample through its function's handler against
// the local stand-in and checks the outcome documented below, and fails for
// a sample without a test case, so the samples stay valid.
//
//	ingest/function-url-post.json      one envelope            → 202, accepted 1, the record is on the stream
//	ingest/function-url-batch.json     three envelopes         → 202, accepted 3
//	ingest/function-url-invalid.json   second has a bad time   → 400 naming event 1 (id "evt-0006"), field occurredAt; nothing written
//	aggregate/kinesis-batch.json       three valid records     → no batch item failures; counts user-42 10:41 = 2, user-7 10:41 = 1
//	                                   (user-42's device clock is three hours behind: event time corrects it)
//	aggregate/kinesis-poison.json      the second record is poison (occurredAt "yesterday")
//	                                   → exactly its sequenceNumber ...4723 as the failure; only the first record counted
//	quarantine/sqs-on-failure.json     Lambda's on-failure record for a Kinesis batch
//	                                   → no failure; against an empty stand-in the records are not in any stream, so
//	                                     one "missing" item with the batch's coordinates is written
//	quarantine/sqs-unparseable.json    a message that is not an on-failure record → reported by its messageId
//
// Kinesis record data in the samples is base64, as Lambda delivers it; decode
// it to read the envelopes.
package events
