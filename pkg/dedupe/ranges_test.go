package dedupe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/dedupe"
)

// rangeItemKey places range ledgers apart from the keys' own (itemKey), as
// state.RangeLedgerKey does in the views table.
func rangeItemKey(key string, seg int64) map[string]types.AttributeValue {
	return itemKey("~range#"+dedupe.RangeName(key), seg)
}

// A ledger of hash ranges judges as a ledger a key does, and writes a head
// per range with new claims, not per key: 200 keys' claims take at most 16
// heads and a segment each.
func TestRangesJudgeAsKeysDoAndWriteARangeOnce(t *testing.T) {
	table := newTable(t)
	l := dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges())
	const keys = 200
	var first []dedupe.Candidate
	for k := range keys {
		first = append(first, cand(fmt.Sprintf("user-%d", k), "a", k+1, 0, 1))
	}
	before := l.Stats()
	for i, v := range judge(t, l, first...) {
		if v != dedupe.New {
			t.Fatalf("first claim of %s: %v, want new", first[i].Key, v)
		}
	}
	if w := l.Stats().Writes - before.Writes; w > 2*dedupe.Ranges {
		t.Errorf("200 keys' claims took %d writes, want at most a head and a segment for each of %d ranges", w, dedupe.Ranges)
	}
	// A cold process: every copy is a duplicate, other content a
	// conflict, a redelivery redelivered, another id new, and the same id
	// under a key never seen (in a range with claims of other keys) new.
	l2 := dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges())
	var again []dedupe.Candidate
	var want []dedupe.Verdict
	for k := range keys {
		key := fmt.Sprintf("user-%d", k)
		switch k % 4 {
		case 0:
			again, want = append(again, cand(key, "a", 1000+k, 5, 1)), append(want, dedupe.Duplicate)
		case 1:
			again, want = append(again, cand(key, "a", 1000+k, 5, 2)), append(want, dedupe.Conflict)
		case 2:
			again, want = append(again, cand(key, "a", k+1, 0, 1)), append(want, dedupe.Redelivered)
		case 3:
			again, want = append(again, cand(key, "b", 1000+k, 5, 1)), append(want, dedupe.New)
		}
	}
	again, want = append(again, cand("never-seen", "a", 5000, 5, 1)), append(want, dedupe.New)
	if got := judge(t, l2, again...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second batch:\n got %v\nwant %v", got, want)
	}
}

// RangeOf follows Kinesis' hash ranges: the first four bits of the key's
// MD5. Of a stream's two shards, the first holds the keys of ranges 0 to
// 7 (hash keys below 2^127), so a shard writes eight ranges, not sixteen.
func TestRangeOfIsTheTopOfTheKeysMD5(t *testing.T) {
	for key, want := range map[string]string{
		"user-1": "d", // md5 d6d7…
		"a":      "0", // md5 0cc1…
		"k00":    "e", // md5 e3b5…
	} {
		if got := dedupe.RangeName(dedupe.RangeOf(key)); got != want {
			t.Errorf("RangeOf(%q) = %s, want %s", key, got, want)
		}
	}
	if got := dedupe.KeyName(dedupe.RangeOf("a")); got != "hash range 0 of 16" {
		t.Errorf("KeyName = %q", got)
	}
	if got := dedupe.KeyName("a"); got != `key "a"` {
		t.Errorf("KeyName = %q", got)
	}
}

