// Command faultyfn is a test-only Lambda function for the local runner's
// failure-semantics tests. It handles Kinesis, DynamoDB Streams and SQS events
// (told apart by their shape, including the tumbling-window variants) and
// fails on purpose on "poison" records, the way FAULT_MODE says:
//
//	itemfailure  report every poison record as a batch item failure
//	error        return an error for the whole batch if it holds a poison record
//	crash        os.Exit(1) when the batch holds a poison record
//	(empty)      succeed on every batch
//
// A record is poison when its data (Kinesis), body (SQS) or NewImage
// (DynamoDB, attribute "poison" of type BOOL) says "poison": true.
//
// For every invocation it prints one JSON line
//
//	{"invocation":{"source":"aws:kinesis","size":n,"first":id,"last":id,"ids":[...]}}
//
// (ids are sequence numbers for streams and message ids for SQS; tumbling
// window invocations add "window", "state", "final" and "terminatedEarly"), so
// a test reading the function's log sees every batch it was given.
//
// With FAULT_STATE_PAD=n a tumbling-window response carries n filler bytes
// in its state, to push it past Lambda's 1 MB.
//
// A payload that is not an event is a command, for testing the emulator:
// {"do":"echo"} answers the payload back, {"do":"error"} returns an error,
// {"do":"panic"} panics, {"do":"exit"} calls os.Exit(3), {"do":"sleep","ms":n}
// sleeps n milliseconds, {"do":"env","name":"X"} answers the variable's value.
//
// Build it with -tags lambda.norpc and run it under aws-lambda-rie.
package main
