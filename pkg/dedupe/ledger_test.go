package dedupe_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/limits"
)

var (
	db       *dynamodb.Client
	tableSeq atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { db = dynamodb.NewFromConfig(cfg) }))
}

// newTable creates a pk/sk table like the views table.
func newTable(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("dedupe-%d", tableSeq.Add(1))
	s := types.ScalarAttributeTypeS
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: s},
			{AttributeName: aws.String("sk"), AttributeType: s},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func itemKey(key string, seg int64) map[string]types.AttributeValue {
	sk := "head"
	if seg != dedupe.Head {
		sk = fmt.Sprintf("seg#%012d", seg)
	}
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "dedupe#test#" + key},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

// base is the arrival time of the first record in these tests.
var base = uint32(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Unix())

// cand is event id of key, claimed by record seq, arriving at base+at
// seconds, with content version v.
func cand(key, id string, seq, at, v int) dedupe.Candidate {
	return dedupe.Candidate{Key: key, Entry: dedupe.Entry{
		ID:      dedupe.IdentityOf(key, id),
		Content: dedupe.ContentOf("view", time.Unix(int64(base), 0), []byte(fmt.Sprintf(`{"v": %d}`, v))),
		Claim:   dedupe.ClaimOf("shardId-000000000000", fmt.Sprint(seq)),
		Arrival: base + uint32(at),
	}}
}

