// Command load prices the deployed pageviews pipeline (pipelines/pageviews.json:
// tumbling, hopping 5m/1m and session windows, six aggregates) for a month
// at a stated load, next to the Powertools way and the smallest Amazon
// Managed Service for Apache Flink application, and measures how many
// records a second one aggregate instance sustains on a full shard.
//
// # BENCH load
//
// For each load — N events a second over K keys, each event's key drawn
// uniformly, for -span of event time (10 minutes by default) — it does
// what the stack as deployed (infra/tributary) would do, in simulated time
// (nothing sleeps):
//
//   - the events stream's 2 shards, each event on the shard whose half of
//     the 128-bit hash key space MD5 of its partition key (its key) falls in;
//   - the aggregate mapping's batches: at most 500 records, closed 5 s
//     (MaximumBatchingWindowInSeconds) after their first record arrived; on
//     the per-interval path also at the end of the mapping's tumbling window
//     (-flush, TumblingWindowInSeconds), whose final invocation carries the
//     state and no records; and, as Lambda does, a final invocation right
//     after any invocation whose answered window state is past 1 MB, the
//     window going on with a fresh state (windows_ended_early on the
//     load_detail and keepup_spread lines);
//   - the ticker every minute, and for -tail after the last event, so the
//     windows the events opened close and their finalizing writes count;
//
// each invocation the bytes Lambda hands the runtime (aws-lambda-go's event
// types, encoded) through aggregate.Processor.Invoke or Tick, built as
// aggregate.FromEnv builds them (bench/internal/deployed), over the
// in-process DynamoDB (internal/memdb) billed request by request by item
// size: 1 write unit per KB of the larger of the item before and after a
// write (twice in a transaction; a refused conditional write by the item
// as it is), index units for writes that put an item into the open-windows
// index, move it or take it out, 1 read unit per 4 KB read strongly
// consistent (half when not). It counts invocations, the handler's process
// CPU time (one core, GOMAXPROCS=1, the store's own work taken off, the
// AWS SDK's work for each request it made added: BENCH load_sdk), the
// bytes the functions log (their JSON log at its default level, the EMF
// metrics, Lambda's START/END/REPORT lines, each log event plus the 26
// bytes CloudWatch adds) and the distinct EMF metrics (name and dimension
// values: each is a custom metric a month).
//
// The month priced is the steady state: the pipeline's dedupe layout
// marker is written, uncounted, as if its dedupeLedger had been in place
// for hours (deployed.SettleLayout), so the five minutes after a deploy in
// which each batch reads the other layout's heads again are not taken for
// a month of them; the ledgers' own first hours are in the run as they
// come.
//
// A month is the steady state scaled by 730 hours over -span: a run of
// 2 × -span less a run of -span (steadyLoad), so what a run does once —
// the windows of its first minutes, those its tail closes half full, the
// cold container's first reads — is not priced once per span (a single
// 10-minute run makes 14 hopping 5m/1m windows per key where a steady
// stream makes 10); load_detail's counts are that difference. It prices
// Lambda's requests and GB-seconds (each invocation's duration at the
// aggregate's 1,024 MB, or -memory, is its CPU time over that memory's
// share of a vCPU, 1,024/1,769, plus the store's wait per request it made
// as keepup measured it, rounded up to the millisecond), DynamoDB's write
// and read units and storage (what the tables grow by over the span, kept
// for the pipeline's retention, a week by default, with point-in-time
// recovery),
// CloudWatch Logs ingestion and storage (two weeks), the custom metrics
// and the pipeline's 11 alarm metrics. Prices
// are in prices.go, with their region and date. Lines:
//
//	BENCH load events_per_s=<n> keys=<n> path=<per-batch|per-interval> wcu_per_event=<x> lambda_usd=<x> dynamodb_usd=<x> cloudwatch_usd=<x> total_usd=<x> flink_usd=<x> flink_ratio=<x>
//	BENCH load_detail ... (invocations, CPU per record, billed ms per invocation, requests per event, units, log bytes per event, custom metrics, storage, wall seconds)
//	BENCH load_powertools events_per_s=<n> keys=<n> wcu_per_event=<x> lambda_usd=<x> dynamodb_usd=<x> cloudwatch_usd=<x> total_usd=<x> flink_usd=<x> flink_ratio=<x>
//	BENCH load_kinesis events_per_s=<n> keys=<n> events_stream_usd=<x> results_stream_usd=<x>
//	BENCH load_writes events_per_s=<n> keys=<n> path=<...> items=<table:class> wcu_per_event=<x> writes_per_event=<x> kb_per_event=<x> index_wcu_per_event=<x>
//	BENCH load_packed events_per_s=<n> keys=<n> path=<...> wcu_per_event=<x> packed_wcu_per_event=<x>
//	BENCH load_cloudwatch events_per_s=<n> keys=<n> path=<...> results_logs_usd=<x> emf_logs_usd=<x> platform_logs_usd=<x> other_logs_usd=<x> metrics_usd=<x> alarms_usd=<x> result_lines_per_event=<x> bytes_per_result_line=<n>
//	BENCH load_flush events_per_s=100 keys=1000 flush_s=<n> wcu_per_event=<x> total_usd=<x> flink_ratio=<x> windows_ended_early=<n>
//	BENCH load_nolog events_per_s=100 keys=1000 path=per-interval result_lines=<n> wcu_per_event=<x> lambda_usd=<x> dynamodb_usd=<x> cloudwatch_usd=<x> total_usd=<x> flink_ratio=<x> provisioned_dynamodb_usd=<x> provisioned_cloudwatch_usd=<x> provisioned_total_usd=<x> provisioned_flink_ratio=<x>
//	BENCH load_provisioned events_per_s=<n> keys=<n> path=<...> wcu=<n> rcu=<n> dynamodb_usd=<x> cloudwatch_usd=<x> total_usd=<x> flink_ratio=<x> largest_burst_wu=<n> burst_credit_wu=<n> throttled_wu_per_event=<x>
//
// load_provisioned prices the same run with the views table provisioned
// (tributary:viewsWriteCapacity): the capacity that keeps the run's
// average write and read units a second at 70 % (the stack's auto scaling
// target; 5 units at least, and 5 each for the open-windows index), at
// provisioned prices whether used or not, the storage as on demand, and
// the 8 alarms auto scaling makes. largest_burst_wu is the most the
// shards' invocations of one instant wrote (a flush), burst_credit_wu the
// 300 s of unused capacity DynamoDB keeps to serve one, and
// throttled_wu_per_event what that capacity and credit, played against
// every invocation in order, could not serve at once (retried by the SDK:
// a delay; DynamoDB does not guarantee the credit).
//
// load_writes splits the write units by what the items are (a window kind,
// keyed states, the ledger's head and segments, the listings, the shards'
// watermarks); wcu_per_event over writes_per_event above 1 says those
// items are over 1 KB, and kb_per_event is the bytes they were billed on
// (before each write is rounded up to a whole KB). load_packed sums those
// bytes: packed_wcu_per_event is what the same writes of the same items
// would cost if no write paid for the rest of its last KB — the floor of
// packing today's items together without making them smaller or writing
// them less often. load_flush prices the reference load at each of
// -flushes, the intervals other than the stack's (-flush). load_nolog
// runs the reference load again with the pipeline's outputs.log false (no
// result line logged; -nolog=false skips it), priced on demand and with
// the views table provisioned: result_lines counts the lines it logged.
//
// load_detail's cpu_ms_per_record includes sdk_ms_per_record, the SDK's
// share.
//
// wcu_per_event is write units (tables and index) per event; total_usd is
// Lambda, DynamoDB and CloudWatch, what processing the events costs;
// flink_ratio is total_usd over flink_usd (the goal: at most 0.5). The
// Kinesis streams are the same whichever way the events are processed, so
// they are on a line of their own and not in total_usd.
//
// The Powertools way is the peer of bench/cost (scripts/bench/powertools,
// run by bench/internal/powertools against a counting moto on a sample of
// -peer-events events): per event one idempotency record, and one update
// per window the event lands in (7 for pageviews), each priced as the
// peer's measured per-window update. Its Lambda invocations are the
// per-batch mapping's; its duration the requests it awaits one after the
// other at -latency each; its CPU, storage and any metrics are not counted:
// a lower bound.
//
// Managed Flink's smallest application is 1 KPU and the orchestration KPU
// around the clock at $0.11 a KPU-hour and 50 GB of running storage.
//
// # BENCH load_sdk
//
// The handler calls the in-process store directly, so the AWS SDK's work
// on each request — serializing the input to DynamoDB's JSON, signing it,
// its middleware, decoding the answer — would be missing from the CPU
// time; in Lambda it is the function's, and at some 50 µs a request it is
// most of it. First a 3-minute run of the reference load (100 events a
// second over 1,000 keys) on each path keeps a uniform sample of the
// requests the handler makes and the store's answers (bench/internal/sdkcost); they are
// replayed through a real dynamodb.Client whose HTTP client answers at
// once with the recorded answer, JSON-encoded as DynamoDB answers; the CPU
// per request, by operation, is added to every invocation of keepup and of
// the loads for each request it made:
//
//	BENCH load_sdk us_per_request=<operation>:<µs>,...
//

