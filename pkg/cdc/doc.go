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
// An id that would pass an envelope id's 256 characters (a long key and
// table name) is "cdc:<hash of table and key>/<version>" instead: the key
// is in "key", and the version stays after the last slash.
//
// Versions. The writer of the table keeps a number attribute "version" on
// each item and bumps it on every write (a conditional write on the previous
// version). A change's version is its NewImage's version; a deletion (a
// tombstone, image null) has the deleted item's version + 1, so it sorts after
// the last image; an item re-created after deletion must continue from there.
// A change without a version attribute (a deletion: its old image without
// one) is refused naming it: nothing orders it against the item's other
// changes (the DynamoDB stream's sequence number, once taken for its
// version, outranked every version the item was given later, and consumers
// never applied the item again), and so is a snapshot's item without one;
// the first write that gives an item its version is applied. So is refused a MODIFY whose version is below
// its old image's, or equal to it while the image (without the personal
// attribute) changed: consumers apply only a higher version than they
// hold, and would keep serving the previous image for good. An erasure of
// the personal attribute alone is no change to the changelog and needs no
// bump.
//
// Records are JSON without HTML escaping: a '<' in an attribute stays one
// byte (encoding/json's default would make it six, "\u003c", and a 390 KB
// attribute of markup a 2.4 MB record). Each record is checked against
// Kinesis' limit (1 MiB of data plus partition key) before it is written.
//
// Bad changes. A change that can never become a changelog record — no
// NewImage (the stream is not NEW_AND_OLD_IMAGES), no entity key, a version
// that is not a non-negative integer, a number that is not a number, a
// record over 1 MiB (control characters are six bytes each in JSON) — is a
// *ChangeError naming the stream record's field (for example
// "dynamodb.NewImage.bio"). The handler sets it aside (package setaside:
// the stream record as JSON, its sequence number and the reason, in the
// quarantine table, counted in RecordsSetAside) and goes on with the next
// change, so the shard never stops on it. Consumers never see that version;
// the next change of the item carries the full image again.
//
// Delivery is at least once. Records are written with PutRecords in stream
// order (calls of at most 500 records and 5 MiB); Kinesis fails entries only
// for throttling or an internal error, both transient: on a partial failure
// the handler reports the lowest failed record as the batch item failure, so it and every record after it are redelivered,
// and records after it that had already been written appear twice. Consumers
// deduplicate by (key, version) and apply a change only if its version is
// higher than the one they hold, so a duplicate or a late retry is harmless.
// Because every record carries the full image (or a tombstone), the changelog
// can be log-compacted by key.
//
// Snapshot publishes the table's current items tied to a position of its
// stream, for a consumer that starts without history.
package cdc
