// Package keyedtest is the fault-injection harness of keyed operators (the
// join, CEP): it plays one shard's event source mapping against a handler
// with Lambda's retry patterns — whole batches redelivered after a lost
// response, concurrent duplicate invocations, crashes after k of n writes
// (DynamoDB or Kinesis), bisected retries, checkpointed retries after item
// failures, retries with another batch size, cold starts — and reads an
// output stream back, so a test can compare what came out with a reference
// computed in memory. The scenarios run on moto (emulator/standin) or on the
// in-process DynamoDB (internal/memdb) with an output stream in memory (Stream).
package keyedtest
