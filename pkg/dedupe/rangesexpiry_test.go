package dedupe_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/state"
)

// sweep deletes every item of table "views" whose TTL (expiresAt) is
// before now, as DynamoDB's TTL sweeper may at any time after it, except
// those keep says to keep (the sweeper's order is not the items').
func sweep(t *testing.T, mem *memdb.DB, now time.Time, keep func(map[string]types.AttributeValue) bool) int {
	t.Helper()
	n := 0
	for _, it := range mem.Items("views") {
		v, ok := it[state.TTLAttribute].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		exp, _ := strconv.ParseInt(v.Value, 10, 64)
		if exp >= now.Unix() || keep(it) {
			continue
		}
		if _, err := mem.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String("views"),
			Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// namedItems is the item number of every segment a head names.
func namedItems(t *testing.T, head map[string]types.AttributeValue) []int64 {
	t.Helper()
	if head == nil {
		t.Fatal("no head")
	}
	item := func(n int64, salt uint64) int64 {
		if salt == 0 {
			return n
		}
		return n<<20 | int64(salt)
	}
	var out []int64
	if b, ok := head["sl"].(*types.AttributeValueMemberB); ok {
		v, prev := b.Value, int64(0)
		for len(v) > 0 {
			d, k := binary.Varint(v)
			v = v[k:]
			salt, k := binary.Uvarint(v)
			v = v[k:]
			prev += d
			out = append(out, item(prev, salt))
		}
		return out
	}
	num := func(a string) int64 {
		x, _ := strconv.ParseInt(head[a].(*types.AttributeValueMemberN).Value, 10, 64)
		return x
	}
	var salts []byte
	if b, ok := head["ss"].(*types.AttributeValueMemberB); ok {
		salts = b.Value
	}
	for n := num("sf"); n < num("sn"); n++ {
		var salt uint64
		if salts != nil {
			var k int
			salt, k = binary.Uvarint(salts)
			salts = salts[k:]
		}
		out = append(out, item(n, salt))
	}
	return out
}

// A range's segment whose TTL passed is deleted by DynamoDB while the
// range's head, written later, still names it. A process reading the head
// afterwards finds the item gone and lets it go at its next write, rather
// than naming it (and reading it at every cold start) for ever (a review's
// finding).
func TestARangeLetsGoASegmentDynamoDBDeleted(t *testing.T) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	rk := state.RangeLedgerKey("pv")
	var now time.Time
	clock := func() time.Time { return now }
	opts := []dedupe.Option{dedupe.WithRanges(), dedupe.WithTTLAttribute(state.TTLAttribute), dedupe.WithClock(clock), dedupe.WithHeadEntries(1)}
	key := "k1"
	rangeKey := dedupe.RangeOf(key)
	at := func(sec int) { now = time.Unix(int64(base)+int64(sec), 0) }

	at(0)
	l := dedupe.NewLedger(mem, "views", rk, opts...)
	judge(t, l, cand(key, "a", 1, 0, 1), cand(key, "b", 2, 0, 1)) // seals a segment, TTL base+2h
	at(6600)                                                      // 1h50m: the head is written again, naming it (TTL 3h50m)
	judge(t, l, cand(key, "c", 3, 6600, 1))
	at(8000)
	// The sweeper takes the segment (TTL 2h passed), not the head (3h50m).
	if n := sweep(t, mem, now, func(it map[string]types.AttributeValue) bool {
		return it["sk"].(*types.AttributeValueMemberS).Value == "head"
	}); n == 0 {
		t.Fatal("no segment swept")
	}
	// Cold processes now, hours apart, each committing something.
	for i, sec := range []int{8000, 8000 + 3600, 8000 + 7200, 8000 + 3*3600} {
		at(sec)
		cold := dedupe.NewLedger(mem, "views", rk, opts...)
		judge(t, cold, cand(key, fmt.Sprint("n", i), 10+i, sec, 1))
	}
	// Every segment the head names must exist.
	head := mem.Item("views", rk(rangeKey, dedupe.Head))
	for _, item := range namedItems(t, head) {
		if mem.Item("views", rk(rangeKey, item)) == nil {
			t.Errorf("5 h after its TTL the range's head still names segment item %d, which DynamoDB deleted 3 h ago", item)
		}
	}
}

// A range's interval carries its claims under the range's ledger key in
// Lambda's window state; a deploy to dedupeLedger "key" before its flush
// settles them in the range, where the keys' ledgers look while young, not
// in a ledger of a key named after the range that nothing reads (a
// review's finding): a copy of the event a minute later is a duplicate.
func TestClaimsARangeCarriedAreKeptByTheKeysAfter(t *testing.T) {
	ctx := context.Background()
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	ik, rk := state.LedgerKey("pv"), state.RangeLedgerKey("pv")
	ttl := dedupe.WithTTLAttribute(state.TTLAttribute)
	byRange := dedupe.NewLedger(mem, "views", rk, ttl, dedupe.WithRanges(), dedupe.WithPredecessor(dedupe.NewLedger(mem, "views", ik, ttl)))
	const tag = "shardId-000000000000/w1/0"
	s := byRange.Begin(tag, nil)
	if err := s.Judge(ctx, []dedupe.Candidate{cand("k1", "a", 1, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	carried := s.Pending() // in the window state, through the deploy
	for k := range carried {
		t.Logf("carried under %s", dedupe.KeyName(k))
	}

	byKey := dedupe.NewLedger(mem, "views", ik, ttl, dedupe.WithPredecessor(dedupe.NewLedger(mem, "views", rk, ttl, dedupe.WithRanges())))
	s2 := byKey.Begin(tag, carried)
	if err := s2.Judge(ctx, []dedupe.Candidate{cand("k2", "b", 2, 5, 1)}); err != nil {
		t.Fatal(err)
	}
	if failed := s2.Commit(ctx, 4); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	for _, it := range mem.Items("views") {
		t.Logf("item %s / %s", strconv.Quote(it["pk"].(*types.AttributeValueMemberS).Value), it["sk"].(*types.AttributeValueMemberS).Value)
	}
	if got := judge(t, byKey, cand("k1", "a", 10, 60, 1)); fmt.Sprint(got) != verdicts(dedupe.Duplicate) {
		t.Errorf("a copy of a (claimed in the interval before the deploy), a minute later: %v, want duplicate", got)
	}
}

// A range ledger without a TTL attribute lets a segment go the horizon
// and an hour after its newest claim's arrival in every process, not only
// in the warm one that sealed it and knew its expiry (a review's finding).
func TestARangeWithoutTTLLetsSegmentsGoInEveryProcess(t *testing.T) {
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	rk := state.RangeLedgerKey("pv")
	var now time.Time
	opts := []dedupe.Option{dedupe.WithRanges(), dedupe.WithTTLAttribute(""), dedupe.WithClock(func() time.Time { return now }), dedupe.WithHeadEntries(1)}
	at := func(sec int) { now = time.Unix(int64(base)+int64(sec), 0) }
	key := "k1"
	at(0)
	judge(t, dedupe.NewLedger(mem, "views", rk, opts...), cand(key, "a", 1, 0, 1), cand(key, "b", 2, 0, 1))
	for i := 1; i <= 5; i++ { // a cold process every 3 hours
		sec := i * 3 * 3600
		at(sec)
		judge(t, dedupe.NewLedger(mem, "views", rk, opts...), cand(key, fmt.Sprint("n", i), 10+i, sec, 1), cand(key, fmt.Sprint("m", i), 20+i, sec, 1))
	}
	if n := len(namedItems(t, mem.Item("views", rk(dedupe.RangeOf(key), dedupe.Head)))); n > 2 {
		t.Errorf("15 h on, with a 1 h horizon, the range's head names %d segments; a warm writer would name at most 2", n)
	}
}
