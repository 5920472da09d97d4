package timeline

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/syncbuf"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// createTables creates the three tables and the followers index on db,
// named after prefix.
func createTables(t *testing.T, db *dynamodb.Client, prefix string) Tables {
	t.Helper()
	prefix = uniqueName(prefix)
	tb := Tables{Tweets: prefix + "-tweets", Follows: prefix + "-follows", Followers: "followers", Timelines: prefix + "-timelines", FanOut: prefix + "-fanout"}
	mk := func(name, hash, rng string, gsi []types.GlobalSecondaryIndex) {
		in := &dynamodb.CreateTableInput{
			TableName:   aws.String(name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(rng), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
			},
			GlobalSecondaryIndexes: gsi,
		}
		if _, err := db.CreateTable(context.Background(), in); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	mk(tb.Tweets, AttrAuthorID, AttrTweetID, nil)
	mk(tb.Follows, AttrFollowerID, AttrFolloweeID, []types.GlobalSecondaryIndex{{
		IndexName: aws.String(tb.Followers),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrFolloweeID), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrFollowerID), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}})
	mk(tb.Timelines, AttrUserID, AttrSortKey, nil)
	mk(tb.FanOut, AttrFanOutTweet, AttrFanOutSequence, nil)
	return tb
}

func sattr(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }

// history applies seeded random changes to the source tables and keeps, per
// table, the change records DynamoDB Streams would carry, in order.
type history struct {
	t       *testing.T
	db      *dynamodb.Client
	tb      Tables
	rng     *rand.Rand
	users   []string
	tweets  map[[2]string]bool // (author, tweetId) present
	follows map[[2]string]bool // (follower, followee) present
	recs    [2][]events.DynamoDBEventRecord
	seq     int
}

func createdAt(id string) string {
	n, _ := strconv.Atoi(id[strings.LastIndex(id, "t")+1:])
	return time.Date(2026, 11, 1, 0, 0, n, 0, time.UTC).Format(time.RFC3339)
}

func (h *history) record(table int, name events.DynamoDBOperationType, keys, img map[string]events.DynamoDBAttributeValue) {
	h.seq++
	r := events.DynamoDBEventRecord{
		EventID:        fmt.Sprintf("ev-%d", h.seq),
		EventName:      string(name),
		EventSource:    "aws:dynamodb",
		EventSourceArn: []string{h.tb.Tweets, h.tb.Follows}[table],
		Change: events.DynamoDBStreamRecord{
			Keys:           keys,
			SequenceNumber: strconv.Itoa(100000000000 + h.seq*100),
			StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
	if name == events.DynamoDBOperationTypeRemove {
		r.Change.OldImage = img
	} else {
		r.Change.NewImage = img
	}
	h.recs[table] = append(h.recs[table], r)
}

// step applies one random change and returns its table (0 tweets, 1 follows).
func (h *history) step() int {
	ctx := context.Background()
	u := h.users[h.rng.IntN(len(h.users))]
	if h.rng.IntN(2) == 0 {
		// Tweet ids repeat across authors, as the Tweets key (authorId,
		// tweetId) allows: two authors' t3 are two entries of a timeline.
		id := "t" + strconv.Itoa(h.rng.IntN(12))
		k := [2]string{u, id}
		keys := map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr(u), AttrTweetID: sattr(id)}
		img := map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr(u), AttrTweetID: sattr(id),
			AttrCreatedAt: sattr(createdAt(id)), AttrText: sattr("hello from " + u)}
		key := map[string]types.AttributeValue{AttrAuthorID: s(u), AttrTweetID: s(id)}
		if h.tweets[k] {
			if _, err := h.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &h.tb.Tweets, Key: key}); err != nil {
				h.t.Fatal(err)
			}
			delete(h.tweets, k)
			h.record(0, events.DynamoDBOperationTypeRemove, keys, img)
		} else {
			item := maps.Clone(key)
			item[AttrCreatedAt] = s(createdAt(id))
			item[AttrText] = s("hello from " + u)
			if _, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &h.tb.Tweets, Item: item}); err != nil {
				h.t.Fatal(err)
			}
			h.tweets[k] = true
			h.record(0, events.DynamoDBOperationTypeInsert, keys, img)
		}
		return 0
	}
	a := h.users[h.rng.IntN(len(h.users))]
	if a == u {
		a = h.users[(slices.Index(h.users, u)+1)%len(h.users)]
	}
	k := [2]string{u, a}
	keys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr(u), AttrFolloweeID: sattr(a)}
	key := map[string]types.AttributeValue{AttrFollowerID: s(u), AttrFolloweeID: s(a)}
	if h.follows[k] {
		if _, err := h.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &h.tb.Follows, Key: key}); err != nil {
			h.t.Fatal(err)
		}
		delete(h.follows, k)
		h.record(1, events.DynamoDBOperationTypeRemove, keys, keys)
	} else {
		if _, err := h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &h.tb.Follows, Item: key}); err != nil {
			h.t.Fatal(err)
		}
		h.follows[k] = true
		h.record(1, events.DynamoDBOperationTypeInsert, keys, keys)
	}
	return 1
}

