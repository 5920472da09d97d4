package dedupe

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/memdb"
)

// A ledger of ranges reads its predecessor for every record of a young
// range (the two hours after a deploy, and a backlog or a replay whose
// arrivals stay behind the range's start). Each key the predecessor has no
// ledger of is cached, empty; each counts as an entry, so WithCacheEntries
// bounds them (a review found 10,000 cached against a bound of 100).
func TestAPredecessorsEmptyLedgersAreBoundedByItsCache(t *testing.T) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	base := uint32(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Unix())
	clock := WithClock(func() time.Time { return time.Unix(int64(base), 0).Add(5 * 24 * time.Hour) }) // a rebuild, days later
	prev := NewLedger(mem, "views", rangeTestKey("dedupe#pv#"), WithCacheEntries(100), clock)
	l := NewLedger(mem, "views", rangeTestKey("dedupe#~range#pv#"), WithRanges(), WithPredecessor(prev), clock)
	const batches, per = 20, 500
	for b := range batches {
		var cs []Candidate
		for i := range per {
			key := fmt.Sprintf("session-%d-%d", b, i)
			cs = append(cs, Candidate{Key: key, Entry: Entry{ID: IdentityOf(key, "e"), Claim: ClaimOf("shardId-000000000000", fmt.Sprint(b*per+i)), Arrival: base + uint32(b)}})
		}
		judgeAndCommit(t, l, cs)
	}
	prev.mu.Lock()
	n := len(prev.cache)
	prev.mu.Unlock()
	t.Logf("predecessor: %d keys cached, %d entries, %d reads", n, prev.entries, prev.Stats().Reads)
	if n > 1000 {
		t.Errorf("the predecessor (WithCacheEntries(100)) caches %d keys, one per distinct key seen", n)
	}
}
