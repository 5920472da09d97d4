// Package conformance checks the declared windowed aggregation (package
// aggregate, the aggregate and ticker functions) and a handler of your own
// (package handler), and the stream–stream join (package join, the join
// function), against a real stream processor: Apache Kafka Streams, run in
// process by its TopologyTestDriver; and complex event
// processing (package cep, the detect function) against Flink CEP, run in
// process by Flink's operator test harness.
//
// The package has no code of its own; its test (kstreams_test.go) generates
// seeded event histories for every window kind (tumbling, hopping, sliding,
// session) under both late policies (drop, and correct with an allowed
// lateness), runs each one through the aggregate function's Lambda entry
// point (raw Kinesis event bytes, random batch cuts, redelivered batches,
// producer duplicates, ticks) over an in-process DynamoDB (internal/memdb),
// on both write paths — plain batches (TestKafkaStreamsConformance) and the
// stack's default, batches of a mapping with TumblingWindowInSeconds cut
// into intervals that carry their state to a final invocation
// (TestKafkaStreamsConformancePerInterval) —
// and through a small Kafka Streams program (kstreams/, a Maven project the
// test builds when its jar is missing or stale), and compares every final
// window: its bounds, its value (count, sum, min, max), its revisions on the
// output stream, and the records each engine dropped as late.
//
// handler_test.go plays the same histories through a handler of package
// handler (a user's own aggregate of count, sum, min and max, with the
// history's window kind and late policy) and compares it with Kafka
// Streams the same way, without views (a handler keeps none).
//
// Where the two engines differ by design, the test aligns them and says so
// in a comment; docs/windows.md ("Conformance with Kafka Streams")
// lists the same differences. Sliding windows that Kafka makes by copying a stored window
// which missed a partly late record are checked against this project's own
// definition instead and counted as explained (sliding_test.go). Anything
// else is a mismatch and fails the test.
//
// join_test.go generates seeded histories of searches and clicks for every
// join type (inner, left, outer) and three windows (before 0 and above,
// allowedLateness 0, shorter and longer than within), out of order, some
// late, runs each through the join function's Lambda entry point
// (join.New over internal/memdb, raw Kinesis event bytes, random batch
// cuts, redelivered batches, producer copies, ticks) and through Kafka
// Streams' KStream–KStream join (JoinWindows.ofTimeDifferenceAndGrace,
// in-memory stores, the second main class of kstreams/, JoinOracle), and
// compares the joined pairs, the unmatched records and the records dropped
// as late. docs/stream-joins.md ("Kafka Streams") lists the differences
// the test aligns: the two this join keeps on purpose, and two defects of
// Kafka Streams' own it does not copy; each is counted apart.
//
// flinkcep_test.go generates seeded histories of every CEP pattern form
// with a Flink equivalent (a filter, followedBy, next, a last
// notFollowedBy, timesOrMore, skipPastLastEvent and noSkip, late events),
// runs each through the detect function's handler (cep.NewHandler over
// internal/memdb, Lambda's batches, redeliveries and producer copies) and
// through a small Flink CEP program (flinkcep/, a Maven project built the
// same way), and compares the matches — rule, key, the matched events' ids
// in order — and the events dropped as late. docs/cep.md ("Conformance
// with Flink CEP") lists the differences the test aligns.
//
//	go test ./conformance                          # 3 seeds per kind and policy, per join type and window, and per CEP form
//	go test ./conformance -args -conformance.seeds=200   # make soak
package conformance