// judge runs one per-batch session: judge, commit, verdicts.
func judge(t *testing.T, l *dedupe.Ledger, cs ...dedupe.Candidate) []dedupe.Verdict {
	t.Helper()
	s := l.Begin("", nil)
	if err := s.Judge(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	if failed := s.Commit(context.Background(), 4); len(failed) > 0 {
		t.Fatalf("commit: %v", failed[0])
	}
	return s.Verdicts()
}

func verdicts(vs ...dedupe.Verdict) string { return fmt.Sprint(vs) }

func TestVerdicts(t *testing.T) {
	l := dedupe.NewLedger(db, newTable(t), itemKey)
	got := judge(t, l,
		cand("k1", "a", 1, 0, 1),
		cand("k1", "b", 2, 0, 1),
		cand("k1", "a", 3, 1, 1), // a copy in the same batch
		cand("k2", "a", 4, 1, 1), // the same id under another key is another event
	)
	if want := verdicts(dedupe.New, dedupe.New, dedupe.Duplicate, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("first batch: %v, want %v", got, want)
	}
	// A new process (cold cache): Lambda redelivers record 1 and 2; a
	// producer sends a again (record 5) and reuses b for other content.
	l2 := dedupe.NewLedger(db, l.Table(), itemKey)
	got = judge(t, l2,
		cand("k1", "a", 1, 0, 1),
		cand("k1", "b", 2, 0, 1),
		cand("k1", "a", 5, 60, 1),
		cand("k1", "b", 6, 60, 2),
		cand("k1", "c", 7, 60, 1),
	)
	if want := verdicts(dedupe.Redelivered, dedupe.Redelivered, dedupe.Duplicate, dedupe.Conflict, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("second batch: %v, want %v", got, want)
	}
}

func TestStaleCacheIsCaughtByTheConditionalWrite(t *testing.T) {
	table := newTable(t)
	a := dedupe.NewLedger(db, table, itemKey)
	b := dedupe.NewLedger(db, table, itemKey)
	// Both processes know key k (b warms its cache with an unrelated id).
	judge(t, a, cand("k", "x0", 1, 0, 1))
	judge(t, b, cand("k", "x0", 1, 0, 1))
	// a takes the shard for a while and claims id "y".
	judge(t, a, cand("k", "y", 2, 1, 1))
	// The shard comes back to b, whose copy of the ledger lacks "y": the
	// producer's copy of y must still be a duplicate.
	got := judge(t, b, cand("k", "y", 3, 30, 1), cand("k", "z", 4, 30, 1))
	if want := verdicts(dedupe.Duplicate, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if st := b.Stats(); st.Conflicts == 0 {
		t.Errorf("b made no conditional write that failed: %+v", st)
	}
}

func TestConcurrentSessionsAcceptEachIDOnce(t *testing.T) {
	table := newTable(t)
	const writers, ids = 4, 30
	var mu sync.Mutex
	accepted := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := dedupe.NewLedger(db, table, itemKey, dedupe.WithHeadEntries(8), dedupe.WithSegmentEntries(5))
			for i := 0; i < ids; i += 3 {
				var cs []dedupe.Candidate
				for j := i; j < i+3; j++ {
					// Every writer sends a copy of the same ids (different records).
					cs = append(cs, cand("hot", fmt.Sprint("id-", j), 1000*w+j, j, 1))
				}
				s := l.Begin("", nil)
				if err := s.Judge(context.Background(), cs); err != nil {
					t.Error(err)
					return
				}
				if failed := s.Commit(context.Background(), 1); len(failed) > 0 {
					t.Error(failed[0])
					return
				}
				mu.Lock()
				for k, v := range s.Verdicts() {
					if v == dedupe.New {
						accepted[fmt.Sprint(cs[k].ID)]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(accepted) != ids {
		t.Errorf("%d ids accepted, want %d", len(accepted), ids)
	}
	for id, n := range accepted {
		if n != 1 {
			t.Errorf("id %s accepted %d times", id, n)
		}
	}
}

// TestHotKeySpillsIntoSegments: a key with more claims in the horizon than
// a head holds keeps them all, in items within DynamoDB's limit, and a cold
// process sees every one.
func TestHotKeySpillsIntoSegments(t *testing.T) {
	table := newTable(t)
	const n = 30000 // 1.08 MB of claims: more than two items could hold
	l := dedupe.NewLedger(db, table, itemKey)
	for start := 0; start < n; start += 1000 {
		var cs []dedupe.Candidate
		for i := start; i < start+1000; i++ {
			cs = append(cs, cand("hot", fmt.Sprint("e", i), i+1, i/10, 1))
		}
		got := judge(t, l, cs...)
		for i, v := range got {
			if v != dedupe.New {
				t.Fatalf("id e%d: %v, want new", start+i, v)
			}
		}
	}
	// Every item is within the limit.
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	items := out.Items
	for out.LastEvaluatedKey != nil {
		out, err = db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: out.LastEvaluatedKey})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
	}
	if len(items) < 4 {
		t.Fatalf("%d items hold %d claims: no spill", len(items), n)
	}
	for _, it := range items {
		if sz := limits.ItemSize(it); sz > limits.DynamoDBItemBytes {
			t.Errorf("item %v is %d bytes", it["sk"], sz)
		}
	}
	// A cold process: every copy is a duplicate, a new id is new.
	cold := dedupe.NewLedger(db, table, itemKey)
	var cs []dedupe.Candidate
	for i := 0; i < n; i += 7 {
		cs = append(cs, cand("hot", fmt.Sprint("e", i), 100000+i, n/10+1, 1))
	}
	cs = append(cs, cand("hot", "fresh", 999999, n/10+1, 1))
	got := judge(t, cold, cs...)
	for i, v := range got[:len(got)-1] {
		if v != dedupe.Duplicate {
			t.Fatalf("copy of e%d: %v, want duplicate", i*7, v)
		}
	}
	if v := got[len(got)-1]; v != dedupe.New {
		t.Fatalf("fresh id: %v, want new", v)
	}
}

func TestClaimsExpireAfterTheHorizon(t *testing.T) {
	table := newTable(t)
	l := dedupe.NewLedger(db, table, itemKey, dedupe.WithHorizon(time.Hour), dedupe.WithHeadEntries(2), dedupe.WithSegmentEntries(2), dedupe.WithTTLAttribute("expiresAt"))
	judge(t, l, cand("k", "a", 1, 0, 1), cand("k", "b", 2, 0, 1), cand("k", "c", 3, 0, 1))
	// 59 minutes later: still a duplicate. Two hours later: counted again.
	if got := judge(t, l, cand("k", "a", 4, 59*60, 1)); got[0] != dedupe.Duplicate {
		t.Fatalf("within the horizon: %v", got[0])
	}
	if got := judge(t, l, cand("k", "b", 5, 2*3600, 1)); got[0] != dedupe.New {
		t.Fatalf("past the horizon: %v", got[0])
	}
	// The expired segment is no longer read by a cold process.
	cold := dedupe.NewLedger(db, table, itemKey)
	if got := judge(t, cold, cand("k", "c", 6, 2*3600+1, 1)); got[0] != dedupe.New {
		t.Fatalf("cold, past the horizon: %v", got[0])
	}
	if got := judge(t, cold, cand("k", "b", 7, 2*3600+2, 1)); got[0] != dedupe.Duplicate {
		t.Fatalf("cold, the renewed claim: %v", got[0])
	}
}

// ttlOf reads the TTL attribute of every ledger item of key in table, by
// sort key ("head", "seg#…").
func ttlOf(t *testing.T, table, key string) map[string]int64 {
	t.Helper()
	out, err := db.Query(context.Background(), &dynamodb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": itemKey(key, dedupe.Head)["pk"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	ttls := map[string]int64{}
	for _, it := range out.Items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		n, ok := it["expiresAt"].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item %s of key %s has no expiresAt", sk, key)
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ttls[sk] = v
	}
	return ttls
}

// Records read again long after they arrived (a rebuild from the archive, a
// replay from the stream's retention, a backlog past the horizon) claim ids
// with arrival times days old. Their items must still live a horizon (and
// the slack) from when they are written, or DynamoDB's TTL sweeper may
// delete them while the rebuild still needs them, and a cold process would
// count a copy again. Live records keep a TTL of arrival + horizon + slack.
func TestTTLIsFlooredAtWriteTime(t *testing.T) {
	const horizon, slack = time.Hour, time.Hour
	now := time.Unix(int64(base), 0).Add(4 * 24 * time.Hour) // four days after the records arrived
	table := newTable(t)
	l := dedupe.NewLedger(db, table, itemKey, dedupe.WithHorizon(horizon), dedupe.WithHeadEntries(2), dedupe.WithSegmentEntries(2),
		dedupe.WithTTLAttribute("expiresAt"), dedupe.WithClock(func() time.Time { return now }))

	// Old records: a head that fills up and seals a segment, then a head.
	judge(t, l, cand("old", "a", 1, 0, 1), cand("old", "b", 2, 10, 1), cand("old", "c", 3, 20, 1))
	judge(t, l, cand("old", "d", 4, 30, 1))
	floor := now.Add(horizon).Unix()
	ttls := ttlOf(t, table, "old")
	if len(ttls) < 2 {
		t.Fatalf("old key: items %v, want a head and a sealed segment", ttls)
	}
	for sk, exp := range ttls {
		if exp < floor || exp > now.Add(horizon+slack).Unix() {
			t.Errorf("old key, item %s: expires at %s, want from now + horizon (%s) to now + horizon + slack: a TTL in the past is swept while a rebuild still needs the item",
				sk, time.Unix(exp, 0).UTC(), time.Unix(floor, 0).UTC())
		}
	}

	// Live records (arriving now, or a little later by the stream's clock
	// than by the function's) expire a horizon and the slack after they
	// arrived, not later: the floor is not added on top.
	live := int(now.Unix()) - int(base)
	for _, c := range []struct {
		key   string
		ahead int // seconds the arrivals are past now
	}{{"live", 0}, {"ahead", 30}} {
		judge(t, l, cand(c.key, "a", 11, live+c.ahead, 1), cand(c.key, "b", 12, live+c.ahead, 1), cand(c.key, "c", 13, live+c.ahead, 1))
		ttls := ttlOf(t, table, c.key)
		if len(ttls) < 2 {
			t.Fatalf("%s key: items %v, want a head and sealed segments", c.key, ttls)
		}
		want := now.Add(time.Duration(c.ahead)*time.Second + horizon + slack).Unix()
		for sk, exp := range ttls {
			if exp != want {
				t.Errorf("%s key, item %s: expires at %s, want %s (arrival + horizon + slack)", c.key, sk, time.Unix(exp, 0).UTC(), time.Unix(want, 0).UTC())
			}
		}
	}
}

// TestIntervalCarriesClaims: on the per-interval path claims ride in the
// window state until the interval commits; an invocation on another process
// reads the ledger afresh; a retried final commit writes nothing twice.
func TestIntervalCarriesClaims(t *testing.T) {
	table := newTable(t)
	x := dedupe.NewLedger(db, table, itemKey)
	y := dedupe.NewLedger(db, table, itemKey)
	judge(t, x, cand("k", "old", 1, 0, 1))

	tag := "shardId-000000000000/w1/g0"
	s1 := x.Begin(tag, nil)
	if err := s1.Judge(context.Background(), []dedupe.Candidate{cand("k", "a", 2, 10, 1), cand("k", "old", 3, 10, 1)}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s1.Verdicts()), verdicts(dedupe.New, dedupe.Duplicate); got != want {
		t.Fatalf("first invocation: %v, want %v", got, want)
	}
	state := dedupe.EncodePending(s1.Pending())
	carried, err := dedupe.DecodePending(state)
	if err != nil {
		t.Fatal(err)
	}
	// The next invocation runs on y: a's copy in the same interval is a duplicate.
	s2 := y.Begin(tag, carried)
	if err := s2.Judge(context.Background(), []dedupe.Candidate{cand("k", "a", 4, 20, 1), cand("k", "b", 5, 20, 1)}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s2.Verdicts()), verdicts(dedupe.Duplicate, dedupe.New); got != want {
		t.Fatalf("second invocation: %v, want %v", got, want)
	}
	carried, _ = dedupe.DecodePending(dedupe.EncodePending(s2.Pending()))
	if len(carried["k"]) != 2 {
		t.Fatalf("carried %d claims, want 2", len(carried["k"]))
	}
	// The final invocation commits; its retry (same state) changes nothing.
	for try := 0; try < 2; try++ {
		fin := x.Begin(tag, carried)
		if err := fin.Judge(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if failed := fin.Commit(context.Background(), 2); len(failed) > 0 {
			t.Fatal(failed[0])
		}
		if len(fin.Raced) > 0 {
			t.Fatalf("try %d: raced %v", try, fin.Raced)
		}
	}
	cold := dedupe.NewLedger(db, table, itemKey)
	got := judge(t, cold, cand("k", "a", 9, 30, 1), cand("k", "b", 10, 30, 1), cand("k", "c", 11, 30, 1))
	if want := verdicts(dedupe.Duplicate, dedupe.Duplicate, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("after the interval: %v, want %v", got, want)
	}
}

func TestPendingRoundTrip(t *testing.T) {
	p := map[string][]dedupe.Entry{
		"a":      {cand("a", "1", 1, 0, 1).Entry, cand("a", "2", 2, 0, 1).Entry},
		"b\x00c": {cand("b", "1", 3, 5, 2).Entry},
	}
	got, err := dedupe.DecodePending(dedupe.EncodePending(p))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(p) {
		t.Fatalf("round trip: %v, want %v", got, p)
	}
	for _, bad := range []string{"!!", "AQ==", "AWEF"} {
		if _, err := dedupe.DecodePending(bad); err == nil {
			t.Errorf("DecodePending(%q) accepted", bad)
		}
	}
}

// TestAStaleSealNeverOverwritesACommittedSegment: a seal is two plain
// writes (the segment, then the head on its version), not a transaction. A
// process whose copy of the head is stale seals the same segment number a
// winner has sealed; its segment goes to an item of its own (its salt), its
// head write loses, and the winner's sealed claims all still count.
func TestAStaleSealNeverOverwritesACommittedSegment(t *testing.T) {
	table := newTable(t)
	opts := []dedupe.Option{dedupe.WithHeadEntries(2), dedupe.WithSegmentEntries(2)}
	a := dedupe.NewLedger(db, table, itemKey, opts...)
	b := dedupe.NewLedger(db, table, itemKey, opts...)
	judge(t, a, cand("k", "p1", 1, 0, 1))
	judge(t, b, cand("k", "p1", 2, 0, 1))                           // a copy: b reads the head, writes nothing
	judge(t, a, cand("k", "q1", 3, 1, 1), cand("k", "q2", 4, 1, 1)) // a seals segments 0 and 1
	judge(t, b, cand("k", "r1", 5, 2, 1), cand("k", "r2", 6, 2, 1)) // b, stale, seals 0 and 1 too, and loses
	c := dedupe.NewLedger(db, table, itemKey, opts...)
	got := judge(t, c, cand("k", "p1", 7, 3, 1), cand("k", "q1", 8, 3, 1), cand("k", "q2", 9, 3, 1), cand("k", "r1", 10, 3, 1), cand("k", "r2", 11, 3, 1))
	if want := verdicts(dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate); fmt.Sprint(got) != want {
		t.Fatalf("copies judged %v by a fresh process, want %v: a sealed claim was lost", got, want)
	}
	if st := b.Stats(); st.Conflicts == 0 {
		t.Fatalf("b's stale seal met no conflict (%+v): the race was not set up", st)
	}
}

// TestSegmentsSealedBeforeSaltsStillCount: a head written before seals
// were salted names its segments by number alone (no "ss" attribute, each
// segment the item of its number, as the transaction wrote them); a process
// of this version reads them.
func TestSegmentsSealedBeforeSaltsStillCount(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	opts := []dedupe.Option{dedupe.WithHeadEntries(2), dedupe.WithSegmentEntries(2)}
	a := dedupe.NewLedger(db, table, itemKey, opts...)
	judge(t, a, cand("k", "p1", 1, 0, 1), cand("k", "p2", 2, 0, 1), cand("k", "p3", 3, 0, 1)) // seals segments 0 and 1
	get := func(key map[string]types.AttributeValue) map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("reading %v: %v (item %v)", key, err, out)
		}
		return out.Item
	}
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	// Rewrite them as the earlier version left them: segment n at item n.
	head := get(itemKey("k", dedupe.Head))
	salts := head["ss"].(*types.AttributeValueMemberB).Value
	for n := int64(0); n < 2; n++ {
		salt, k := binary.Uvarint(salts)
		salts = salts[k:]
		seg := get(itemKey("k", n<<20|int64(salt)))
		for name, v := range itemKey("k", n) {
			seg[name] = v
		}
		put(seg)
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: itemKey("k", n<<20|int64(salt))}); err != nil {
			t.Fatal(err)
		}
	}
	delete(head, "ss")
	put(head)
	c := dedupe.NewLedger(db, table, itemKey, opts...)
	got := judge(t, c, cand("k", "p1", 4, 1, 1), cand("k", "p2", 5, 1, 1), cand("k", "p3", 6, 1, 1), cand("k", "p4", 7, 1, 1))
	if want := verdicts(dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate, dedupe.New); fmt.Sprint(got) != want {
		t.Fatalf("copies judged %v against segments sealed before salts, want %v", got, want)
	}
}

