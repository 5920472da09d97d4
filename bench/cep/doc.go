// Command cep measures the CEP function and the stream–stream join, each
// beside a peer measured in the same run, and prints BENCH lines:
//
//	BENCH cep rules=<n> events_per_s=<x> naive_events_per_s=<x> ratio=<x>
//	BENCH join writes_per_1k=<x> wcu_per_1k=<x>
//	BENCH join dedupe=off writes_per_1k=<x> wcu_per_1k=<x>
//
// CEP, for 10, 100 and 1,000 active rules (filters, sequences, absences
// and count thresholds over 200 event types, a third of them limited to
// some keys, a sixth to a key prefix): events per second on one core
// (GOMAXPROCS 1) through the detect function's processing path — the
// Lambda payload decoded in one pass (stream.KinesisBatch), each envelope
// decoded, the rules looked up and evaluated (cep.Operator.Select), each
// key's state decoded, the events folded in event-time order with the
// shard's watermark before each, the matches rendered and the state
// encoded, as keyed.Runner does — with the state kept in memory instead of
// DynamoDB (so the figure is the function's CPU, not moto's). The peer is
// the same path with the rule index turned off (cep.Operator.Naive): every
// rule evaluated on every event. Both must find the same matches, or the
// run fails.
//
// Join: the deployed join (pipelines/search-click.json) over 1,000 search and click
// events of 400 sessions, in batches of 100 (its mapping's BatchSize),
// through the real handler against a counting stand-in, then ticks that
// close every window: DynamoDB write requests (state items, the dedupe
// ledger, watermarks) and write capacity units per 1,000 events, with
// suppression of producer copies on (as deployed) and off.
//
// Run from the repository root: go run ./bench/cep [-events 50000] [-join-events 1000] [-v]
// [-cpuprofile file] (a profile of the CEP measurements only).
package main
