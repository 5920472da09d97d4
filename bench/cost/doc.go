// Command cost measures what exactly-once windowed counting costs in DynamoDB
// writes: the Powertools way (one idempotency record per event, see
// scripts/bench/powertools) against Tributary's handler, side by side on one
// counting stand-in in the same run.
//
// Each workload is N events over 50 keys in one 1-minute event-time window,
// walked in Lambda-sized batches. For each run it prints one line:
//
//	BENCH cost_powertools events=1000 batch=100 write_requests=... wcu=... write_requests_per_1k=... wcu_per_1k=...
//	BENCH cost_tributary events=1000 batch=100 mode=per-batch write_requests=... ...
//	BENCH cost_ratio events=1000 batch=100 mode=per-batch powertools_per_tributary=... wcu_powertools_per_tributary=...
//
// Write units follow DynamoDB's item size rules (standin.Counts.WriteUnits).
// Run from the repository root: go run ./bench/cost [-events 1000,10000] [-batches 100,1000].
package main
