package enrich

import (
	"encoding/json"
	"slices"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// change is one applied changelog record as the join keeps it.
type change struct {
	// seq is the record's Kinesis sequence number, fenced (state.Fence) so
	// that strings compare as the numbers.
	seq string
	// version is the profile version, decimal without leading zeros.
	version string
	// image is the profile as compact JSON; nil for a tombstone.
	image json.RawMessage
}

// newer reports whether version a is higher than version b.
func newer(a, b string) bool { return stream.CompareSequence(a, b) > 0 }

// history is one key's applied changes, ordered by sequence number.
type history []change

// asOf is the profile as of position seq: the highest-version change before
// it (the earliest of equal versions), and whether there is one.
func (h history) asOf(seq string) (change, bool) {
	var best change
	found := false
	for _, c := range h {
		if c.seq >= seq {
			break
		}
		if !found || newer(c.version, best.version) {
			best, found = c, true
		}
	}
	return best, found
}

// add inserts c in sequence order; it reports false when a change with its
// sequence number is already there.
func (h *history) add(c change) bool {
	i, found := slices.BinarySearchFunc(*h, c.seq, func(e change, s string) int {
		switch {
		case e.seq < s:
			return -1
		case e.seq > s:
			return 1
		}
		return 0
	})
	if found {
		return false
	}
	*h = slices.Insert(*h, i, c)
	return true
}

// prune keeps the changes at or after first and the best one before it, and
// returns the sequence numbers of the changes it dropped.
func (h *history) prune(first string) (dropped []string) {
	best, ok := h.asOf(first)
	kept := (*h)[:0]
	for _, c := range *h {
		if c.seq >= first || (ok && c.seq == best.seq) {
			kept = append(kept, c)
			continue
		}
		dropped = append(dropped, c.seq)
	}
	clear((*h)[len(kept):])
	*h = kept
	return dropped
}

// clone is a copy of h that shares no backing array with it.
func (h history) clone() history { return slices.Clone(h) }
