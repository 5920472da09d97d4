// Package state keeps window results in DynamoDB with exactly-once effects
// under Lambda's at-least-once delivery.
//
// One item per (pipeline, key, window kind, window), but for windows a
// shard's carry held to their close, whose results are kept many keys to
// an item, in result pages (pages.go). A batch adds its
// contribution to an item with ONE conditional UpdateItem — ADD count, append
// the batch's partial aggregate to the item's list of parts — fenced by the
// shard's sequence numbers: the item remembers, per shard, the highest
// sequence number it has applied (f_<shardId>, zero-padded so DynamoDB's
// string comparison is numeric comparison), and the write applies only if
// every record it carries is above that fence. No read happens on the normal
// path. When the condition fails (a retried, bisected, resized or concurrent
// duplicate batch), DynamoDB returns the item as it was
// (ReturnValuesOnConditionCheckFailure ALL_OLD), and the store re-sends only
// the records above the fence, conditioned on the fence it saw. Records of
// one key on one shard arrive in order, so "applied" is always a prefix of the
// shard's records for that item, and a fence is enough to know which.
//
// With a per-interval partial (Lambda's tumbling-window state as the
// accumulator) the same write carries a whole interval's partial and its
// sequence range; it is either entirely applied or entirely new.
//
// An item's parts are merged when read, and compacted into one when the list
// grows (the write returns the list, so compaction needs no read). Finalize
// merges the parts and marks the window final (revision 1); a late record
// under the correct policy applies to a final window and bumps its revision.
//
// A final window's result (the final value, or a correction) is stored with
// the state change that made it, so it reaches the output stream at least
// once even when its emission fails: the window stays listed (openIn)
// until its publisher, having put the result on the stream, marks that
// revision published (UnlistRevision, one conditional
// write; the one that does it logs the result). A correction is one
// conditional write that merges the parts, keeps the value it retracts
// (previous) and lists the window, so its output — id, value, previous
// value — is computed from the item alone, the same for the batch that made
// it, a redelivery of that batch (which finds it applied and is handed it
// back, Result.Publish) and the ticker (Finalize finds it listed). A
// correction that meets the window's result unpublished is refused
// (ErrUnpublished, with that result) until it is published: one revision at
// a time, so none is skipped on the stream. A pending correction holds at
// most two merged states, within the item budget.
//
// A finalize finds the tumbling and hopping windows a watermark makes final
// in window listings (listing.go): one item per (shard, window) naming the
// keys that have it, written after their window writes and deleted once
// every window it names is published. Keyed states (session and sliding
// windows, keyed operators) are found through the sparse open-windows
// index on openIn and openUntil, which window items no longer enter (they
// set openIn alone): an index entry costs two write units per key and
// window, a listing one write of a few KB per window.
//
// A shard's carry (carry.go) is eight more items per (pipeline, shard): what
// the per-interval flush of a pipeline whose keys stay on one shard keeps
// of the windows it has not closed, so that each is written once, when it
// closes. Its contents are package aggregate's; here it is bytes written
// whole on the version read (ErrCarryChanged when another write came
// first), at most MaxCarryBytes. Such a window's closing write is fresh
// (Update.Fresh): conditioned on no item, it creates the window final and
// unlisted, marked published, and a write that finds an item written
// before (a spill) writes to it as any closing write does.
//
// A page (ApplyFresh) holds the fresh results of the keys of one bucket
// (PageBucket) that one shard's flush closes in one window: one write for
// what was an item each. A key's entry is its window's revision 1,
// published. Whatever changes the window after is the key's own item: a
// write marked Update.Paged that finds none makes it from the entry
// first. Query and PublishedRevision read a window's item where there is
// one and its page entry otherwise.
package state
