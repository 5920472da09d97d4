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
	for _, h := range strings.Split(*modelHorizons, ",") {
		horizon, err := time.ParseDuration(h)
		if err != nil {
			t.Fatal(err)
		}
		now := start
		l := NewLedger(nil, "t", itemKey, WithHorizon(horizon), WithTTLAttribute("expiresAt"), WithClock(func() time.Time { return time.Unix(int64(now), 0) }))
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
		if horizon <= 24*time.Hour && (headMax > 1024 || liveMax > l.maxSegs) {
			t.Errorf("horizon %s: a head of up to %d bytes naming up to %d segments, want at most 1,024 bytes (one write unit) and %d", horizon, headMax, liveMax, l.maxSegs)
		}
		t.Logf("horizon %s: %d commits, %d seals; a seal's segments %.2f write units (merges included); a head rewrite %.2f units, %.0f bytes on average, %d at most; %d live segments at most; a claim sealed is merged %.2f times",
			horizon, commits, seals, float64(segUnits)/float64(seals), float64(headUnits)/float64(commits), float64(headBytes)/float64(commits), headMax, liveMax, float64(merged)/float64(sealed))
	}
}
