package dedupe_test

import (
	"fmt"
	"testing"
	"time"

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
