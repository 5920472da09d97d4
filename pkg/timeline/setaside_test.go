package timeline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/setaside"
)

const tweetsStream = "arn:aws:dynamodb:us-east-1:123456789012:table/tweets/stream/2026-11-01T00:00:00.000"

func quarantineTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := uniqueName("quarantine")
	if err := setaside.CreateTable(context.Background(), db, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func tweetRecord(seq, author, id string, img map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventID: "ev-" + seq, EventName: "INSERT", EventSourceArn: tweetsStream,
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq,
			Keys:     map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr(author), AttrTweetID: sattr(id)},
			NewImage: img}}
}

// TestRecordsThatCanNeverBeAppliedAreSetAside: unknown keys, a tweet
// without createdAt, and tweets whose timeline item would be over
// DynamoDB's 400 KB (by this package's size check, and as the stand-in
// refuses it) are set aside in the quarantine table with the field at
// fault; the records after them in the same batch are applied and nothing
// is reported failed, so the shard moves on. A follow is applied to every
// tweet that fits and set aside naming the one that does not.
func TestRecordsThatCanNeverBeAppliedAreSetAside(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "aside")
	quarantine := quarantineTable(t, db)
	ctx := context.Background()
	at := "2026-11-01T00:00:01Z"
	// 404,940 bytes of text: the tweet fits the stand-in's item limit
	// (405,000 as it counts), its timeline item, 37 bytes more, does not.
	nearLimit := strings.Repeat("x", 404_940)
	// A list of 10,000 strings of 40 bytes: 410,003 bytes as DynamoDB
	// counts (3 per list, 1 per element), 400,000 as the stand-in does, so
	// only this package's check keeps its timeline item out.
	var letters []types.AttributeValue
	for range 10_000 {
		letters = append(letters, s(strings.Repeat("a", 40)))
	}
	longID := strings.Repeat("t", 1000)
	tweets := []map[string]types.AttributeValue{
		{AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from ann")},
		{AttrAuthorID: s("ann"), AttrTweetID: s("t-big"), AttrCreatedAt: s(at), AttrText: s(nearLimit)},
		{AttrAuthorID: s("ann"), AttrTweetID: s("t-list"), AttrCreatedAt: s(at), AttrText: &types.AttributeValueMemberL{Value: letters}},
		{AttrAuthorID: s("ann"), AttrTweetID: s("t2"), AttrCreatedAt: s(at), AttrText: s("hello from ann")},
		{AttrAuthorID: s("cy"), AttrTweetID: s(longID), AttrCreatedAt: s(at), AttrText: s("hello from cy")},
	}
	for _, it := range tweets {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Follows, Item: map[string]types.AttributeValue{
		AttrFollowerID: s("bob"), AttrFolloweeID: s("ann")}}); err != nil {
		t.Fatal(err)
	}
	img := func(id string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr(id), AttrCreatedAt: sattr(at)}
	}
	followKeys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")}
	recs := []events.DynamoDBEventRecord{
		tweetRecord("100", "ann", "t1", img("t1")),
		{EventID: "ev-200", EventName: "INSERT", EventSourceArn: tweetsStream, Change: events.DynamoDBStreamRecord{SequenceNumber: "200",
			Keys: map[string]events.DynamoDBAttributeValue{"id": sattr("x")}}},
		tweetRecord("300", "ann", "t-nodate", map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann")}),
		// '#' ends createdAt in the view's sort key: taken, this tweet's
		// entry could be another tweet's ("…Z#a" + "b" against "…Z" + "a#b").
		tweetRecord("350", "ann", "b", map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrCreatedAt: sattr(at + "#a")}),
		tweetRecord("400", "ann", "t-big", img("t-big")),
		tweetRecord("500", "ann", "t-list", img("t-list")),
		{EventID: "ev-600", EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/follows/stream/x",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "600", Keys: followKeys, NewImage: followKeys}},
		tweetRecord("700", "ann", "t2", img("t2")),
		// A tweetId that fits the Tweets table's key, but with the time
		// and author not the timeline's sort key: the field to shorten is
		// tweetId, not createdAt.
		tweetRecord("800", "cy", longID, map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("cy"), AttrTweetID: sattr(longID), AttrCreatedAt: sattr(at)}),
		// No such operation: it was applied as an insert.
		func() events.DynamoDBEventRecord {
			r := tweetRecord("900", "ann", "t9", img("t9"))
			r.EventName = "TRUNCATE"
			return r
		}(),
		// An image of ann's tweet under bob's Keys: it was written to
		// bob's timeline.
		tweetRecord("950", "bob", "t1", img("t1")),
	}
	h := New(db, tb, WithSetAside(setaside.New(db, quarantine)))
	resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v; want no failures: the shard moves on", resp.BatchItemFailures, err)
	}
	want := []string{"ann|" + at + "#3#ann#t1", "ann|" + at + "#3#ann#t2", "bob|" + at + "#3#ann#t1", "bob|" + at + "#3#ann#t2"} // SortKey spelt out
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("view %v, want %v", got, want)
	}
	for _, w := range []struct {
		source, seq, field, kind, saying string
	}{
		{tweetsStream, "200", "dynamodb.Keys", setaside.KindInvalid, "neither a tweet"},
		{tweetsStream, "300", "dynamodb.NewImage.createdAt", setaside.KindInvalid, "missing or not a string"},
		{tweetsStream, "350", "dynamodb.NewImage.createdAt", setaside.KindInvalid, "holds '#'"},
		{tweetsStream, "400", "dynamodb.NewImage.text", setaside.KindOutputTooLarge, "refused by DynamoDB"},
		{tweetsStream, "500", "dynamodb.NewImage.text", setaside.KindOutputTooLarge, "the timeline item would be 410"},
		{"arn:aws:dynamodb:us-east-1:123456789012:table/follows/stream/x", "600", "dynamodb.NewImage.followeeId", setaside.KindOutputTooLarge, "a stored tweet of the followee, by its text: "},
		{tweetsStream, "900", "eventName", setaside.KindInvalid, `"TRUNCATE" is not INSERT, MODIFY or REMOVE`},
		{tweetsStream, "950", "dynamodb.NewImage.authorId", setaside.KindInvalid, "holds another authorId than the record's Keys"},
		{tweetsStream, "800", "dynamodb.NewImage.tweetId", setaside.KindOutputTooLarge, "so the tweet is left out of cy's (tweet cy/tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt…)"},
	} {
		it, err := setaside.Load(ctx, db, quarantine, w.source, w.seq)
		if err != nil || it == nil {
			t.Errorf("record %s not quarantined: %v", w.seq, err)
			continue
		}
		if it.Kind != setaside.ItemSetAside || it.Field != w.field || it.Category != w.kind || !strings.Contains(it.Reason, w.saying) {
			t.Errorf("record %s: field %q kind %s reason %q; want field %q, %s, saying %q", w.seq, it.Field, it.Category, it.Reason, w.field, w.kind, w.saying)
		}
		var back events.DynamoDBEventRecord
		if err := json.Unmarshal(it.Data, &back); err != nil || back.Change.SequenceNumber != w.seq {
			t.Errorf("record %s: data is not its stream record: %v", w.seq, err)
		}
	}
	if it, _ := setaside.Load(ctx, db, quarantine, "arn:aws:dynamodb:us-east-1:123456789012:table/follows/stream/x", "600"); it != nil &&
		(!strings.Contains(it.Reason, "bob's (tweet ann/t-list)") || !strings.Contains(it.Reason, "bob's (tweet ann/t-big)")) {
		t.Errorf("the follow's reason %q does not name both tweets left out", it.Reason)
	}
}

