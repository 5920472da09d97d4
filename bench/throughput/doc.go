// Command throughput measures the aggregate function's deployed path on one
// core (GOMAXPROCS=1): the bytes Lambda hands the runtime — Kinesis events
// built byte for byte by pkg/stream/streamtest, with every field a real
// record carries — passed to Processor.Invoke as lambda.Start(p) passes
// them, the response encoded as the runtime sends it. Four paths:
//
//   - per-batch: a plain Kinesis event; the batch is judged against the
//     dedupe ledger, written (one conditional write per (key, window) and
//     one ledger write per key) and the windows its watermark passes are
//     finalized;
//   - interval-first, interval-carried, interval-final: the three
//     invocations of a tumbling-window interval — the first with an empty
//     state, a later one carrying the state the first returned (as Lambda
//     passes it back in the event), and the final one, which flushes.
//
// each at batch 100 (the default) and at the largest event that fits
// Lambda's 6 MB payload (its record count and size are printed). Every
// invocation carries new records (new sequence numbers and event ids), as a
// warm function sees them; a warm-up invocation per deployment takes the
// cold start's reads first. After the runs the views are checked: the
// tumbling windows count every record once.
//
// DynamoDB and Kinesis behind the handler are in-process
// (internal/memdb, and an output stream that accepts every record).
// A fake of DynamoDB is right here (as in the conformance test): the
// benchmark measures the handler's CPU, and HTTP, request signing and a
// stand-in's Python would swamp it and vary with the machine. memdb answers
// the requests as DynamoDB does (its test leaves byte-equal items on moto
// and on memdb for the same invocations); the SDK's serialization of the
// requests is left out, the building of them (expressions, items) is not.
//
// In the same run it measures the floor — stream.KinesisBatch.Decode of the
// same bytes and nothing else — and Benthos on the same records' data
// (bench/benthos, its own module: a count per key per one-minute window).
// Each figure is the median of -runs runs (default 5) with the min–max on
// the _spread and _floor lines. Time is process CPU time (every thread, so
// the collector counts), taken after a collection before each invocation
// so the benchmark's own garbage is not charged to it.
//
// The in-process store's own work answering — memdb's CPU time and
// allocations inside each request, work DynamoDB does on its own servers —
// is not the handler's: it is taken off the handler's figures (as
// bench/load's keep-up takes it off) and printed apart, per invocation
// (store_requests, store_cpu_ms) and per record (store_allocs_per_record).
// Building each request and reading its answer stay the handler's. The
// store's CPU time is its calling thread's inside each call; allocations
// are counted on a twin deployment handed the same events, whose store
// reads the allocation count around each request (that stops the world, so
// the twin is not timed).
//
// The AWS SDK's own work on each request — serializing it, signing it, its
// middleware, decoding the answer — does not run against the in-process
// store, though in Lambda it is the function's CPU. It is measured apart
// (bench/internal/sdkcost: a sample of the requests the timed paths made,
// replayed through a real dynamodb.Client answered at once) and printed
// per operation on the _sdk_cost line; each path's _sdk line charges it
// per request (sdk_ms per invocation) and gives the rate with it
// (records_per_s_with_sdk: records over the handler's CPU plus the SDK's).
//
// Two pipelines: "bench", a count per key per event-time minute with
// producer-duplicate suppression (the default horizon) — the work Benthos
// does too — on the BENCH throughput lines; and "deployed", the stack's
// pipelines/pageviews.json (tumbling, hopping and session windows, six
// aggregates with quantiles), on BENCH throughput_deployed lines:
//
//	BENCH throughput path=<path> batch=<n> payload_mb=<x> records_per_s=<n> cpu_ms=<x> allocs_per_record=<x> floor_ratio=<x> benthos_ratio_median=<x> store_requests=<x> store_cpu_ms=<x> store_allocs_per_record=<x>
//	BENCH throughput_spread path=<path> batch=<n> runs=<n> ... (min–max of each figure)
//	BENCH throughput_floor path=<path> batch=<n> records_per_s=<n> records_per_s_min=<n> records_per_s_max=<n>
//	BENCH throughput_carried batch=<n> carried_per_first=<x>
//	BENCH throughput_benthos batch=<n> runs=<n> records_per_s=<n> records_per_s_min=<n> records_per_s_max=<n>
//	BENCH throughput_sdk_cost batch=<n> us_per_request=<operation>:<µs>,...
//	BENCH throughput_sdk path=<path> batch=<n> sdk_ms=<x> records_per_s_with_sdk=<n> records_per_s_with_sdk_min=<n> records_per_s_with_sdk_max=<n>
//
// records_per_s is records per CPU second of the handler; cpu_ms is its CPU
// per invocation;
// floor_ratio is the handler's CPU over the floor's on the same bytes;
// benthos_ratio_median is the median records_per_s over Benthos' median
// (above 1: faster than Benthos).
//
// Run: go run ./bench/throughput [-runs 5] [-batches 100,max] [-pipelines bench,deployed] [-cpuprofile cpu.out]
// (profile one path: go tool pprof -tagfocus span=interval-first cpu.out).
package main