// join is the reference view computed from the final tables: for each user
// U, its own tweets and those of the users U follows, as "U|sk".
func (h *history) join() []string {
	var out []string
	for k := range h.tweets {
		author, id := k[0], k[1]
		for _, u := range h.users {
			if u == author || h.follows[[2]string{u, author}] {
				out = append(out, u+"|"+SortKey(createdAt(id), author, id))
			}
		}
	}
	slices.Sort(out)
	return out
}

func view(t *testing.T, db *dynamodb.Client, table string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			out = append(out, str(it, AttrUserID)+"|"+str(it, AttrSortKey))
			if str(it, AttrText) != "hello from "+str(it, AttrAuthorID) {
				t.Errorf("view item %v has text %q, want the tweet's", it, str(it, AttrText))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRandomHistoriesConverge changes the tables at random while the
// handler consumes the two streams in random interleavings (each stream in
// order, batches of random size, some batches redelivered, processing
// racing the changes), then checks the view against the join of the final
// tables.
func TestRandomHistoriesConverge(t *testing.T) {
	db := sharedDB
	for seed := range uint64(6) {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			tb := createTables(t, db, "hist"+strconv.FormatUint(seed, 10))
			rng := rand.New(rand.NewPCG(seed, 0x7133))
			h := &history{t: t, db: db, tb: tb, rng: rng, users: []string{"ann", "bob", "cat", "dan"},
				tweets: map[[2]string]bool{}, follows: map[[2]string]bool{}}
			var out syncbuf.Buffer // the two streams' handlers flush concurrently
			handler := New(db, tb, WithMetrics(metrics.New(&out, "timeline")))
			var cursor [2]int
			redelivered, raced := 0, 0
			// next picks the table's next batch (a copy) and whether Lambda
			// will redeliver it; advance moves the checkpoint past it.
			next := func(table int) ([]events.DynamoDBEventRecord, bool) {
				recs := h.recs[table][cursor[table]:]
				if len(recs) == 0 {
					return nil, false
				}
				n := 1 + rng.IntN(min(len(recs), 4))
				return slices.Clone(recs[:n]), rng.IntN(5) == 0
			}
			run := func(recs []events.DynamoDBEventRecord) {
				if len(recs) == 0 {
					return
				}
				resp, err := handler.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Errorf("batch failed: %v %v", resp, err)
				}
			}
			advance := func(table int, recs []events.DynamoDBEventRecord, again bool) {
				if again { // Lambda redelivers from the same checkpoint
					redelivered++
					return
				}
				cursor[table] += len(recs)
			}
			deliver := func(table int) {
				recs, again := next(table)
				run(recs)
				advance(table, recs, again)
			}
			const changes = 40
			for done := 0; done < changes; {
				switch rng.IntN(4) {
				case 0:
					deliver(rng.IntN(2))
				case 1:
					// Both streams' batches run concurrently with a change
					// to the tables, as separate shards' invocations do.
					raced++
					r0, a0 := next(0)
					r1, a1 := next(1)
					var wg sync.WaitGroup
					wg.Go(func() { run(r0) })
					wg.Go(func() { run(r1) })
					h.step()
					done++
					wg.Wait()
					advance(0, r0, a0)
					advance(1, r1, a1)
				default:
					h.step()
					done++
				}
			}
			for cursor[0] < len(h.recs[0]) || cursor[1] < len(h.recs[1]) {
				deliver(rng.IntN(2))
			}
			got, want := view(t, db, tb.Timelines), h.join()
			if !slices.Equal(got, want) {
				t.Errorf("view differs from the join of the final tables\n got %v\nwant %v", got, want)
			}
			if len(want) == 0 {
				t.Error("history left an empty join: the check shows nothing")
			}
			if !strings.Contains(out.String(), `"ViewWrites"`) || !strings.Contains(out.String(), `"TweetsIn"`) {
				t.Errorf("metrics missing: %s", out.String())
			}
			t.Logf("%d tweet and %d follow records, %d batches redelivered, %d races, %d view items", len(h.recs[0]), len(h.recs[1]), redelivered, raced, len(got))
		})
	}
}

