package timeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

// countingStore passes every call to the stand-in and counts the PutItems
// of the timelines table by user.
type countingStore struct {
	*dynamodb.Client
	table string
	mu    sync.Mutex
	puts  map[string]int
}

func (c *countingStore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, opts...)
	if err == nil && aws.ToString(in.TableName) == c.table {
		c.mu.Lock()
		c.puts[str(in.Item, AttrUserID)]++
		c.mu.Unlock()
	}
	return out, err
}

func (c *countingStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.puts {
		n += v
	}
	return n
}

// celebrity puts a tweet by author and n followers of author (f00000,
// f00001, ...) in the tables, and returns the tweet's INSERT record.
func celebrity(t *testing.T, db *dynamodb.Client, tb Tables, author, id, at string, n int) (events.DynamoDBEventRecord, []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: map[string]types.AttributeValue{
		AttrAuthorID: s(author), AttrTweetID: s(id), AttrCreatedAt: s(at), AttrText: s("hello from " + author)}}); err != nil {
		t.Fatal(err)
	}
	var followers []string
	for i := range n {
		followers = append(followers, fmt.Sprintf("f%05d", i))
	}
	for chunk := range slices.Chunk(followers, 25) {
		var reqs []types.WriteRequest
		for _, f := range chunk {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				AttrFollowerID: s(f), AttrFolloweeID: s(author)}}})
		}
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tb.Follows: reqs}})
		if err != nil || len(out.UnprocessedItems) > 0 {
			t.Fatalf("writing follows: %v (%d unprocessed)", err, len(out.UnprocessedItems))
		}
	}
	return tweetRecord("100", author, id, map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr(author), AttrTweetID: sattr(id), AttrCreatedAt: sattr(at)}), followers
}

// TestTweetOfManyFollowersCompletesOverRedeliveries: a tweet with more
// followers than one invocation can fan out to stops before the deadline
// with its progress saved; each redelivery, as Lambda makes it from the
// failed record, resumes where the one before stopped and gets further,
// until the record is applied. Every follower's timeline is written exactly
// once over all deliveries — but for the page of a delivery the stand-in
// stalled past its deadline, whose writes it may have applied after their
// answers were given up (the progress cannot record them, so the
// redelivery writes them again, to the same values: at most twice) — and
// the record after the tweet in the batch is applied once the tweet is.
func TestTweetOfManyFollowersCompletesOverRedeliveries(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "celeb")
	ctx := context.Background()
	at := "2026-12-10T00:00:00Z"
	const followers = 600
	rec, fs := celebrity(t, db, tb, "ann", "t1", at, followers)
	// A user who does not follow ann, and a second tweet after ann's in the
	// batch (bob's, without followers).
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: map[string]types.AttributeValue{
		AttrAuthorID: s("bob"), AttrTweetID: s("b1"), AttrCreatedAt: s(at), AttrText: s("hello from bob")}}); err != nil {
		t.Fatal(err)
	}
	after := tweetRecord("200", "bob", "b1", map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("bob"), AttrTweetID: sattr("b1"), AttrCreatedAt: sattr(at)})

	store := &countingStore{Client: db, table: tb.Timelines, puts: map[string]int{}}
	h := New(store, tb, WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	// Each invocation has 4 s; the handler keeps deadlineMargin (0.5 s) to
	// answer and starts no entry in the last 2 s of the rest, so it fans
	// out for about a second and a half (on a machine busy with other
	// tests, still time for some entries), and an entry it started has 2 s
	// to finish. The stand-in cannot do 600 entries (3,000 calls) in that.
	h.fanOutStop = 2 * time.Second
	batch := []events.DynamoDBEventRecord{rec, after}
	done, deliveries, stalled := 0, 0, 0
	// again: the followers (by index in fs) of the page a stalled delivery
	// was writing, from the progress before it to the progress after the
	// redelivery that resumed it; againAuthor: the stall came before the
	// author's own entry was recorded.
	again, againAuthor := map[int]bool{}, false
	stalledAt := -1
	for ; deliveries < 200 && len(batch) > 0; deliveries++ {
		ictx, cancel := context.WithTimeout(ctx, 4*time.Second)
		resp, err := h.Handle(ictx, events.DynamoDBEvent{Records: batch})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			batch = nil
			break
		}
		// Lambda redelivers from the failed record.
		failed := resp.BatchItemFailures[0].ItemIdentifier
		i := slices.IndexFunc(batch, func(r events.DynamoDBEventRecord) bool { return r.Change.SequenceNumber == failed })
		if i < 0 {
			t.Fatalf("delivery %d: failed record %s is not in the batch", deliveries+1, failed)
		}
		batch = batch[i:]
		p, err := h.loadProgress(ctx, fanOutTweetKey("ann", "t1"), "100")
		if err != nil {
			t.Fatal(err)
		}
		if failed != "100" {
			// The tweet's fan-out finished, leaving too little time for
			// bob's record after it.
			if p.state != fanOutComplete {
				t.Fatalf("delivery %d: record %s failed before the tweet's fan-out completed (%+v)", deliveries+1, failed, p)
			}
			continue
		}
		if !p.started || p.done <= done {
			// A stand-in that stalls for a whole invocation on a machine
			// busy with other tests leaves one delivery without progress,
			// as a slow DynamoDB would; Lambda redelivers. Two in a row
			// is a fan-out that does not resume.
			if stalled++; stalled == 2 {
				t.Fatalf("deliveries %d and %d made no progress: %d followers done before them, %d after (started %v)", deliveries, deliveries+1, done, p.done, p.started)
			}
			t.Logf("delivery %d made no progress (%d followers done): redelivered", deliveries+1, p.done)
			stalledAt, againAuthor = p.done, againAuthor || !p.started
			continue
		}
		if stalledAt >= 0 {
			for i := stalledAt; i < p.done; i++ {
				again[i] = true
			}
			stalledAt = -1
		}
		stalled = 0
		t.Logf("delivery %d: %d followers done, cursor after %q", deliveries+1, p.done, p.after)
		done = p.done
	}
	if len(batch) > 0 {
		t.Fatalf("the tweet was not applied in %d deliveries", deliveries)
	}
	if stalledAt >= 0 { // the delivery after the stall completed the tweet
		for i := stalledAt; i < followers; i++ {
			again[i] = true
		}
	}
	if deliveries < 1 {
		t.Fatalf("the tweet was applied in one invocation: the test shows nothing (raise followers)")
	}
	t.Logf("applied in %d deliveries", deliveries+1)
	for i, u := range append([]string{"ann", "bob"}, fs...) {
		most := 1
		if (i == 0 && againAuthor) || again[i-2] {
			most = 2
		}
		if n := store.puts[u]; n < 1 || n > most {
			t.Errorf("%s's timeline was written %d times, want exactly once (at most twice in the page of a stalled delivery: %v)", u, n, most == 2)
		}
	}
	if len(store.puts) != followers+2 {
		t.Errorf("%d timelines written, want %d (ann, bob and ann's followers)", len(store.puts), followers+2)
	}
	want := []string{"ann|" + SortKey(at, "ann", "t1"), "bob|" + SortKey(at, "bob", "b1")}
	for _, f := range fs {
		want = append(want, f+"|"+SortKey(at, "ann", "t1"))
	}
	slices.Sort(want)
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("view has %d entries, want %d: ann's tweet in her and each follower's timeline, bob's in his", len(got), len(want))
	}

	// A duplicate delivery of the applied record (a whole-batch retry, a
	// duplicate invocation) finds its fan-out complete and writes nothing.
	before := store.total()
	if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("duplicate delivery: %v %v", resp, err)
	}
	if n := store.total() - before; n != 0 {
		t.Errorf("the duplicate delivery wrote %d timeline entries, want none", n)
	}
}