// throttledTimelines fails every PutItem on the timelines table as
// DynamoDB does under throttling (after the SDK's own retries).
type throttledTimelines struct {
	*dynamodb.Client
	table string
}

func (c *throttledTimelines) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) == c.table {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("The level of configured provisioned throughput for the table was exceeded")}
	}
	return c.Client.PutItem(ctx, in, opts...)
}

// TestThrottledStoreIsRetriedNotSetAside: a throttled write is transient:
// the record is the batch item failure (Lambda retries it), the records
// before it are applied, and nothing is set aside.
func TestThrottledStoreIsRetriedNotSetAside(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "throttle")
	quarantine := quarantineTable(t, db)
	ctx := context.Background()
	at := "2026-11-01T00:00:01Z"
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.Tweets, Item: map[string]types.AttributeValue{
		AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from ann")}}); err != nil {
		t.Fatal(err)
	}
	img := map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrTweetID: sattr("t1"), AttrCreatedAt: sattr(at)}
	recs := []events.DynamoDBEventRecord{
		{EventID: "ev-1", EventName: "INSERT", EventSourceArn: tweetsStream, Change: events.DynamoDBStreamRecord{SequenceNumber: "100",
			Keys: map[string]events.DynamoDBAttributeValue{"id": sattr("x")}}}, // bad: set aside
		tweetRecord("200", "ann", "t1", img), // throttled: retried
		tweetRecord("300", "ann", "t1", img),
	}
	h := New(&throttledTimelines{Client: db, table: tb.Timelines}, tb, WithSetAside(setaside.New(db, quarantine)))
	resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "200" {
		t.Fatalf("Handle = %v, %v; want record 200 reported for a retry", resp.BatchItemFailures, err)
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || str(out.Items[0], "sequenceNumber") != "100" {
		t.Errorf("quarantine holds %d items; want only record 100, never the throttled one", len(out.Items))
	}
	// The throttle lifts: the redelivered batch from 200 applies.
	h = New(db, tb, WithSetAside(setaside.New(db, quarantine)))
	if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs[1:]}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %v, %v", resp.BatchItemFailures, err)
	}
	if got := view(t, db, tb.Timelines); !slices.Equal(got, []string{"ann|" + SortKey(at, "ann", "t1")}) {
		t.Errorf("view %v after the retry", got)
	}
}