// TestBadRecordsAreReportedBySequenceNumber checks that records the handler
// cannot apply fail at their own sequence number, after the ones before them
// were applied.
func TestBadRecordsAreReportedBySequenceNumber(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "bad")
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: map[string]types.AttributeValue{
		AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s("2026-11-01T00:00:01Z"), AttrText: s("hello from ann")}}); err != nil {
		t.Fatal(err)
	}
	good := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "100",
		Keys:     map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t1")},
		NewImage: map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t1"), AttrCreatedAt: sattr("2026-11-01T00:00:01Z")}}}
	tests := []struct {
		name    string
		bad     events.DynamoDBEventRecord
		wantErr string
	}{
		{name: "unknown keys", bad: events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "99999999999999999999",
			Keys: map[string]events.DynamoDBAttributeValue{"id": sattr("x")}}}, wantErr: "neither a tweet"},
		{name: "tweet without createdAt", bad: events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "99999999999999999999",
			Keys:     map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t2")},
			NewImage: map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann")}}}, wantErr: "createdAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(db, tb)
			after := good
			after.Change.SequenceNumber = "100000000000000000000"
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{good, tt.bad, after}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != tt.bad.Change.SequenceNumber {
				t.Errorf("failures %v, want the bad record's %s", resp.BatchItemFailures, tt.bad.Change.SequenceNumber)
			}
			rerr := h.Record(context.Background(), &tt.bad)
			if rerr == nil || !strings.Contains(rerr.Error(), tt.wantErr) || !strings.Contains(rerr.Error(), tt.bad.Change.SequenceNumber) {
				t.Errorf("Record error %v, want one naming %q and the record", rerr, tt.wantErr)
			}
			if got := view(t, db, tb.Timelines); !slices.Equal(got, []string{"ann|" + SortKey("2026-11-01T00:00:01Z", "ann", "t1")}) {
				t.Errorf("view %v, want ann's tweet from the record before the bad one", got)
			}
		})
	}
}

// raceOnPut calls before, once, ahead of the first PutItem for user's
// timeline: a change that lands between the handler's read of the sources
// and its write.
type raceOnPut struct {
	*dynamodb.Client
	user   string
	before func()
}

func (r *raceOnPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if r.before != nil && str(in.Item, AttrUserID) == r.user {
		f := r.before
		r.before = nil
		f()
	}
	return r.Client.PutItem(ctx, in, opts...)
}

