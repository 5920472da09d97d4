// Command enrich measures the stream–table join (pkg/enrich) on a private
// counting stand-in: N events (default 10,000) over K keys (default 200),
// each key's profile published first and about one record in fifty a
// profile change, handed to the handler in-process in Lambda-sized batches
// (default 100) of one shard, twice:
//
//   - warm: one Handler for every batch, as a warm Lambda instance is;
//   - cold: a new Handler per batch (an empty cache every time), the peer
//     the warm numbers are compared with.
//
// Each run gets its own empty join table and output stream. The input
// records are built in-process with increasing Kinesis-style sequence
// numbers (reading them from a stream is not what is measured); the join's
// reads and writes and the enriched records' PutRecords go to the stand-in.
// It prints
//
//	BENCH enrich mode=warm events=... enriched=... batches=... enriched_per_s=... read_requests_per_1k=... items_read_per_1k=... read_round_trips_per_batch=... extra_read_round_trips=... update_requests_per_1k=... elapsed_ms=...
//	BENCH enrich mode=cold ...
//	BENCH enrich_ratio cold_per_warm_read_requests=... cold_per_warm_items_read=...
//
// read_requests are BatchGetItem requests as the stand-in counted them,
// items_read the items they returned, both per 1,000 enriched events.
// enriched_per_s is wall-clock throughput through the handler against moto
// on this machine (moto dominates it): compare modes, not absolute values.
//
// Run from the repository root: go run ./bench/enrich [-events 10000] [-keys 200] [-batch 100] [-v].
package main