// TestConflictKeepsSealedClaims: a process whose copy of the head is stale
// writes, loses the condition, and judges its batch again with the head
// DynamoDB handed back and the segments it already held: claims in those
// segments still count (a copy of one stays a duplicate).
func TestConflictKeepsSealedClaims(t *testing.T) {
	table := newTable(t)
	opts := []dedupe.Option{dedupe.WithHeadEntries(2), dedupe.WithSegmentEntries(2)}
	a := dedupe.NewLedger(db, table, itemKey, opts...)
	b := dedupe.NewLedger(db, table, itemKey, opts...)
	judge(t, a, cand("k", "x1", 1, 0, 1), cand("k", "x2", 2, 0, 1), cand("k", "x3", 3, 0, 1)) // sealed
	judge(t, b, cand("k", "w", 4, 1, 1))                                                      // b reads the key, segments too
	judge(t, a, cand("k", "y", 5, 2, 1))                                                      // b's head is now stale
	got := judge(t, b, cand("k", "z", 6, 3, 1), cand("k", "x1", 7, 3, 1))
	if want := verdicts(dedupe.New, dedupe.Duplicate); fmt.Sprint(got) != want {
		t.Fatalf("verdicts %v, want %v: a sealed claim was lost in the retry", got, want)
	}
}

