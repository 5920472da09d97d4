// Package backlog tells the tickers whether a shard has records its
// function has not processed yet: the first record after the last one the
// function committed, and when it arrived on the stream.
//
// A ticker advances an idle shard's watermark by processing time, on the
// assumption that a record still to come did not happen more than the
// pipeline's idleTimeout before it reached the stream. A shard is idle when
// its stream has nothing more for it, not when its function stopped moving:
// a function failing, throttled or redeploying for longer than idleTimeout
// leaves records on the stream whose windows an advance by the clock alone
// would close before they are applied, making them late (dropped, or
// corrections of results that were right). With the backlog known, the
// advance stops where the first unprocessed record's arrival puts it: on
// the shard itself, or, for a shard a reshard closed and that was read to
// its end, on the children that took its keys (Lambda reads them only
// after it, so a consumer behind at the reshard still has their records
// to process when the parent looks idle). Such a closed shard also goes no
// further than its children's stored watermarks and holds (Known): it is idle for
// good, its keys' event time goes on in them, and a child whose records
// reach the stream later than idleTimeout after they happen is still
// receiving on-time records of windows the parent's clock would close.
package backlog