// A deploy moves a pipeline from a ledger a key to hash ranges: the claims
// made before it are in the keys' ledgers, which the ranges read while they
// are younger than the horizon and an hour — a copy of an event claimed
// before the deploy is a duplicate, its reuse with other content a
// conflict, its redelivery redelivered — and not after.
func TestRangesHonourTheClaimsOfTheLedgersBefore(t *testing.T) {
	table := newTable(t)
	old := dedupe.NewLedger(db, table, itemKey)
	judge(t, old, cand("k1", "a", 1, 0, 1), cand("k2", "b", 2, 0, 1), cand("k3", "c", 3, 0, 1))

	byKey := dedupe.NewLedger(db, table, itemKey)
	l := dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges(), dedupe.WithPredecessor(byKey))
	got := judge(t, l,
		cand("k1", "a", 10, 60, 1), // a copy of a
		cand("k2", "b", 11, 60, 2), // b's id with other content
		cand("k3", "c", 3, 0, 1),   // record 3 again
		cand("k4", "d", 12, 60, 1), // a new event
	)
	if want := verdicts(dedupe.Duplicate, dedupe.Conflict, dedupe.Redelivered, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("after the deploy: %v, want %v", got, want)
	}
	// Two hours on (the horizon and an hour), a range no longer reads the
	// keys' ledgers, whose claims are past the horizon anyway.
	reads := byKey.Stats().Reads
	later := int(2*time.Hour/time.Second) + 60
	got = judge(t, l, cand("k1", "a", 20, later, 1), cand("k1", "z", 21, later, 1))
	if want := verdicts(dedupe.New, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("two hours on: %v, want %v", got, want)
	}
	if r := byKey.Stats().Reads - reads; r != 0 {
		t.Errorf("the keys' ledgers were read %d more times two hours after the ranges began", r)
	}
}

// The ledgers before judge only the claims they hold: two records of a
// batch sharing an id are the range's to judge. Record 2 (other content
// than record 1, same id) was applied by a delivery of its own; the batch
// of both, delivered again, finds record 2's claim in the range: record 1
// is the conflict, record 2 redelivered — not the other way round, as
// judging the batch against the ledgers before (which hold neither) would
// make it.
func TestClaimsWithinTheBatchAreTheRangesToJudge(t *testing.T) {
	table := newTable(t)
	l := dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges(), dedupe.WithPredecessor(dedupe.NewLedger(db, table, itemKey)))
	if got := judge(t, l, cand("k1", "a", 2, 1, 2)); fmt.Sprint(got) != verdicts(dedupe.New) {
		t.Fatalf("record 2 alone: %v", got)
	}
	got := judge(t, l, cand("k1", "a", 1, 0, 1), cand("k1", "a", 2, 1, 2))
	if want := verdicts(dedupe.Conflict, dedupe.Redelivered); fmt.Sprint(got) != want {
		t.Fatalf("the batch again: %v, want %v", got, want)
	}
}