// TestAHotKeysHeadStaysSmall: a key that seals a segment at every commit,
// hundreds of times within the horizon, keeps a head of under 1 KB (one
// write unit, far from DynamoDB's 400 KB item), and every claim of the
// horizon, the first one too, still holds back its copies, in a warm
// process and a cold one.
func TestAHotKeysHeadStaysSmall(t *testing.T) {
	table := newTable(t)
	const seals = 600
	l := dedupe.NewLedger(db, table, itemKey, dedupe.WithHeadEntries(1))
	for i := 0; i < seals; i++ {
		got := judge(t, l, cand("hot", fmt.Sprint("a", i), 2*i+1, i, 1), cand("hot", fmt.Sprint("b", i), 2*i+2, i, 1))
		if want := verdicts(dedupe.New, dedupe.New); fmt.Sprint(got) != want {
			t.Fatalf("commit %d: %v, want %v", i, got, want)
		}
	}
	if st := l.Stats(); st.Seals < seals/2 {
		t.Fatalf("%d seals in %d commits: the key did not seal at its commits", st.Seals, seals)
	}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: itemKey("hot", dedupe.Head), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if sz := limits.ItemSize(out.Item); sz > 1024 {
		t.Fatalf("after %d seals the head is %d bytes, want at most 1,024: it grows with every segment", seals, sz)
	}
	at := seals + 1
	check := func(name string, l *dedupe.Ledger) {
		t.Helper()
		var cs []dedupe.Candidate
		for i := 0; i < seals; i += 37 {
			cs = append(cs, cand("hot", fmt.Sprint("a", i), 10000+i, at, 1), cand("hot", fmt.Sprint("b", i), 20000+i, at, 1))
		}
		cs = append(cs, cand("hot", "a0", 30000, at, 1), cand("hot", fmt.Sprint("fresh-", name), 30001, at, 1))
		got := judge(t, l, cs...)
		for i, v := range got[:len(got)-1] {
			if v != dedupe.Duplicate {
				t.Fatalf("%s process: copy %d (%v): %v, want duplicate", name, i, cs[i].ID, v)
			}
		}
		if v := got[len(got)-1]; v != dedupe.New {
			t.Fatalf("%s process: a fresh id: %v, want new", name, v)
		}
		at++
	}
	check("warm", l)
	check("cold", dedupe.NewLedger(db, table, itemKey, dedupe.WithHeadEntries(1)))
	items := scanAll(t, table)
	for _, it := range items {
		if sz := limits.ItemSize(it); sz > limits.DynamoDBItemBytes {
			t.Errorf("item %v is %d bytes", it["sk"], sz)
		}
	}
}

