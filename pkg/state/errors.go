package state

import (
	"errors"
	"fmt"
)

// ErrPartialOverlap means a per-interval partial overlaps what an item has
// already applied from its shard: part of it was applied before, so it can
// be neither skipped nor applied. Lambda does not produce it; it is reported
// rather than double counted.
var ErrPartialOverlap = errors.New("state: per-interval partial overlaps the applied records")

// ErrUnpublished means a correction met a final window whose current
// result is not yet known to be on the output stream (Result.Publish): it
// is published first (and the window unlisted), then the correction is
// applied again, so each revision reaches the stream before the next
// replaces it.
var ErrUnpublished = errors.New("state: the window's current result is not published yet")

// ErrConflict means the item kept changing under a write beyond the retry budget.
var ErrConflict = errors.New("state: item kept changing; gave up")

// WriteError names the item a failed write was for.
type WriteError struct {
	Pipeline, Key, Window string
	Err                   error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("state: writing %s/%s window %s: %v", e.Pipeline, e.Key, e.Window, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }
