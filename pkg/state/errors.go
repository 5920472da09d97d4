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
