// Package memdb is an in-process DynamoDB for benchmarks that measure a
// handler's own CPU: it implements the small interfaces Tributary's stores
// declare (state.Views' UpdateItem/GetItem/Query, the dedupe ledger's
// BatchGetItem/PutItem/TransactWriteItems) and answers them as DynamoDB
// does for the requests those stores make — conditions evaluated on the
// item, ReturnValues and ReturnValuesOnConditionCheckFailure honoured,
// ConditionalCheckFailedException and TransactionCanceledException with the
// old item, the 400 KB item limit, queries on the table's keys and on the
// sparse open-windows index (openIn, openUntil; keys only) in sort-key
// order.
//
// A fake of DynamoDB is right in this project in three places only: a
// throughput benchmark of the handler (bench/throughput) must not time
// HTTP, signing and a stand-in's Python, and the Kafka Streams conformance
// test (conformance) and the fault-injection harnesses (pkg/aggregate,
// pkg/join, pkg/cep, pkg/dedupe, pkg/es; make soak) run thousands of seeded
// scenarios through the real code, which moto would make hours long (each
// harness also runs a sample of its scenarios on moto, so that the two
// cannot drift apart). Tables have a string partition key and a string or
// number sort key, or none (the event store's snapshots and commands);
// Query answers a first page under a Limit, with its LastEvaluatedKey, and
// projects top-level attributes. Everything else that proves
// behaviour runs against moto (emulator/standin), and memdb's own tests
// check it against moto on the same requests (byte-equal items). Paths into maps (#a.#b: the quarantine table's
// functions, one entry a function) are read, set and removed; list
// indexes are not. It does not bill, throttle or paginate (pages are
// whole): no caller needs them.
package memdb