// # BENCH keepup
//
// One aggregate instance on a full shard: 1,000 records a second over
// -keepup-keys keys in the mapping's batches of 500, the store answering
// each request -latency (4 ms) after it is made, the handler making them at
// its own concurrency (aggregate.DefaultConcurrency, 64). Each invocation's
// duration at 1,024 MB is its CPU time (the store's own work taken off, the
// SDK's per request added) over the vCPU share plus the time
// it waited (its wall time less its CPU time, on one core);
// records_per_s is records over duration, shard_ratio that over 1,000
// (the goal: at least 3). On the per-interval path every invocation of one
// -flush interval is measured (flush × 1,000 / 500 carried invocations and
// the final one; -keepup-batches 8 measures 8 on the per-batch path): the
// first carried ones read the state of keys new to the container, later ones
// carry more state, and the final one flushes. Median of -keepup-runs
// runs; the _spread line has the min–max:
//
//	BENCH keepup path=<path> records_per_s=<x> shard_ratio=<x>
//	BENCH keepup_spread path=<path> runs=<n> records_per_s_min=<x> records_per_s_max=<x> ...
//
// Not counted: TLS and the socket under each request (a few µs at these
// sizes), and a cold start's init.
//
// Run from the repository root:
//
//	go run ./bench/load [-loads 10x100,100x1000,1000x10000] [-paths per-batch,per-interval] [-span 10m] [-flush 2m] [-flushes 1m,5m] [-keepup=false] [-powertools=false] [-nolog=false]
package main
