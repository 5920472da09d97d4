// Command cost measures what exactly-once windowed counting costs in DynamoDB
// requests and capacity units: the Powertools way (one idempotency record per
// event, see scripts/bench/powertools) against Tributary's handler, side by
// side on one counting stand-in in the same run.
//
// Each workload is N distinct events over 50 keys in one 1-minute event-time
// window, with a share of them sent again by their producer (-dups, percent:
// the same bytes arriving later, as after a timeout), walked in Lambda-sized
// batches. Tributary runs both write paths, with suppression by event id on
// and off, and every window is closed the way the deployed ticker closes it,
// so the writes that finalize windows are counted; the check that the views
// hold the expected counts runs after the measured span. Lines:
//
//	BENCH powertools batch=100 dup_pct=5 events=1050 writes=... wcu=... reads=... rcu=... wcu_per_1k=...
//	BENCH dedupe path=per-interval batch=100 dup_pct=5 suppression=on events=1050 writes=... wcu=... reads=... rcu=... writes_per_1k=... wcu_per_1k=... powertools_wcu_per_1k=... ratio_wcu=...
//	BENCH cost path=per-interval batch=100 events=1000 writes=... wcu=... reads=... rcu=... powertools_writes=... powertools_wcu=... ratio_wcu=...
//
// Write units follow DynamoDB's item size rules (standin.Counts.WriteUnits),
// read units the items each read returned (standin.Counts.ReadUnits).
// Run from the repository root: go run ./bench/cost [-events 1000,10000] [-batches 100,1000] [-dups 0,5].
package main
