// Command benthos is the Benthos peer of `make bench`: the per-minute count
// per key that Tributary's aggregate computes, run in-process as a Benthos
// (github.com/redpanda-data/benthos/v4) stream — a system_window buffer of
// 1-minute tumbling windows on the envelope's event time, group_by_value on
// the key and a count — over 10,000 envelope records, checked against the
// expected counts. It prints
//
//	BENCH throughput_benthos records=10000 records_per_s=... ns_per_record=... allocs_per_record=... peak_heap_mb=... cpu_ms=... wall_ms=... flush_ms=...
//
// records_per_s and ns_per_record are per CPU second: system_window closes a
// window only when the wall clock passes its end, so the wall time from first
// record in to last count out is mostly waiting (wall_ms, about -lead); the
// process's CPU time over that span (cpu_ms) is the work done. flush_ms is
// from the window's end to the last count out.
//
// It lives in its own module so Benthos never enters Tributary's. Run:
// cd bench/benthos && go run . [-records 10000] [-keys 50] [-runs 3] [-lead 2s] [-events lambda-event.json]
//
// With -events it reads the records of a Lambda Kinesis event (what
// bench/throughput hands the aggregate function) and feeds their data, as
// it is, to the stream: the peer runs on the same events.
package main