// scanAll reads every item of table.
func scanAll(t *testing.T, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
		if start = out.LastEvaluatedKey; start == nil {
			return items
		}
	}
}

// TestAKeyPastTheSegmentLimitLetsItsOldestClaimsGo: a key whose claims
// within the horizon fill more segments than merging can bring under the
// limit (here segments of two claims that never fit one merged segment)
// lets its oldest segments go, counted in DroppedEarly, so its head never
// grows to DynamoDB's item limit and fails every commit of the key — which
// would hold its shard. The newest claims still suppress copies; copies of
// the claims let go are new again, the cost of a key that hot.
func TestAKeyPastTheSegmentLimitLetsItsOldestClaimsGo(t *testing.T) {
	table := newTable(t)
	const commits, limit = 20, 6
	opts := []dedupe.Option{dedupe.WithHeadEntries(1), dedupe.WithSegmentEntries(2), dedupe.WithMaxSegments(2), dedupe.WithSegmentLimit(limit)}
	l := dedupe.NewLedger(db, table, itemKey, opts...)
	for i := 0; i < commits; i++ {
		if got, want := fmt.Sprint(judge(t, l, cand("hot", fmt.Sprint("a", i), 2*i+1, i, 1), cand("hot", fmt.Sprint("b", i), 2*i+2, i, 1))), verdicts(dedupe.New, dedupe.New); got != want {
			t.Fatalf("commit %d: %v, want %v", i, got, want)
		}
	}
	st := l.Stats()
	if st.DroppedEarly == 0 || st.DroppedEarly > 2*(commits-limit) {
		t.Fatalf("DroppedEarly %d; want some claims let go, at most the %d of the segments past the limit", st.DroppedEarly, 2*(commits-limit))
	}
	for i, l := range []*dedupe.Ledger{l, dedupe.NewLedger(db, table, itemKey, opts...)} {
		name, last, at := []string{"warm", "cold"}[i], commits-1, commits+i
		got := judge(t, l, cand("hot", fmt.Sprint("a", last), 1000+10*i, at, 1), cand("hot", fmt.Sprint("b", last), 1001+10*i, at, 1), cand("hot", fmt.Sprint("a", i), 1002+10*i, at, 1))
		if want := verdicts(dedupe.Duplicate, dedupe.Duplicate, dedupe.New); fmt.Sprint(got) != want {
			t.Errorf("%s process: the newest claims' copies and the oldest's: %v, want %v", name, got, want)
		}
	}
}

