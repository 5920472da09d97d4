// Package archive keeps the events stream past its retention in S3 and reads
// it back for a replay.
//
// The archiver (Archiver, run by functions/archive on its own event source
// mapping of the events stream) writes every batch Lambda hands it as
// gzip'd JSON lines, one object per shard and arrival hour (per run of
// consecutive records of the same hour, so that a shard's objects never
// interleave where arrival times go back across an hour):
//
//	archive/<stream>/dt=YYYY-MM-DD/hh=HH/<shard>-<firstSeq>-<lastSeq>.after-<hour>-<prevSeq>.jsonl.gz
//
// Each line is one Kinesis record as it was on the stream: its shard,
// sequence number, approximate arrival time, partition key and data
// (Record). The name links the object to the record the archiver was
// handed before its first one on the shard (Link: its sequence number and
// arrival hour), taken from the shard's chain head, chain/<stream>/<shard>.json,
// which the archiver reads and writes before each batch's objects (one GET
// and one PUT per shard and batch). So a deleted object, or a batch the
// archiver gave up on, leaves a link naming a record no object holds, which
// CheckChain reports as a *HoleError. A retry starts at the batch's first
// record and takes the head's link again, so it writes the same object
// again, or, with more records after, one that overlaps the first: the
// reader keeps each sequence number once, and an overlap is no hole.
// Objects written before the chain, and the first of each shard's chain,
// have no link: unknown, taken as following.
//
// With WithMetrics the archiver writes, once per invocation, the records,
// objects and (gzip'd) bytes it wrote, and the chain problems it met: a
// chain head that is not what it writes (ChainHeadsUnreadable) and a
// batch that begins inside its head's last batch (ChainRestarts); each
// leaves the batch's first object with an unknown link, and is logged
// with the head's key.
//
// Amazon Data Firehose is not used: its records lose the shard and sequence
// number, which a replay needs to join the archive to the stream without a
// gap or a double count (package replay's seam) and which the views' fences
// compare; docs/archive.md says more.
//
// Reader lists the objects of a time range (the key's date and hour are the
// first record's arrival, so the keys sort by time), groups them by shard in
// sequence order, and hands each shard's records in order. An object that
// cannot be read (missing, archived to a class that needs a restore) or is
// corrupt (not gzip, a line that is not a record, a record of another shard
// or outside the name's range, out of order) is an *ObjectError naming it.
// CheckChain checks a shard's listed objects against their links.
package archive
