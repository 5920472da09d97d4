// Package putback finds the records the quarantine table holds (package
// setaside's items) and puts one back on the Kinesis stream it came from,
// once its cause is fixed: the work behind cmd/setaside.
//
// List scans the table for the records a function set aside (kind
// set-aside), those of a range Lambda gave up on (record) and the notes of
// records that could not be read (missing), filtered by function (its name
// or words of it), category, source and time, newest first, at most a
// given number; it never reads their data. A record several functions set
// aside is listed once for each, with that one's field, category and
// reason.
//
// Putter.Prepare reads one record whole (its chunks too) and decides what
// a put-back would do, or refuses it with a *Refusal naming why. A record
// several functions set aside is judged as each of them set it aside (its
// category, field and rule: the copy reaches them all); Putter.PrepareFor
// judges it as the functions named did (a put-back of one function's
// records). It refuses:
//
//   - only a Kinesis record goes back: a DynamoDB stream record is replayed
//     by writing its item again, an SQS body has no stream, an output a
//     function could not write was never on one, and a missing note holds
//     no record;
//   - a record whose data was cut when it was kept is refused;
//   - a duplicate-conflict or state-budget record is refused: its
//     function took the record's event id before it set it aside, so a
//     copy is dropped as a producer's copy within its dedupe horizon and
//     applied again by the other consumers after it; no put-back reaches
//     that function alone. So is a record whose item says its function's
//     ledger took the id (IDTaken: detect set it aside for a sum rule
//     after its other rules read it), whose copy only comes back as a
//     duplicate-conflict;
//   - a record that first arrived longer ago than the consumers' dedupe
//     horizon (Horizon, 1 h by default as dedupeHorizon is) is refused
//     unless PastHorizon: the consumers that applied it the first time no
//     longer know its id and would apply it again;
//   - the data (or the corrected record given in its place) must be an
//     envelope every consumer reads (stream.CheckStrict and
//     stream.DecodeKinesis, as they do) and ingest would take from a
//     producer (no control, line-breaking or invisible characters in id,
//     type or key; a corrected record is no change data capture type),
//     else it would only be set aside again: the refusal names the field;
//   - a record set aside for a field of its data (data.ms) that still
//     holds what it held is refused unless Unchanged (its cause was
//     elsewhere: the pipeline file or a limit changed), since its function
//     would set it aside again; so is one whose field breaks the rule its
//     item keeps (setaside.Rule: a pipeline's value is a finite number
//     within ±2^53), naming the field and what it must hold. An item kept
//     without a rule is judged by the first check alone.
//
// Hopeless tells, from an item alone, the records that can never go back,
// so that a listing offers a put-back only for one that can. A Refusal
// names the option that would change it (Flag), which each tool spells its
// own way.
//
// The record goes back with its partition key (the envelope's key when it
// was set aside for a partition key that was not its key) and, unless
// ArriveNow, with receivedAt set to its first arrival when the envelope
// has none, so it keeps its event time. Putter.Put puts it and then marks
// the item (putBackAt, putBackSequence). Putting back is at-least-once: a
// run stopped between the two puts the record again next time, which its
// consumers drop as a copy within their horizon. A marked item is not put
// back again unless Again.
package putback