// TestTweetPastMaxFanOutIsSetAside: a tweet whose author has more followers
// than the bound is written to the author's timeline and to the first
// maxFanOut followers', then set aside naming dynamodb.Keys.authorId, and
// the shard moves on; a redelivery sets it aside again without writing.
func TestTweetPastMaxFanOutIsSetAside(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "capped")
	quarantine := quarantineTable(t, db)
	ctx := context.Background()
	at := "2026-12-10T00:00:00Z"
	rec, fs := celebrity(t, db, tb, "ann", "t1", at, 130)
	store := &countingStore{Client: db, table: tb.Timelines, puts: map[string]int{}}
	h := New(store, tb, WithSetAside(setaside.New(db, quarantine)), WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	h.maxFanOut = 70 // within the first page (fanOutPage = 100): the bound cuts a page
	for range 2 {
		if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("Handle = %v, %v; want the record set aside and the shard moving on", resp, err)
		}
	}
	want := []string{"ann|" + SortKey(at, "ann", "t1")}
	for _, f := range fs[:70] {
		want = append(want, f+"|"+SortKey(at, "ann", "t1"))
	}
	slices.Sort(want)
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("view has %d entries, want %d: ann's and her first 70 followers'", len(got), len(want))
	}
	if n := store.total(); n != 71 {
		t.Errorf("%d timeline writes over two deliveries, want 71: the redelivery writes nothing", n)
	}
	it, err := setaside.Load(ctx, db, quarantine, tweetsStream, "100")
	if err != nil || it == nil {
		t.Fatalf("record not set aside: %v", err)
	}
	if it.Field != "dynamodb.Keys.authorId" || it.Category != setaside.KindFanOutLimit ||
		!strings.Contains(it.Reason, "more than MaxFanOut (70)") || !strings.Contains(it.Reason, `"f00069"`) {
		t.Errorf("set aside with field %q, category %q, reason %q", it.Field, it.Category, it.Reason)
	}
}
