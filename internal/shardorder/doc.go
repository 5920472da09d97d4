// Package shardorder orders the reading of a Kinesis stream's shards across
// a reshard: a shard is read only once the shards it was split or merged
// from are read to their end, so a key's records come in the order they
// were put. pkg/tail and pkg/results (results -follow) share it.
package shardorder