// Claims an interval carried per key (code from before the ranges, in
// Lambda's window state through a deploy) are settled under their
// ranges: the flush writes them there, and a later copy is a duplicate.
func TestCarriedClaimsOfKeysAreTakenUnderTheirRanges(t *testing.T) {
	table := newTable(t)
	l := dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges())
	carried := map[string][]dedupe.Entry{"k1": {cand("k1", "a", 1, 0, 1).Entry}, "k2": {cand("k2", "b", 2, 0, 1).Entry}}
	s := l.Begin("shardId-000000000000/x", carried)
	if err := s.Judge(context.Background(), []dedupe.Candidate{cand("k3", "c", 3, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	if failed := s.Commit(context.Background(), 4); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	for key := range s.Pending() {
		t.Errorf("pending after the commit under %s", dedupe.KeyName(key))
	}
	got := judge(t, dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges()),
		cand("k1", "a", 10, 5, 1), cand("k2", "b", 11, 5, 1), cand("k3", "c", 12, 5, 1))
	if want := verdicts(dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate); fmt.Sprint(got) != want {
		t.Fatalf("copies after the flush: %v, want %v", got, want)
	}
}

// sameRange returns two keys of one hash range.
func sameRange(t *testing.T) (string, string) {
	t.Helper()
	first := map[string]string{}
	for i := range 1000 {
		k := fmt.Sprintf("key-%d", i)
		if o, ok := first[dedupe.RangeOf(k)]; ok {
			return o, k
		}
		first[dedupe.RangeOf(k)] = k
	}
	t.Fatal("no two keys in one range")
	return "", ""
}

// Two shards share a range (a stream of three shards, say) and one is
// hours behind the other: the shard ahead commits claims that arrived two
// hours after those of the shard behind, which must still find its own
// claims. Counted back from the range's newest arrival, the horizon let
// them go, and a copy the shard behind read next counted again.
func TestAShardBehindKeepsItsClaimsInARangeItShares(t *testing.T) {
	behind, ahead := sameRange(t)
	wall := func() time.Time { return time.Unix(int64(base), 0).Add(3 * time.Hour) }
	hours := int(2 * time.Hour / time.Second)
	for _, ttl := range []string{"", "expiresAt"} {
		t.Run("ttl="+ttl, func(t *testing.T) {
			table := newTable(t)
			opts := []dedupe.Option{dedupe.WithRanges(), dedupe.WithClock(wall), dedupe.WithTTLAttribute(ttl), dedupe.WithHeadEntries(1)}
			l := dedupe.NewLedger(db, table, rangeItemKey, opts...)
			if got := judge(t, l, cand(behind, "x", 1, 0, 1), cand(behind, "w", 5, 0, 1)); fmt.Sprint(got) != verdicts(dedupe.New, dedupe.New) {
				t.Fatalf("the shard behind's events: %v", got)
			}
			if got := judge(t, l, cand(ahead, "y", 2, hours, 1), cand(ahead, "z", 3, hours, 1)); fmt.Sprint(got) != verdicts(dedupe.New, dedupe.New) {
				t.Fatalf("the shard ahead's events: %v", got)
			}
			if got := judge(t, dedupe.NewLedger(db, table, rangeItemKey, opts...), cand(behind, "x", 4, 10, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
				t.Errorf("a cold process: the shard behind's copy, 10 s after its event: %v, want duplicate", got)
			}
			if got := judge(t, l, cand(behind, "w", 6, 10, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
				t.Errorf("a warm one: the shard behind's copy, 10 s after its event: %v, want duplicate", got)
			}
		})
	}
}

// The range's young window begins when it takes over, not at the arrivals
// of a shard hours behind that writes it first: a copy, on the shard that
// is current, of an event its old code claimed just before the deploy is
// still a duplicate (a review's finding).
func TestARangeBegunByAShardBehindIsYoungFromTheDeploy(t *testing.T) {
	table := newTable(t)
	behind, current := sameRange(t)
	wall := func() time.Time { return time.Unix(int64(base), 0).Add(2 * time.Hour) }
	judge(t, dedupe.NewLedger(db, table, itemKey, dedupe.WithClock(wall)), cand(current, "x", 1, 2*3600, 1)) // the old code, just before the deploy
	newCode := func() *dedupe.Ledger {
		return dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges(), dedupe.WithClock(wall),
			dedupe.WithPredecessor(dedupe.NewLedger(db, table, itemKey, dedupe.WithClock(wall))))
	}
	judge(t, newCode(), cand(behind, "a", 2, 0, 1)) // two hours behind, the range's first commit
	if got := judge(t, newCode(), cand(current, "x", 3, 2*3600+600, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("the copy of x: %v, want duplicate", got)
	}
}

// A pipeline that moves from ranges back to a ledger a key (dedupeLedger
// "key" again) reads the ranges while its keys' ledgers are young: a copy
// of an event claimed in a range just before is a duplicate.
func TestKeysReadTheRangesTheyTakeOverFrom(t *testing.T) {
	table := newTable(t)
	judge(t, dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges()), cand("k1", "a", 1, 0, 1))
	byKey := dedupe.NewLedger(db, table, itemKey, dedupe.WithPredecessor(dedupe.NewLedger(db, table, rangeItemKey, dedupe.WithRanges())))
	if got := judge(t, byKey, cand("k1", "a", 2, 60, 1), cand("k1", "b", 3, 60, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate, dedupe.New) {
		t.Errorf("after the move: %v, want [duplicate new]", got)
	}
}
