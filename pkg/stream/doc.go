// Package stream is the event envelope every Tributary stage reads and writes,
// and the decoders that pull envelopes out of the records Lambda hands a
// function: Kinesis records, SQS messages and DynamoDB stream records.
//
// An envelope carries three clocks. occurredAt and sentAt are read from the
// producer's (device's) clock, receivedAt from the server's clock when ingest
// accepted the event. Devices' clocks are wrong, sometimes by hours, but the
// time between "occurred" and "sent" is measured on one clock and so is right;
// EventTime shifts it onto the server's clock:
//
//	event time = occurredAt + (receivedAt − sentAt)
//
// Errors a producer can cause are *FieldError (which field and why); a record
// that cannot be decoded is a *PoisonRecordError naming the record (sequence
// number, message id or event id) and the field. A Kinesis record put with a
// partition key other than its envelope's key (a producer writing to the
// stream itself) is one too, naming key: every consumer takes one key's
// records to be on one shard, in order, as ingest puts them.
//
// Decoding goes through Unmarshal, which fills a caller-owned *Envelope with a
// single-pass scanner for the envelope's shape (two allocations per record,
// about 5x faster than encoding/json) and falls back to encoding/json for
// anything it is not sure of, so results and errors are the same either way.
//
// The Lambda Kinesis event itself is decoded the same way: KinesisBatch.Decode
// reads the bytes the runtime hands over once — records, base64 data, and the
// tumbling window's properties and state — into buffers it reuses (one
// allocation per batch), and leaves what it is not sure of to encoding/json
// and aws-lambda-go's types, with the same result; its errors name the record
// and field. AppendKinesisEventResponse and
// AppendKinesisTimeWindowEventResponse write the responses as the runtime
// would. CompareSequence orders sequence numbers without parsing them.
//
// aws-lambda-go decodes any JSON object into any event type, so every
// consumer's entry point checks the event is its own kind first
// (CheckKinesisEvent, CheckKinesisBatch, CheckDynamoDBEvent, CheckSQSEvent):
// an SQS batch sent to a Kinesis consumer from the console's Test tab, or
// {}, fails the invocation with an *EventShapeError naming the field.
package stream
