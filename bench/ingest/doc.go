// Command ingest measures the ingest handler under load behind a real HTTP
// server on 127.0.0.1, writing to a 2-shard stream on a private stand-in,
// and side by side the same load written directly with PutRecords (no HTTP,
// no validation, no receivedAt) as the peer. The load is bounded: N requests
// of 25 events from C concurrent producers, each on its own stream.
//
// First it measures the handler's own CPU (cpu.go): the Function URL
// event's bytes through aws-lambda-go's handler wrapper (the runtime's
// decode and encode included) with an in-process Kinesis behind it, against
// a floor that only decodes the event, splits the body and builds the
// PutRecords request; process CPU on one core, median of runs.
//
// It prints:
//
//	BENCH ingest_cpu us_per_event=... floor_us_per_event=... floor_ratio=... (with min and max)
//	BENCH ingest_throughput events_per_s=... p50_ms=... p99_ms=... requests=... policy=...
//	BENCH ingest_peer_putrecords events_per_s=... p50_ms=... p99_ms=... requests=...
//	BENCH ingest_ratio overhead=...
//
// overhead is the peer's events/s over ingest's: 1.0 means the front door
// costs nothing on top of the PutRecords it makes; 2.0 means half the rate.
// Both sides go through the stand-in (moto behind a serializer), which is
// slower than Kinesis, so the absolute rates measure the stand-in as much as
// ingest; the ratio is the number to watch.
//
// Run from the repository root: go run ./bench/ingest [-requests 400] [-concurrency 8] [-policy backpressure] [-cpu-requests 2000] [-cpu-runs 5].
package main
