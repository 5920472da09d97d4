// Package streamtest builds Lambda Kinesis events byte for byte as the
// Lambda service hands them to a function, for tests and benchmarks: every
// field a real record carries (56-digit sequence numbers, event IDs, ARNs
// as CDK names them, arrival times with milliseconds), data an envelope as
// ingest writes it, compact JSON. Benchmarks that decode these bytes and
// benchmarks of the deployed handler use the same events, so their figures
// compare.
package streamtest
