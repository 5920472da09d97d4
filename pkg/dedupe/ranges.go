package dedupe

import (
	"crypto/md5"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ranges is how many hash ranges a ledger WithRanges keeps: sixteen equal
// ranges of the MD5 of the key, the hash Kinesis places a record by when
// the key is its partition key, so each shard's keys fill ranges of their
// own (a stream of two shards, eight each) and a reshard's children take
// whole ranges or share one at their bound.
const Ranges = 16

// rangePrefix begins a range's ledger key. An event key is printable text
// (stream.Envelope), never a control character, so no key is taken for a
// range, whatever it spells.
const rangePrefix = "\x00range "

// RangeOf is the ledger key of the hash range key falls in: the first four
// bits of its MD5, as Kinesis orders hash keys.
func RangeOf(key string) string {
	sum := md5.Sum([]byte(key))
	return rangeKeys[sum[0]>>4]
}

// rangeKeys are the ledger keys of the ranges, made once.
var rangeKeys = func() [Ranges]string {
	var out [Ranges]string
	for i := range out {
		out[i] = rangePrefix + strconv.FormatInt(int64(i), 16)
	}
	return out
}()

// IsRange reports whether a ledger key is a hash range's.
func IsRange(ledgerKey string) bool { return strings.HasPrefix(ledgerKey, rangePrefix) }

// RangeName is a range's ledger key without its prefix: one hexadecimal
// digit, for the range's items (state.RangeLedgerKey).
func RangeName(ledgerKey string) string { return strings.TrimPrefix(ledgerKey, rangePrefix) }

// KeyName is a ledger key as a message names it: key "…", or hash range
// n of 16.
func KeyName(ledgerKey string) string {
	if IsRange(ledgerKey) {
		return fmt.Sprintf("hash range %s of %d", RangeName(ledgerKey), Ranges)
	}
	return "key " + strconv.Quote(ledgerKey)
}

// KeyOf is the ledger key an event key's claims are kept under: its hash
// range WithRanges, else the key. A range's ledger key is its own.
func (l *Ledger) KeyOf(key string) string {
	if !l.ranges || IsRange(key) {
		return key
	}
	return RangeOf(key)
}

// Regroup returns claims kept per key (an interval's pending claims, carried
// by code from before WithRanges) under the ledger keys KeyOf gives: the
// same map when every key is already one.
func (l *Ledger) Regroup(claims map[string][]Entry) map[string][]Entry {
	if !l.ranges {
		return claims
	}
	same := true
	for k := range claims {
		if !IsRange(k) {
			same = false
			break
		}
	}
	if same {
		return claims
	}
	out := make(map[string][]Entry, len(claims))
	for k, es := range claims {
		lk := l.KeyOf(k)
		out[lk] = append(out[lk], es...)
	}
	return out
}

// young reports whether a record that arrived at arrival may have been
// claimed in the predecessor (WithPredecessor) rather than in kl, its
// ledger: kl has no head yet, or it began (firstVersion: its first
// commit's newest arrival, and for a range not before the wall clock then)
// less than the horizon and an hour before, or the pipeline's layout
// changed less than that before (the layout marker, layout.go).
func (l *Ledger) young(kl *keyLedger, arrival uint32) bool {
	if l.prev == nil {
		return false
	}
	if kl == nil || kl.version == 0 || l.switchedBefore(arrival) {
		return true
	}
	start := uint64(kl.version >> 20)
	return uint64(arrival) < start+uint64((l.horizon+ttlSlack)/time.Second)
}
