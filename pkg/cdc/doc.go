// Package cdc is change data capture from a DynamoDB table: it turns the
// table's stream (NEW_AND_OLD_IMAGES) into a changelog on the events Kinesis
// stream, one envelope per change with the entity key as partition key, so a
// change and the activity that follows it for that entity meet on one shard
// in order (the stream–table join of DESIGN.md "Joins").
//
// A changelog record is
//
//	{"id": "<table>/<key>/<version>", "type": "profile_changed" | "profile_deleted",
//	 "key": "<key>", "occurredAt": <ApproximateCreationDateTime>, "sentAt": <same>, "receivedAt": <same>,
//	 "data": {"key": "<key>", "version": <version>, "image": <NewImage as plain JSON> | null,
//	          "sequenceNumber": "<DynamoDB stream sequence number>"}}
//
// Versions. The writer of the table keeps a number attribute "version" on
// each item and bumps it on every write (a conditional write on the previous
// version). A change's version is its NewImage's version; a deletion (a
// tombstone, image null) has the deleted item's version + 1, so it sorts after
// the last image; an item re-created after deletion must continue from there.
// Without a version attribute the version is the DynamoDB stream sequence
// number (increasing per item, as the stream orders changes per item).
//
// Delivery is at least once. Records are written with PutRecords in stream
// order; on a partial failure the handler reports the lowest failed record as
// the batch item failure, so it and every record after it are redelivered,
// and records after it that had already been written appear twice. Consumers
// deduplicate by (key, version) and apply a change only if its version is
// higher than the one they hold, so a duplicate or a late retry is harmless.
// Because every record carries the full image (or a tombstone), the changelog
// can be log-compacted by key.
//
// Snapshot publishes the table's current items tied to a position of its
// stream, for a consumer that starts without history.
package cdc
