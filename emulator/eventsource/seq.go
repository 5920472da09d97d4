package eventsource

import (
	"math/big"
)

// parseSeq reads a stream sequence number. Sequence numbers are decimal
// integers of varying length (Kinesis: up to 128 bits; the stand-in starts
// at "1"), so they are compared as numbers, never as strings.
func parseSeq(s string) (*big.Int, bool) {
	n, ok := new(big.Int).SetString(s, 10)
	return n, ok && n.Sign() >= 0
}

// compareSeq compares two sequence numbers numerically; malformed ones sort
// first, by their text.
func compareSeq(a, b string) int {
	x, okx := parseSeq(a)
	y, oky := parseSeq(b)
	switch {
	case okx && oky:
		return x.Cmp(y)
	case okx:
		return 1
	case oky:
		return -1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
