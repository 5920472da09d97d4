// Package projection derives views from an event log (package es): the
// projector function reads the published events from Kinesis and keeps
// items of a views table, and Rebuild builds a new version of that table
// from the log, from the start, and moves the readers to it.
//
// # Three kinds of view, three fences
//
// Every view item carries "version": the aggregate version of the last
// event applied to it. How it is used depends on the view:
//
//   - A FoldView keeps one item per aggregate and applies each event to it
//     in order (free seats: +2, −3, …). A batch's events of one aggregate
//     become one conditional UpdateItem, conditioned on the item being at
//     the version just before them; its old version comes back when the
//     condition fails (no read on the normal path). Events it already holds
//     are dropped and the rest applied; a gap (the item is behind the first
//     event: a record not yet delivered, a new version of the table) is
//     filled from the event store itself (a consistent Query of the missing
//     versions), so order across records, redelivery and duplicates change
//     nothing. A gap the store cannot fill — the record's version was never
//     appended (a hand-made record, or one of an events table since
//     replaced) — is one no retry fills: that record and its aggregate's
//     later ones are set aside naming data.version, and no view applies
//     them. A fold finds such a gap by its failed condition; an aggregate
//     type with entity views and no fold is checked against the log by a
//     consistent read of the batch's last version of each aggregate (and,
//     when the log lacks it, of the versions before), since an entity item
//     put at a version never appended would keep out every later event of
//     its key.
//   - An EntityView keeps items each fully determined by the last event
//     that touched it (a booking: reserved, then cancelled). Each item is
//     put whole, conditioned on its version being older than the event's:
//     an older or repeated event cannot overwrite a newer one.
//   - A StateView keeps the aggregate's current state (the seat map). The
//     command writes it in the same transaction as the events (package es
//     WithSyncView), so the live projector leaves it alone; when a table is
//     rebuilt or caught up, the projector reads the aggregate's state from
//     the event store (snapshot plus tail) and puts it, conditioned on a
//     newer version.
//
// Items written from a Kinesis record also carry f_<shard>: the record's
// sequence number zero-padded (package state's fence), so that package
// replay's versions, use-version and rollback know how far a version of the
// table got on each shard.
//
// Records that can never be applied — not a published event, or an event
// a fold cannot take — are set aside (package setaside) with the field and
// the reason, and the shard moves on; a fold that cannot take version k
// stays at k−1 and the records after it are set aside too, naming it.
// Transient failures report the first record of the aggregate that failed,
// so Lambda redelivers from there and the fences skip what was applied.
//
// # Rebuild
//
// Rebuild reuses package replay's versioning: the views table is named by
// an SSM parameter (the registry), a rebuild creates <views>-vN tagged as
// replay's, fills it from the start of the log — a consistent Scan of the
// events table, applied with the same views and fences — then follows the
// published stream from just before the scan began until it has caught up,
// swaps the parameter and keeps following for the handover. A record both
// the scan and the stream bring is applied once (the fences). Compare
// checks that two versions hold the same items; after a rebuild,
// Diff.AfterSwap says which of their differences the swap explains (what
// commands created or updated after it is only in the new version).
package projection
