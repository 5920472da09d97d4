package dedupe_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/state"
)

// liveSegmentsOf counts the segments key's head names, from its item:
// next − first when contiguous ("sf", "sn"), else the pairs of its list
// ("sl": a varint and a uvarint each).
func liveSegmentsOf(t *testing.T, mem *memdb.DB, ik dedupe.ItemKey, key string) int {
	t.Helper()
	head := mem.Item("views", ik(key, dedupe.Head))
	if b, ok := head["sl"].(*types.AttributeValueMemberB); ok {
		n, v := 0, b.Value
		for len(v) > 0 {
			_, k := binary.Varint(v)
			v = v[k:]
			_, k = binary.Uvarint(v)
			v = v[k:]
			n++
		}
		return n
	}
	num := func(a string) int {
		x, _ := strconv.Atoi(head[a].(*types.AttributeValueMemberN).Value)
		return x
	}
	return num("sn") - num("sf")
}

// hotCommits judges commits of key, each bringing sizes[i%len(sizes)] new
// claims, one a second, and returns how many claims were made.
func hotCommits(t *testing.T, l *dedupe.Ledger, key string, commits int, sizes ...int) int {
	t.Helper()
	n := 0
	for i := 0; i < commits; i++ {
		var cs []dedupe.Candidate
		for range sizes[i%len(sizes)] {
			cs = append(cs, cand(key, fmt.Sprint("e", n), n+1, i, 1))
			n++
		}
		for j, v := range judge(t, l, cs...) {
			if v != dedupe.New {
				t.Fatalf("commit %d: claim %d: %v, want new", i, j, v)
			}
		}
	}
	return n
}

// TestAHotKeysSegmentsOfStraddlingSizesStillMerge: a hot key (every commit
// brings more new claims than a head holds, so each seals one segment of
// them) whose commits alternate between 30 and 50 new claims, either side
// of a tier's bound (48: 2·len/sealUnit). A merge of runs of one tier
// alone never merges two such neighbours: the head would name a segment
// per commit, past WithMaxSegments (128), until WithSegmentLimit let
// claims within the horizon go (DroppedEarly) and their copies count again,
// with a few thousand claims live that two merged segments of 8,000 hold.
// Random commit sizes of 25 to 60 claims too.
func TestAHotKeysSegmentsOfStraddlingSizesStillMerge(t *testing.T) {
	const commits = 400
	ik := state.LedgerKey("pageviews")
	clock := dedupe.WithClock(func() time.Time { return time.Unix(int64(base), 0) })

	t.Run("default options: live segments bounded", func(t *testing.T) {
		mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
		l := dedupe.NewLedger(mem, "views", ik, dedupe.WithHorizon(24*time.Hour), clock)
		n := hotCommits(t, l, "hot", commits, 30, 50)
		if live := liveSegmentsOf(t, mem, ik, "hot"); live > 128 {
			t.Errorf("after %d commits (%d claims) the head names %d live segments, want at most WithMaxSegments' 128 (stats %+v)", commits, n, live, l.Stats())
		}
	})

	t.Run("claims within the horizon kept", func(t *testing.T) {
		// WithSegmentLimit 256, twice WithMaxSegments, keeps the test
		// short: the default 4,096 is reached the same way, after 4,096
		// commits (68 minutes at a commit a second, within a 24 h horizon).
		mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
		opts := []dedupe.Option{dedupe.WithHorizon(24 * time.Hour), dedupe.WithSegmentLimit(256), clock}
		l := dedupe.NewLedger(mem, "views", ik, opts...)
		n := hotCommits(t, l, "hot", commits, 30, 50)
		if st := l.Stats(); st.DroppedEarly > 0 {
			t.Errorf("%d claims within the 24 h horizon let go early, of %d claims in all (which fit %d merged segments of 8,000)", st.DroppedEarly, n, (n+7999)/8000)
		}
		// The key's first event, 400 s ago, is within the horizon.
		for i, l := range []*dedupe.Ledger{l, dedupe.NewLedger(mem, "views", ik, opts...)} {
			if got := judge(t, l, cand("hot", "e0", 10_000_000+i, commits+i, 1)); got[0] != dedupe.Duplicate {
				t.Errorf("%s process: a copy of the key's first event, within the horizon: %v, want duplicate", []string{"warm", "cold"}[i], got[0])
			}
		}
	})

	t.Run("random hot commits of 25 to 60 claims", func(t *testing.T) {
		mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
		l := dedupe.NewLedger(mem, "views", ik, dedupe.WithHorizon(24*time.Hour), clock)
		rng := rand.New(rand.NewPCG(1, 2))
		sizes := make([]int, 1000)
		for i := range sizes {
			sizes[i] = 25 + rng.IntN(36)
		}
		n := hotCommits(t, l, "hot", len(sizes), sizes...)
		if live := liveSegmentsOf(t, mem, ik, "hot"); live > 128 {
			t.Errorf("after %d commits (%d claims) the head names %d live segments, want at most WithMaxSegments' 128 (stats %+v)", len(sizes), n, live, l.Stats())
		}
	})
}
