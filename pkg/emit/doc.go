// Package emit writes derived records (joined records, CEP matches) to a
// Kinesis stream: in PutRecords calls within Kinesis' limits, retrying only
// the entries Kinesis refused, with backoff. Emission is at least once:
// every record carries a stable id, so the next stage deduplicates by it.
package emit
