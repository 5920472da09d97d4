package dedupe

import (
	"encoding/binary"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

var modelHorizons = flag.String("dedupe.model", "10m", "horizons to model a hot key's ledger at (TestModelAHotKey), comma separated; the package doc's figures are of 1h,24h,168h")

// TestModelAHotKey models what a hot key's ledger costs, for the package
// doc's figures: a key whose claims come one a commit, 24 each 4.4 s, in
// the views table's items (state.LedgerKey's shape, pipeline pageviews, a
// 10-byte key, the TTL), run for two horizons and measured over the
// second: the write units of the segments a seal writes (merges
// included), of a head rewrite (the larger of the item before and after,
// as DynamoDB bills a put), the head's size, and how many times a claim
// is written into a merged segment. Nothing is written: each plan is
// taken as written. make test runs it at a 10m horizon (a second); the
// doc's figures: go test -run TestModelAHotKey ./pkg/dedupe -args
// -dedupe.model=1h,24h,168h (1h takes seconds, 24h a minute, 168h about
// twenty). At every horizon up to 24h the head stays within one write
// unit and names at most maxSegs segments, or the test fails.
func TestModelAHotKey(t *testing.T) {
	for _, h := range strings.Split(*modelHorizons, ",") {
		horizon, err := time.ParseDuration(h)
		if err != nil {
			t.Fatal(err)
		}
		m := modelHotKey(t, horizon)
		if horizon <= 24*time.Hour && (m.headMax > 1024 || m.liveMax > m.maxSegs) {
			t.Errorf("horizon %s: a head of up to %d bytes naming up to %d segments, want at most 1,024 bytes (one write unit) and %d", horizon, m.headMax, m.liveMax, m.maxSegs)
		}
		if m.mergesPerClaim() > maxMergesPerClaim {
			t.Errorf("horizon %s: a claim sealed is merged %.2f times, want at most %d", horizon, m.mergesPerClaim(), maxMergesPerClaim)
		}
		t.Logf("horizon %s: %s", horizon, m)
	}
}

// maxMergesPerClaim bounds how many times a claim is written again into a
// merged segment: about log₄(segMax/sealUnit) with the defaults, more
// where claims past the horizon leave merges short (the package doc's
// figures).
const maxMergesPerClaim = 10

// A key whose claims within the horizon fill more full segments than
// maxSegs can be named in a head of maxSegs: merging cannot bring it
// there. Merging a newly sealed segment into a full neighbour each seal
// (the adjacent pair with the fewest claims, when no run of one tier fits)
// rewrote a full segment at every seal: at 168h with the defaults a claim
// was merged 167 times and a seal wrote 141 units, where 6.6 and 3.7
// before pairs were merged. Here the same at a smaller scale (an hour,
// segments of up to 1,536 claims, 8 live before merging): a pair is merged
// only when its sizes are within a tier of each other, so the live
// segments grow past 8 rather than a full one being written again each
// seal.
func TestAHotKeyPastItsSegmentsIsNotMergedAgainAndAgain(t *testing.T) {
	m := modelHotKey(t, time.Hour, WithSegmentEntries(1536), WithMaxSegments(8))
	t.Logf("%s", m)
	if m.mergesPerClaim() > 7 {
		t.Errorf("a claim sealed is merged %.2f times, want at most 7 (pairs of a size, each doubling: log₂(1,536/24) = 6)", m.mergesPerClaim())
	}
	if m.liveMax <= 8 {
		t.Errorf("at most %d live segments: the claims of an hour (19,636) fill more than 8 of 1,536", m.liveMax)
	}
}

// hotKeyModel is what modelHotKey measured over the second horizon.
type hotKeyModel struct {
	maxSegs                                                                          int
	commits, seals, segUnits, headUnits, sealed, merged, headBytes, headMax, liveMax int
}

func (m hotKeyModel) mergesPerClaim() float64 { return float64(m.merged) / float64(m.sealed) }

func (m hotKeyModel) String() string {
	return fmt.Sprintf("%d commits, %d seals; a seal's segments %.2f write units (merges included); a head rewrite %.2f units, %.0f bytes on average, %d at most; %d live segments at most; a claim sealed is merged %.2f times",
		m.commits, m.seals, float64(m.segUnits)/float64(m.seals), float64(m.headUnits)/float64(m.commits), float64(m.headBytes)/float64(m.commits), m.headMax, m.liveMax, m.mergesPerClaim())
}

// modelHotKey runs a key whose claims come one a commit, 24 each 4.4 s,
// through a ledger of opts for two horizons, and measures the second.
func modelHotKey(t *testing.T, horizon time.Duration, opts ...Option) hotKeyModel {
	t.Helper()
	const pipelineKey, key = "dedupe#pageviews#", "user-00042"
	itemKey := func(key string, seg int64) map[string]types.AttributeValue {
		sk := "head"
		if seg != Head {
			sk = fmt.Sprintf("seg#%012d", seg)
		}
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pipelineKey + key}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	units := func(n int) int { return max(1, (n+1023)/1024) }
	start := uint32(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix())
	now := start
	l := NewLedger(nil, "t", itemKey, append([]Option{WithHorizon(horizon), WithTTLAttribute("expiresAt"), WithClock(func() time.Time { return time.Unix(int64(now), 0) })}, opts...)...)
	var (
		kl       = &keyLedger{}
		prevHead int
		// over the measured horizon
		commits, seals, segUnits, headUnits, sealed, merged, headBytes, headMax, liveMax int
	)
	commitsPerHorizon := int(horizon / (4400 * time.Millisecond / 24))
	for i := 0; i < 2*commitsPerHorizon; i++ {
		now = start + uint32(int64(i)*4400/24/1000)
		var e Entry
		binary.BigEndian.PutUint64(e.ID[:], uint64(i)+1)
		e.Arrival = now
		p := l.plan(key, kl, []Entry{e}, now)
		after := p.after
		after.live = make([]segRef, 0, len(p.segs))
		su, moved := 0, len(kl.head)+1-len(after.head)
		fresh := 0
		for j := range p.segs {
			s := &p.segs[j]
			if s.fresh {
				entries := appendEntries(nil, s.es)
				s.ref.salt = saltOf(entries, 0)
				item := itemKey(key, s.ref.item())
				item[attrEntries] = &types.AttributeValueMemberB{Value: entries}
				l.setTTL(item, maxArrival(s.es))
				su += units(limits.ItemSize(item))
				fresh += len(s.es)
			}
			after.live = append(after.live, s.ref)
			if after.segs == nil {
				after.segs, after.newest = map[int64][]Entry{}, map[int64]uint32{}
			}
			after.segs[s.ref.item()] = s.es
			if n, ok := kl.newest[s.ref.item()]; ok && !s.fresh {
				after.newest[s.ref.item()] = n // as setSeg, without reading every claim again
			} else {
				after.newest[s.ref.item()] = maxArrival(s.es)
			}
		}
		head, err := l.headItem(key, after)
		if err != nil {
			t.Fatal(err)
		}
		size := limits.ItemSize(head)
		if i >= commitsPerHorizon {
			commits++
			headUnits += units(max(prevHead, size))
			headBytes += size
			headMax = max(headMax, size)
			liveMax = max(liveMax, len(after.live))
			if moved > 0 {
				seals++
				sealed += moved
				merged += fresh - moved
				segUnits += su
			}
		}
		prevHead = size
		kl = after
	}
	return hotKeyModel{maxSegs: l.maxSegs, commits: commits, seals: seals, segUnits: segUnits, headUnits: headUnits, sealed: sealed,
		merged: merged, headBytes: headBytes, headMax: headMax, liveMax: liveMax}
}