// TestASegmentLimitBelowMaxSegmentsMergesFirst: a ledger whose segment
// limit is set below WithMaxSegments (the default 128) merges its small
// segments to stay within the limit, as it does past WithMaxSegments,
// instead of letting claims go that one merged segment holds easily: a
// copy of the key's first event, well within the horizon, is still held
// back, and nothing is counted as dropped early.
func TestASegmentLimitBelowMaxSegmentsMergesFirst(t *testing.T) {
	table := newTable(t)
	const commits = 8
	opts := []dedupe.Option{dedupe.WithHeadEntries(1), dedupe.WithSegmentEntries(100), dedupe.WithSegmentLimit(3)}
	l := dedupe.NewLedger(db, table, itemKey, opts...)
	for i := 0; i < commits; i++ {
		if got, want := fmt.Sprint(judge(t, l, cand("hot", fmt.Sprint("a", i), 2*i+1, i, 1), cand("hot", fmt.Sprint("b", i), 2*i+2, i, 1))), verdicts(dedupe.New, dedupe.New); got != want {
			t.Fatalf("commit %d: %v, want %v", i, got, want)
		}
	}
	if st := l.Stats(); st.DroppedEarly != 0 {
		t.Errorf("DroppedEarly %d; want 0: %d claims fit one segment of 100", st.DroppedEarly, 2*commits)
	}
	for i, l := range []*dedupe.Ledger{l, dedupe.NewLedger(db, table, itemKey, opts...)} {
		name, at := []string{"warm", "cold"}[i], commits+i
		if got, want := fmt.Sprint(judge(t, l, cand("hot", "a0", 1000+10*i, at, 1))), verdicts(dedupe.Duplicate); got != want {
			t.Errorf("%s process: a copy of the first event: %v, want %v", name, got, want)
		}
	}
}

