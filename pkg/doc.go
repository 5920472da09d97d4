// Package pkg is the root of Tributary's stream-processing library: the
// packages a Lambda function imports. None of them starts a server or
// needs the local emulator (that is under emulator/).
//
// Where a record goes, by package:
//
//   - stream, batch, limits, setaside, metrics: the envelope and its
//     decoding, partial batch responses, service limits, records set aside,
//     CloudWatch EMF;
//   - pipeline, window, agg, state, dedupe, aggregate: declared event-time
//     windowed aggregation with exactly-once effects in DynamoDB;
//   - keyed, handler: keyed stateful operators over a shard, and the API
//     for a function of your own;
//   - join, cep, enrich, timeline, cdc: joins, complex event processing and
//     change data capture;
//   - es, projection: event sourcing;
//   - ingest, worker, idempotency, emit, quarantine, onfailure, redrive,
//     replay, results: producers, queues, outputs and operator tools;
//   - strictjson: the one reader of JSON from outside the process (request
//     bodies, config files), which every entry point uses.
package pkg
