package dedupe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/dedupe"
)

// A pipeline's layout changes (a deploy, or its rollback) are found by the
// layout marker, not by each ledger's age: a key whose ledger began hours
// before a range layout came and went still reads the ranges after the
// change back, and so does a range that predates a key layout, so a copy of
// an event claimed just before the change is a duplicate. Two hours on (the
// horizon and an hour) nothing reads the layout before, and a deploy that
// keeps the layout does not make the ledgers young again.
func TestALayoutChangeEitherWayReadsTheLayoutBefore(t *testing.T) {
	const hour = 3600
	marker := dedupe.WithLayoutMarker(itemKey("~layout", dedupe.Head))
	for _, tc := range []struct {
		name  string
		first bool // the layout the pipeline begins in and returns to: ranges?
	}{{"key, range, key again", false}, {"range, key, range again", true}} {
		t.Run(tc.name, func(t *testing.T) {
			table := newTable(t)
			// deploy is the code of one layout, its wall clock at base+at.
			deploy := func(ranges bool, at int) (l, prev *dedupe.Ledger) {
				wall := dedupe.WithClock(func() time.Time { return time.Unix(int64(base)+int64(at), 0) })
				byKey := func(o ...dedupe.Option) *dedupe.Ledger {
					return dedupe.NewLedger(db, table, itemKey, append(o, wall, dedupe.WithHorizon(time.Hour))...)
				}
				byRange := func(o ...dedupe.Option) *dedupe.Ledger {
					return dedupe.NewLedger(db, table, rangeItemKey, append(o, wall, dedupe.WithHorizon(time.Hour), dedupe.WithRanges())...)
				}
				if ranges {
					prev = byKey()
					return byRange(marker, dedupe.WithPredecessor(prev)), prev
				}
				prev = byRange()
				return byKey(marker, dedupe.WithPredecessor(prev)), prev
			}
			// The first layout's ledger of k1 begins at 0; three hours on the
			// other layout claims b; ten minutes later the first is back.
			l, _ := deploy(tc.first, 0)
			judge(t, l, cand("k1", "a", 1, 0, 1))
			l, _ = deploy(tc.first, 2*hour)
			judge(t, l, cand("k1", "c", 2, 2*hour, 1)) // a redeploy of the same layout, its ledger old
			l, _ = deploy(!tc.first, 3*hour)
			judge(t, l, cand("k1", "b", 3, 3*hour, 1))
			back, prev := deploy(tc.first, 3*hour+600)
			if got := judge(t, back, cand("k1", "b", 4, 3*hour+600, 1), cand("k1", "d", 5, 3*hour+600, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate, dedupe.New) {
				t.Errorf("back in the first layout, a copy of b and a new d: %v, want [duplicate new]", got)
			}
			reads := prev.Stats().Reads
			later := 3*hour + 600 + 2*hour + 60
			if got := judge(t, back, cand("k1", "e", 6, later, 1)); fmt.Sprint(got) != verdicts(dedupe.New) {
				t.Errorf("two hours on: %v, want [new]", got)
			}
			if r := prev.Stats().Reads - reads; r != 0 {
				t.Errorf("two hours after the change the layout before was read %d more times", r)
			}
			// A process of the same layout, started later, is not young again.
			again, prev := deploy(tc.first, later)
			judge(t, again, cand("k1", "f", 7, later+60, 1))
			if r := prev.Stats().Reads; r != 0 {
				t.Errorf("a redeploy of the same layout read the layout before %d times", r)
			}
		})
	}
}

// clockAt is a wall clock a test moves: base+*at seconds.
func clockAt(at *int) dedupe.Option {
	return dedupe.WithClock(func() time.Time { return time.Unix(int64(base)+int64(*at), 0) })
}

// process is one instance's ledger of a layout (ranges or not) with the
// marker, as aggregate.NewLedger makes it, on the wall clock at; prev is
// its ledger of the other layout.
func process(table string, ranges bool, at *int) (l, prev *dedupe.Ledger) {
	opts := []dedupe.Option{clockAt(at), dedupe.WithHorizon(time.Hour)}
	byKey := func(o ...dedupe.Option) *dedupe.Ledger {
		return dedupe.NewLedger(db, table, itemKey, append(o, opts...)...)
	}
	byRange := func(o ...dedupe.Option) *dedupe.Ledger {
		return dedupe.NewLedger(db, table, rangeItemKey, append(o, append(opts, dedupe.WithRanges())...)...)
	}
	marker := dedupe.WithLayoutMarker(itemKey("~layout", dedupe.Head))
	if ranges {
		prev = byKey()
		return byRange(marker, dedupe.WithPredecessor(prev)), prev
	}
	prev = byRange()
	return byKey(marker, dedupe.WithPredecessor(prev)), prev
}

// A deploy overlaps: for a short while a shard's next batch may run in a
// warm instance of the code before it, which read the marker before the
// change, and an instance of the new layout may have cached the old
// layout's ledger before the old one claimed more there. The old instance
// reads the marker again after a minute, so it reads the new layout's
// claims; the new instance reads the old layout's heads again at each
// judge for a few minutes after the change. Both copies are duplicates
// (a review's findings: each counted twice before).
func TestADeploysOverlapSeesBothLayoutsClaims(t *testing.T) {
	const hour = 3600
	table := newTable(t)
	oldAt, newAt := 0, 0
	old, _ := process(table, true, &oldAt)
	judge(t, old, cand("k1", "a", 1, 0, 1)) // the ranges' marker, at 0
	oldAt = 6*hour - 20
	judge(t, old, cand("k1", "x", 2, 6*hour-20, 1)) // warm; it reads the marker again (ranges)
	newAt = 6 * hour
	nu, _ := process(table, false, &newAt)
	judge(t, nu, cand("k1", "b", 3, 6*hour, 1)) // keys take over at 6h, having read k1's range
	oldAt = 6*hour + 10
	judge(t, old, cand("k1", "c", 4, 6*hour+10, 1)) // the old instance, its marker read 30 s ago, claims c in the range
	newAt = 6*hour + 20
	if got := judge(t, nu, cand("k1", "c", 5, 6*hour+20, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("the new instance, a copy of c the old one claimed after it read the range: %v, want [duplicate]", got)
	}
	oldAt = 6*hour + 50 // over a minute on: the old instance reads the marker again
	if got := judge(t, old, cand("k1", "b", 6, 6*hour+50, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("the old instance, a copy of b the new layout claimed: %v, want [duplicate]", got)
	}
}

// A marker whose since is far ahead of the wall clock (a writer's clock
// ahead, a hand edit) would keep every ledger young for ever: it is taken
// for unreadable and replaced by the first process that reads it, and two
// hours on nothing reads the other layout.
func TestAMarkerFromTheFutureIsReplaced(t *testing.T) {
	const hour = 3600
	table := newTable(t)
	item := itemKey("~layout", dedupe.Head)
	item["layout"] = &types.AttributeValueMemberS{Value: "key"}
	item["since"] = &types.AttributeValueMemberN{Value: fmt.Sprint(base + 365*24*hour)}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	at := 0
	l, _ := process(table, false, &at)
	judge(t, l, cand("k1", "a", 1, 0, 1))
	at = 3 * hour
	later, prev := process(table, false, &at)
	judge(t, later, cand("k1", "b", 2, 3*hour, 1))
	if r := prev.Stats().Reads; r != 0 {
		t.Errorf("three hours after a marker dated a year ahead was met, a process read the other layout %d times", r)
	}
}

// judgeOnly judges cs in session s (an invocation of an interval that
// carries its claims on) and returns the verdicts so far.
func judgeOnly(t *testing.T, s *dedupe.Session, cs ...dedupe.Candidate) []dedupe.Verdict {
	t.Helper()
	if err := s.Judge(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	return s.Verdicts()
}

// carriedFrom is what an interval's window state carries of s's claims to
// the interval's next invocation.
func carriedFrom(t *testing.T, s *dedupe.Session) map[string][]dedupe.Entry {
	t.Helper()
	carried, err := dedupe.DecodePending(dedupe.EncodePending(s.Pending()))
	if err != nil {
		t.Fatal(err)
	}
	return carried
}

// An interval the ranges began and the keys finish (a deploy from "range"
// to "key" between two of its invocations) carries the range's claims on:
// a copy later in that interval is judged on them, and once the flush has
// written them to the range, an instance that read the range before — in
// the five minutes after the change, or after them — reads it again for
// its next interval (each counted twice before: a review's findings).
func TestClaimsCarriedThroughAChangeToKeysJudgeTheCopiesAfterIt(t *testing.T) {
	table := newTable(t)
	at := 0
	r, _ := process(table, true, &at)
	judge(t, r, cand("k0", "z", 1, 0, 1))
	const tag = "shardId-000000000000/n1"
	at = 100
	first := r.Begin(tag, nil)
	judgeOnly(t, first, cand("k1", "a", 2, 100, 1))
	carried := carriedFrom(t, first)

	at1, at2 := 200, 200
	k1, _ := process(table, false, &at1) // the keys take over at 200
	k2, _ := process(table, false, &at2)
	next := k1.Begin(tag, carried)
	if got := judgeOnly(t, next, cand("k1", "a", 3, 200, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("a copy of a in the interval the change cut: %v, want [duplicate]", got)
	}
	at2 = 200 + 6*60
	judge(t, k2, cand("k1", "b", 4, at2, 1)) // another instance reads k1's range, settled
	at1 = 200 + 10*60
	flush := k1.Begin(tag, carriedFrom(t, next))
	judgeOnly(t, flush)
	if failed := flush.Commit(context.Background(), 2); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	at2 = at1 + 20
	if got := judgeOnly(t, k2.Begin("shardId-000000000000/n2", nil), cand("k1", "a", 5, at2, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("the other instance's next interval, a copy of a the flush wrote to the range: %v, want [duplicate]", got)
	}
}

// An instance of the code before a deploy that read the marker just
// before it reads it again at its next batch: a copy of an event the new
// layout claimed a second before is a duplicate there too.
func TestAnOldInstanceReadsTheMarkerAtEachBatch(t *testing.T) {
	const hour = 3600
	table := newTable(t)
	oldAt, newAt := 0, 0
	old, _ := process(table, true, &oldAt)
	judge(t, old, cand("k1", "a", 1, 0, 1))
	oldAt = 6*hour - 5
	judge(t, old, cand("k1", "x", 2, oldAt, 1))
	newAt = 6 * hour
	nu, _ := process(table, false, &newAt)
	judge(t, nu, cand("k1", "b", 3, newAt, 1))
	oldAt = 6*hour + 2
	if got := judge(t, old, cand("k1", "b", 4, oldAt, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("the old instance, two seconds after the change, a copy of b: %v, want [duplicate]", got)
	}
}