// TestDroppedEarlyCountsOnlyClaimsWithinTheHorizon: a segment let go at
// the segment limit may hold claims already past the horizon beside live
// ones; DroppedEarly (the functions' DedupeDroppedEarly metric and the
// warning's claims) counts the live ones only, the copies that now count
// again, not every claim the segment held.
func TestDroppedEarlyCountsOnlyClaimsWithinTheHorizon(t *testing.T) {
	const commits = 6
	// Each commit seals a segment of two claims 9 s apart; with a 5 s
	// horizon the segment before holds one claim past it and one within,
	// and no two segments fit one merged one.
	l := dedupe.NewLedger(db, newTable(t), itemKey, dedupe.WithHorizon(5*time.Second), dedupe.WithHeadEntries(1),
		dedupe.WithSegmentEntries(2), dedupe.WithMaxSegments(2), dedupe.WithSegmentLimit(1))
	for i := 0; i < commits; i++ {
		if got, want := fmt.Sprint(judge(t, l, cand("hot", fmt.Sprint("a", i), 2*i+1, 10*i, 1), cand("hot", fmt.Sprint("b", i), 2*i+2, 10*i+9, 1))), verdicts(dedupe.New, dedupe.New); got != want {
			t.Fatalf("commit %d: %v, want %v", i, got, want)
		}
	}
	if got, want := l.Stats().DroppedEarly, commits-1; got != want {
		t.Errorf("DroppedEarly %d; want %d: each commit let go of one claim within the horizon (its segment's other was past it)", got, want)
	}
}
