// Package pipeline is the declared form of a windowed aggregation: which
// events, grouped by what, over which windows, computing which aggregates,
// and what to do with late records. Pipelines are declared, not coded: a
// function reads one JSON document at init from the PIPELINE_CONFIG
// environment variable (the CDK stack sets it) with Load, and everything it
// needs at run time comes from the resulting Config.
//
// Parse refuses a config it cannot honour with an error naming the field
// path, for example
//
//	windows[1].advance: 45s does not divide size 2m: size must be a whole number of advances; use 40s or 1m0s
//	value: required when aggregates include "sum"
//
// including a grouping key that is not the stream's partition key while
// Lambda processes a shard with a parallelization factor above 1: records of
// one group would be spread over concurrent batches with no order among
// them, so the config is refused rather than the exactly-once guarantee
// weakened (repartition the stream by the grouping key instead). The
// document is read by package strictjson first (a key twice, text that is
// not UTF-8, nesting past strictjson.MaxDepth are refused by path), and an
// unknown field is named with the known one within two edits as a hint
// ("dedupHorizon: unknown field; did you mean \"dedupeHorizon\"?"). A
// field takes its default only when it is left out: null, and "" for a
// string ($schema aside), are refused naming the field, as the JSON Schema
// refuses them, so an editor and the stack read a file the same way.
//
// A document with several independent mistakes is refused with all of
// them at once, in its order, one line each (at most 20), leaving out a
// mistake that only follows from another (a misspelt "nmae" is not also a
// missing name):
//
//	2 mistakes:
//	  windows[1].advance: 45s does not divide size 2m: size must be a whole number of advances; use 40s or 1m0s
//	  outOfOrderness: "5x" is not a duration such as "90s", "5m" or "1h30m"
//
// Config.Extract reads a record's grouping key, value and distinct value
// from its envelope without decoding the whole payload.
//
// A repository declares its pipelines as files, pipelines/<name>.json, which
// LoadDir reads. Their fields are declared once, in schema.go: Parse takes
// its known fields from those tables, and JSONSchema writes them out as the
// JSON Schema (draft 2020-12) editors use for completion,
// pipelines/pipeline.schema.json (`make schema`; a test fails when the
// committed file differs, and checks every example against it with a JSON
// Schema validator).
package pipeline