// TestStaleWriteIsUndone: while ann's tweet is being fanned out to bob, bob
// unfollows ann and the unfollow's record is processed in full (it finds
// nothing to remove yet); then the fan-out's write lands. The tweet must not
// stay in bob's timeline.
func TestStaleWriteIsUndone(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "race")
	ctx := context.Background()
	tweet := map[string]types.AttributeValue{AttrAuthorID: s("ann"), AttrTweetID: s("ann-t1"), AttrCreatedAt: s("2026-11-01T00:00:01Z"), AttrText: s("hello from ann")}
	follow := map[string]types.AttributeValue{AttrFollowerID: s("bob"), AttrFolloweeID: s("ann")}
	for table, item := range map[string]map[string]types.AttributeValue{tb.Tweets: tweet, tb.Follows: follow} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	followKeys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")}
	unfollow := events.DynamoDBEventRecord{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "200", Keys: followKeys, OldImage: followKeys}}
	insert := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "100",
		Keys:     map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("ann-t1")},
		NewImage: map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("ann-t1"), AttrCreatedAt: sattr("2026-11-01T00:00:01Z")}}}

	other := New(db, tb)
	race := &raceOnPut{Client: db, user: "bob", before: func() {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &tb.Follows, Key: follow}); err != nil {
			t.Error(err)
		}
		if resp, err := other.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{unfollow}}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Errorf("unfollow: %v %v", resp, err)
		}
	}}
	resp, err := New(race, tb).Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{insert}})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("insert: %v %v", resp, err)
	}
	if race.before != nil {
		t.Fatal("the unfollow never ran between the read and the write: the test shows nothing")
	}
	if got, want := view(t, db, tb.Timelines), []string{"ann|" + SortKey("2026-11-01T00:00:01Z", "ann", "ann-t1")}; !slices.Equal(got, want) {
		t.Errorf("view %v, want %v: the stale write to bob's timeline stayed", got, want)
	}
}

// TestStopsBeforeTheDeadline: with less time left than the margin, nothing
// is applied and the first record is reported, so Lambda redelivers the
// batch from it instead of timing the invocation out.
func TestStopsBeforeTheDeadline(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "deadline")
	keys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")}
	recs := []events.DynamoDBEventRecord{
		{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "300", Keys: keys, NewImage: keys}},
		{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "400", Keys: keys, OldImage: keys}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadlineMargin/2)
	defer cancel()
	resp, err := New(db, tb).Handle(ctx, events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "300" {
		t.Errorf("Handle = %v, %v; want the first record, 300, reported", resp, err)
	}
}

// TestChangedCreatedAtMovesTheEntry: a tweet whose createdAt changes moves
// in every timeline that has it (the time is in the sort key): the entry
// keyed by the old time left behind outlived the tweet's deletion and the
// follower's unfollow, and nothing was set aside.
func TestChangedCreatedAtMovesTheEntry(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "moved")
	ctx := context.Background()
	const before, after = "2026-12-06T07:00:00Z", "2026-12-06T07:30:00Z"
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Follows,
		Item: map[string]types.AttributeValue{AttrFollowerID: s("bob"), AttrFolloweeID: s("ann")}}); err != nil {
		t.Fatal(err)
	}
	keys := map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t1")}
	image := func(at string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t1"), AttrCreatedAt: sattr(at), AttrText: sattr("hello from ann")}
	}
	h := New(db, tb)
	apply := func(seq, name string, old, new map[string]events.DynamoDBAttributeValue) {
		t.Helper()
		switch {
		case new == nil:
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &tb.Tweets,
				Key: map[string]types.AttributeValue{AttrAuthorID: s("ann"), AttrTweetID: s("t1")}}); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: map[string]types.AttributeValue{
				AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s(new[AttrCreatedAt].String()), AttrText: s("hello from ann")}}); err != nil {
				t.Fatal(err)
			}
		}
		rec := events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{SequenceNumber: seq, Keys: keys, OldImage: old, NewImage: new}}
		if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s: %v %v", name, resp, err)
		}
	}
	apply("100", "INSERT", nil, image(before))
	apply("200", "MODIFY", image(before), image(after))
	want := []string{"ann|" + SortKey(after, "ann", "t1"), "bob|" + SortKey(after, "ann", "t1")}
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("after the change of createdAt: view %v, want %v", got, want)
	}
	apply("300", "REMOVE", image(after), nil)
	if got := view(t, db, tb.Timelines); len(got) != 0 {
		t.Errorf("after the tweet's deletion: view %v, want every entry gone", got)
	}
}
