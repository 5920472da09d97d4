// Package es is event sourcing on DynamoDB: an append-only event store with
// optimistic concurrency, snapshots, idempotent commands, publication of the
// log through the table's own stream, and the one audited way to erase
// personal data from it.
//
// # The log
//
// The events table holds one item per event: partition key aggregateId,
// sort key version (a number, 1, 2, 3, … per aggregate). An event is
// appended with a conditional Put (attribute_not_exists(version)), so two
// commands that read an aggregate at version 4 cannot both write version 5:
// the second one's write fails and it learns the current version
// (*ConflictError). The events of one command (a move is a cancellation and
// a reservation) are appended in one TransactWriteItems, all or none.
//
// Nothing in this package updates or deletes an event, and no function of
// the stack is granted UpdateItem, DeleteItem or BatchWriteItem on the
// table. The one exception is Erase: the right to erasure of personal data
// outlives the immutability of events (the notes' limit of immutability).
// Personal data never enters an event's data: it is kept apart in the
// event's "personal" attribute (with "subject", whose data it is, indexed by
// SubjectIndex), never published and never copied into a view or snapshot,
// so erasing it is removing that attribute from the subject's events.
// Erase does it, marks each event (erasedAt, erasure) and appends a
// PersonalDataErased event to the aggregate "erasure#<subject>" that lists
// what it erased, by whom and why: the erasure is itself in the log. That
// id is in the store's own namespace (NamespaceSeparator): no command can
// name it, so an audit event never lands in a domain's aggregate. Trails
// written before the namespace are at "erasure:<subject>"; ErasureTrail
// reads both, and the executor passes over an audit event that such an
// erasure appended into a domain aggregate of that id.
//
// No copy of the personal data outlives the erasure elsewhere in the
// stack's stores: the published records never hold it, and a stream record
// set aside or quarantined loses the attribute (setaside.PersonalAttribute
// is AttrPersonal). What AWS keeps by itself — the table's stream for 24
// hours, point-in-time recovery for 35 days — docs/event-sourcing.md lists.
//
// # Commands
//
// A Command (id, type, aggregate, optional expectedVersion, data) is read by
// ParseCommand through package strictjson (valid UTF-8 with no lone
// surrogate, no key twice, bounded depth and size: an *InvalidError naming
// the field), and a Decider reads its data with DecodeData, which refuses a
// field its type does not have at any depth. It is executed by an Executor
// over a Decider — the domain's Initial state,
// Evolve (apply a recorded event) and Decide (validate a command against
// the state: new events, or a *Refusal naming the field). The executor loads
// the aggregate (its snapshot plus the events after it, both consistent
// reads), decides, and appends the events together with
//
//   - the command's record in the commands table (a conditional Put on the
//     command id), so a retried command can never append twice and gets the
//     first answer back byte for byte, whatever happened in between;
//   - the items of the views that must never be stale (WithSyncView), in the
//     same transaction: the notes' "perform the updates of the read view
//     synchronously with appending the event to the log";
//   - a snapshot of the state every SnapshotEvery versions, so a load reads
//     at most that many events after it.
//
// A retry is the same command when its type, aggregate, expectedVersion
// and data are equal as JSON values (Command.Fingerprint: key order, white
// space and escapes do not count, numbers count as written, the times a
// TimedCommands decider names count as instants); the same id with
// another command is refused naming the id. Records written before
// fingerprints read data as a value still match a retry sent as before
// (Command.RecordedAs).
//
// A refusal is recorded too (one conditional Put), so its retry is refused
// the same way; malformed commands (400) and version conflicts (409, which
// a retry would meet again anyway) are not. Without expectedVersion the
// executor re-reads the events that beat it and decides again (a few times),
// so the loser of a race for the same seat is refused on the state that won.
//
// # Publication
//
// The events table's DynamoDB stream is the only way events leave it — no
// dual write. Publisher (the publish function) turns each INSERT into an
// envelope on a Kinesis stream keyed by aggregate id, without the personal
// data; it sets aside, naming the attribute, a MODIFY that is not an
// erasure and every REMOVE, which only a hand outside the code can cause.
package es
