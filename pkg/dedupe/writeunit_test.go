package dedupe_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/state"
)

// sizeRecorder is a Store that notes the size of every item put, by what it
// is (its sort key up to the '#': "head" or "seg").
type sizeRecorder struct {
	dedupe.Store
	mu      sync.Mutex
	largest map[string]int
	puts    map[string]int
}

func (r *sizeRecorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	class, _, _ := strings.Cut(in.Item["sk"].(*types.AttributeValueMemberS).Value, "#")
	r.mu.Lock()
	r.largest[class] = max(r.largest[class], limits.ItemSize(in.Item))
	r.puts[class]++
	r.mu.Unlock()
	return r.Store.PutItem(ctx, in, opts...)
}

// TestSealedSegmentsAndHeadsFitOneWriteUnit: a key whose commits bring no
// more new claims than a head holds — 12 an interval is the reference load,
// 100 events a second over 1,000 keys at a two-minute interval — seals
// segments of one write unit (1 KB as DynamoDB sizes an item: attribute
// names and values) and keeps a head of one, in the views table's items
// (state.LedgerKey and its TTL) with a 40-byte key, over hours past a one
// hour horizon, its head naming a few dozen segments at a time. Sealing the
// whole head and the new claims wrote 25 to 48 claims, mostly two write
// units. And every claim within the horizon still holds back its copies, in
// the process that made it and in a cold one.
func TestSealedSegmentsAndHeadsFitOneWriteUnit(t *testing.T) {
	const (
		horizon  = time.Hour
		interval = 120 // seconds between commits
		commits  = 150 // five hours
	)
	key := strings.Repeat("k", 40)
	for _, c := range []struct {
		name      string
		perCommit []int // claims each commit brings, in turn
	}{
		{"12 a commit", []int{12}},
		{"one a commit", []int{1}},
		{"23 a commit", []int{23}},
		{"a full head a commit", []int{24}},
		{"uneven", []int{5, 20, 1, 17, 24, 9, 13}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &sizeRecorder{Store: db, largest: map[string]int{}, puts: map[string]int{}}
			table := newTable(t)
			opts := []dedupe.Option{dedupe.WithHorizon(horizon), dedupe.WithTTLAttribute(state.TTLAttribute),
				dedupe.WithClock(func() time.Time { return time.Unix(int64(base), 0) })}
			itemKey := state.LedgerKey("pageviews")
			l := dedupe.NewLedger(rec, table, itemKey, opts...)
			type claim struct{ id, at int }
			var made []claim
			for i := 0; i < commits; i++ {
				at := i * interval
				var cs []dedupe.Candidate
				for range c.perCommit[i%len(c.perCommit)] {
					cs = append(cs, cand(key, fmt.Sprint("e", len(made)), len(made)+1, at, 1))
					made = append(made, claim{len(made), at})
				}
				for j, v := range judge(t, l, cs...) {
					if v != dedupe.New {
						t.Fatalf("commit %d: claim %d: %v, want new", i, j, v)
					}
				}
				if i%10 != 9 {
					continue
				}
				// Copies of claims made within the horizon (and one just
				// inside it) are held back; they add no claim.
				var copies []dedupe.Candidate
				for _, m := range made {
					if age := at - m.at; age < int(horizon/time.Second) && (m.id%5 == 0 || age > int(horizon/time.Second)-2*interval) {
						copies = append(copies, cand(key, fmt.Sprint("e", m.id), 1_000_000+m.id, at, 1))
					}
				}
				for j, v := range judge(t, l, copies...) {
					if v != dedupe.Duplicate {
						t.Fatalf("commit %d: a copy of %v: %v, want duplicate", i, copies[j].ID, v)
					}
				}
			}
			t.Logf("largest item by kind %v, puts %v", rec.largest, rec.puts)
			if got := rec.puts["seg"]; got == 0 {
				t.Fatalf("%d claims sealed no segment", len(made))
			}
			for class, size := range rec.largest {
				if size > 1024 {
					t.Errorf("a %s item of %d bytes: more than one write unit (%d puts of %s items)", class, size, rec.puts[class], class)
				}
			}
			// A cold process reads every claim of the horizon back.
			at := (commits - 1) * interval
			var copies []dedupe.Candidate
			for _, m := range made {
				if at-m.at < int(horizon/time.Second) {
					copies = append(copies, cand(key, fmt.Sprint("e", m.id), 2_000_000+m.id, at, 1))
				}
			}
			cold := dedupe.NewLedger(db, table, itemKey, opts...)
			for j, v := range judge(t, cold, copies...) {
				if v != dedupe.Duplicate {
					t.Fatalf("cold process: a copy of %v: %v, want duplicate", copies[j].ID, v)
				}
			}
		})
	}
}
