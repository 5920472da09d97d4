// Command worker measures what the SQS worker's idempotency costs per
// message, in DynamoDB requests and in latency, side by side in one run on
// one counting stand-in:
//
//   - worker_idempotency: pkg/worker's handler, called in-process with SQS
//     events of "task" messages in batches of 10, with its idempotency store
//     (one record per data.taskId);
//   - worker_no_idempotency: the same handler with the idempotency layer
//     replaced by a pass-through, so each message goes straight to the side
//     effect (the results table's UpdateItem);
//   - worker_powertools: Powertools for AWS Lambda (TypeScript)'s
//     makeIdempotent with its DynamoDB persistence layer, keyed by
//     data.taskId, doing the same UpdateItem (scripts/bench/powertools/worker.mjs),
//     run by Node on the same messages.
//
// It prints:
//
//	BENCH worker_idempotency messages=500 dynamodb_requests_per_msg=... p50_ms=... p99_ms=... batch=10 dynamodb_requests=... elapsed_ms=...
//	BENCH worker_no_idempotency messages=500 ...
//	BENCH worker_powertools messages=500 ...
//	BENCH worker_ratio idempotency_overhead_requests=... powertools_per_tributary_requests=...
//
// A message's latency is the wall time of its idempotent call: from entering
// the idempotency layer (or the pass-through) to its return, side effect
// included; for the peer, the same span around the makeIdempotent function,
// measured inside Node. idempotency_overhead_requests is the DynamoDB
// requests per message the idempotency layer adds; powertools_per_tributary_requests
// is Powertools' requests per message over Tributary's.
//
// Every variant must leave each task's results item written exactly once
// (executions = 1, the expected digest) or the run fails.
//
// Run from the repository root: go run ./bench/worker [-messages 500] [-v].
package main
