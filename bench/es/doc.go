// Command es measures the event-sourced seat reservations (packages es,
// seats, projection) on a private counting stand-in, in two phases:
//
//   - commands: C clients (default 4) send N commands (default 300) at once
//     through the commands API in-process — reservations of one or two
//     random seats on S shows (default 24, 10 × 20 seats each), a fifth of
//     them cancellations — each loading its show (snapshot + tail),
//     deciding, and appending with its record and seat map in one
//     TransactWriteItems. It counts the DynamoDB requests the stand-in
//     served per command, and commands per second;
//   - projection: the publisher on the events table's stream and the
//     projector on the published Kinesis stream run as Lambda's mappings
//     would (package eventsource, in-process, polling every 100 ms), while
//     clients send M more commands (default 100) on new shows at a steady
//     rate (default a third of what the first phase measured, so the lag is
//     the pipeline's and not a queue's); each event's lag is from its
//     recording (before the append) to its views written.
//
// It prints
//
//	BENCH es commands_per_s=... requests_per_command=... projection_lag_ms_p50=... projection_lag_ms_p99=...
//	BENCH es_detail commands=... lag_phase_rate_per_s=... accepted=... refused=... appends_lost=... get_item=... query=... transact_write_items=... put_item=... events_projected=... projector_writes_per_event=...
//
// The stand-in serves one request at a time (package standin), so
// commands_per_s is moto's throughput on this machine, not DynamoDB's:
// compare requests per command, which is what the design decides. The lag
// is dominated by the pollers' interval here; Lambda polls a DynamoDB
// stream about four times a second and a Kinesis shard once a second.
//
// Run from the repository root: go run ./bench/es [-commands 300] [-clients 4] [-shows 24] [-lag-commands 100] [-rate 0] [-v].
package main