// TestFollowLeavesOutAStoredTweetWhoseTimeHoldsAHash: a tweet record whose
// createdAt holds '#' is set aside, but the tweet stays in its table, and a
// follow reads the followee's tweets from there: its entry could take
// another tweet's sort key. It is left out of the follower's timeline and
// the follow is set aside naming its followeeId and the tweet's createdAt;
// the followee's other tweets are applied.
func TestFollowLeavesOutAStoredTweetWhoseTimeHoldsAHash(t *testing.T) {
	at := "2026-11-01T00:00:01Z"
	view, it, err := followOverStoredTweets(t, "hash", at,
		map[string]types.AttributeValue{AttrAuthorID: s("dan"), AttrTweetID: s("t2"), AttrCreatedAt: s(at + "#3#dan"), AttrText: s("hello from dan")})
	if want := []string{"carl|" + SortKey(at, "dan", "t1")}; !slices.Equal(view, want) {
		t.Errorf("view %v, want %v", view, want)
	}
	if err != nil || it == nil || it.Field != "dynamodb.NewImage.followeeId" || it.Category != setaside.KindInvalid || !strings.Contains(it.Reason, "by its createdAt: ") ||
		!strings.Contains(it.Reason, "holds '#'") || !strings.Contains(it.Reason, "carl's (tweet dan/t2)") {
		t.Errorf("the follow set aside as %+v (%v); want field dynamodb.NewImage.followeeId (the follow holds no createdAt), invalid, naming the tweet's createdAt and carl's entry of dan/t2", it, err)
	}
}

