package dedupe

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
)

// A range's index, updated by each commit's claims added and let go
// (installOver), is the index made again from the ledger's claims
// (index): over random commits of many keys, with copies, claims past the
// horizon claimed again, segments sealed, merged, past the segment limit
// and expired by the clock.
func TestARangesIndexUpdatedIsTheIndexMadeAgain(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			db := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
			wall := time.Unix(1_800_000_000, 0)
			l := NewLedger(db, "views", rangeTestKey("dedupe#t#"), WithRanges(), WithHorizon(time.Minute), WithTTLAttribute("ttl"),
				WithClock(func() time.Time { return wall }), WithHeadEntries(3), WithSegmentEntries(6), WithMaxSegments(3), WithSegmentLimit(4))
			arrival := uint32(wall.Unix())
			seq := 0
			for range 60 {
				var cands []Candidate
				for range 1 + rng.IntN(8) {
					seq++
					key := fmt.Sprintf("k%d", rng.IntN(12))
					id := fmt.Sprint(rng.IntN(40))
					cands = append(cands, Candidate{Key: key, Entry: Entry{ID: IdentityOf(key, id),
						Content: ContentOf("t", time.Time{}, []byte(fmt.Sprint(rng.IntN(2)))),
						Claim:   ClaimOf("shardId-000000000000", fmt.Sprint(seq)), Arrival: arrival}})
				}
				judgeAndCommit(t, l, cands)
				l.mu.Lock()
				for key, kl := range l.cache {
					again := &keyLedger{live: kl.live, segs: kl.segs, head: kl.head}
					again.index()
					if !maps.Equal(kl.byID, again.byID) || !sameEarlier(kl.earlier, again.earlier) {
						l.mu.Unlock()
						t.Fatalf("after commit at seq %d, %s: the index updated differs from the index made again", seq, KeyName(key))
					}
				}
				l.mu.Unlock()
				arrival += uint32(rng.IntN(20))
				wall = wall.Add(time.Duration(rng.IntN(400)) * time.Second)
			}
		})
	}
}

// judgeAndCommit runs one per-batch session of cands on l.
func judgeAndCommit(t *testing.T, l *Ledger, cands []Candidate) {
	t.Helper()
	s := l.Begin("", nil)
	if err := s.Judge(context.Background(), cands); err != nil {
		t.Fatal(err)
	}
	if failed := s.Commit(context.Background(), 4); len(failed) > 0 {
		t.Fatal(failed[0])
	}
}

// rangeTestKey places a ledger's items under pk prefix and the range's
// name, as state.RangeLedgerKey does.
func rangeTestKey(prefix string) ItemKey {
	return func(key string, seg int64) map[string]types.AttributeValue {
		sk := "head"
		if seg != Head {
			sk = fmt.Sprintf("seg#%012d", seg)
		}
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: prefix + RangeName(key)}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
}

// sameEarlier compares shadowed claims as sets per identity.
func sameEarlier(a, b map[Identity][]Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for id, es := range a {
		x, y := slices.Clone(es), slices.Clone(b[id])
		less := func(p, q Entry) int { return int(p.Arrival) - int(q.Arrival) + 1000*(int(p.Claim[0])-int(q.Claim[0])) }
		slices.SortFunc(x, less)
		slices.SortFunc(y, less)
		if !slices.Equal(x, y) {
			return false
		}
	}
	return true
}