// followOverStoredTweets stores dan's tweet t1 (at at) and tweets, has
// carl follow dan, and returns the timelines view and how the follow was
// set aside (nil if it was not).
func followOverStoredTweets(t *testing.T, name, at string, tweets ...map[string]types.AttributeValue) ([]string, *setaside.Item, error) {
	t.Helper()
	db := sharedDB
	tb := createTables(t, db, name)
	quarantine := quarantineTable(t, db)
	ctx := context.Background()
	items := append([]map[string]types.AttributeValue{
		{AttrAuthorID: s("dan"), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from dan")},
		{AttrFollowerID: s("carl"), AttrFolloweeID: s("dan")},
	}, tweets...)
	for _, it := range items {
		table := tb.Tweets
		if _, ok := it[AttrFollowerID]; ok {
			table = tb.Follows
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("carl"), AttrFolloweeID: sattr("dan")}
	follows := "arn:aws:dynamodb:us-east-1:123456789012:table/follows/stream/x"
	h := New(db, tb, WithSetAside(setaside.New(db, quarantine)))
	resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventID: "ev-1", EventName: "INSERT", EventSourceArn: follows,
		Change: events.DynamoDBStreamRecord{SequenceNumber: "100", Keys: keys, NewImage: keys}}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v; want no failures", resp.BatchItemFailures, err)
	}
	it, err := setaside.Load(ctx, db, quarantine, follows, "100")
	return view(t, db, tb.Timelines), it, err
}

// TestRecordNotSetAsideLogsABoundedReason: a tweet whose createdAt holds
// '#' can never be applied; when it cannot be set aside either (no
// quarantine table, or its writes throttled) it is reported failed and
// logged on every redelivery. The line names the record and the field but
// repeats only the start of createdAt, however long the image's value.
func TestRecordNotSetAsideLogsABoundedReason(t *testing.T) {
	var buf bytes.Buffer
	h := New(nil, Tables{Tweets: "tweets", Follows: "follows", Followers: "followers", Timelines: "timelines"},
		WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	createdAt := "2026-11-01T00:00:01Z#" + strings.Repeat("x", 100<<10)
	rec := tweetRecord("350", "ann", "b", map[string]events.DynamoDBAttributeValue{AttrAuthorID: sattr("ann"), AttrCreatedAt: sattr(createdAt)})
	resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Handle = %v, %v; want record 350 reported failed (nowhere to set it aside)", resp.BatchItemFailures, err)
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "record not applied") {
			line = l
		}
	}
	if !strings.Contains(line, "dynamodb.NewImage.createdAt") || !strings.Contains(line, "holds '#'") {
		t.Fatalf("log %.500q; want a line naming createdAt and the '#'", buf.String())
	}
	if len(line) > 2048 {
		t.Errorf("the line is %d bytes for a createdAt of %d; want at most 2048: %.300s…", len(line), len(createdAt), line)
	}
}

// TestFollowLeavesOutAStoredTweetWithoutATime: a tweet record without a
// string createdAt is set aside and its tweet is in no timeline, but the
// tweet stays in its table, and a follow reads the followee's tweets from
// there. Written with an empty time, the entry would sit at the bottom of
// the new follower's timeline only, and stay there after the tweet is
// deleted (its REMOVE, without a time either, is set aside). It is left out
// and the follow set aside naming its followeeId and the tweet's createdAt;
// the other tweets are applied.
func TestFollowLeavesOutAStoredTweetWithoutATime(t *testing.T) {
	at := "2026-11-01T00:00:01Z"
	view, it, err := followOverStoredTweets(t, "notime", at,
		map[string]types.AttributeValue{AttrAuthorID: s("dan"), AttrTweetID: s("t2"), AttrText: s("no time")},
		map[string]types.AttributeValue{AttrAuthorID: s("dan"), AttrTweetID: s("t3"), AttrCreatedAt: &types.AttributeValueMemberN{Value: "1793491201"}, AttrText: s("a number for a time")})
	if want := []string{"carl|" + SortKey(at, "dan", "t1")}; !slices.Equal(view, want) {
		t.Errorf("view %v, want %v", view, want)
	}
	if err != nil || it == nil || it.Field != "dynamodb.NewImage.followeeId" || it.Category != setaside.KindInvalid || !strings.Contains(it.Reason, "by its createdAt: the stored tweet's createdAt is missing or not a string") {
		t.Errorf("the follow set aside as %+v (%v); want field dynamodb.NewImage.followeeId, invalid, the tweet's createdAt missing or not a string", it, err)
	}
}
