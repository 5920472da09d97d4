package timeline

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestTweetsOfOneIdByTwoAuthorsAreTwoEntries: a tweet id is unique only
// per author, so alice's and mallory's t1 of the same second are two
// entries of a timeline that follows both, and mallory deleting hers
// leaves alice's.
func TestTweetsOfOneIdByTwoAuthorsAreTwoEntries(t *testing.T) {
	db, tb, put := sortKeyTables(t, "sortkey")
	ctx := context.Background()
	at := "2026-12-01T09:00:00Z"
	for _, followee := range []string{"alice", "mallory"} {
		put(tb.Follows, map[string]types.AttributeValue{AttrFollowerID: s("u"), AttrFolloweeID: s(followee)})
		put(tb.Tweets, map[string]types.AttributeValue{AttrAuthorID: s(followee), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from " + followee)})
	}
	img := map[string]events.DynamoDBAttributeValue{AttrCreatedAt: sattr(at)}
	h := New(db, tb)
	handle := func(recs ...events.DynamoDBEventRecord) {
		t.Helper()
		if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("Handle: %v %v", resp.BatchItemFailures, err)
		}
	}
	handle(tweetRecord("100", "alice", "t1", img), tweetRecord("200", "mallory", "t1", img))
	want := []string{"alice|" + SortKey(at, "alice", "t1"), "mallory|" + SortKey(at, "mallory", "t1"),
		"u|" + SortKey(at, "alice", "t1"), "u|" + SortKey(at, "mallory", "t1")}
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Fatalf("view %v, want %v: u follows both authors", got, want)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &tb.Tweets, Key: map[string]types.AttributeValue{AttrAuthorID: s("mallory"), AttrTweetID: s("t1")}}); err != nil {
		t.Fatal(err)
	}
	remove := tweetRecord("300", "mallory", "t1", nil)
	remove.EventName, remove.Change.OldImage = "REMOVE", img
	handle(remove)
	want = []string{"alice|" + SortKey(at, "alice", "t1"), "u|" + SortKey(at, "alice", "t1")}
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Errorf("view %v after mallory deleted her t1, want %v", got, want)
	}
}

// TestLegacyEntriesAreReplaced: a view written before the sort key named
// the author ("<createdAt>#<tweetId>") holds each entry once after the
// upgrade: a tweet written again replaces its legacy entry, and an
// unfollow removes it.
func TestLegacyEntriesAreReplaced(t *testing.T) {
	db, tb, put := sortKeyTables(t, "legacy")
	ctx := context.Background()
	at := "2026-11-29T10:41:05Z"
	put(tb.Tweets, map[string]types.AttributeValue{AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from ann")})
	for _, u := range []string{"ann", "bob"} {
		put(tb.Timelines, map[string]types.AttributeValue{AttrUserID: s(u), AttrSortKey: s(at + "#t1"),
			AttrAuthorID: s("ann"), AttrTweetID: s("t1"), AttrCreatedAt: s(at), AttrText: s("hello from ann")})
	}
	h := New(db, tb)
	// ann edits her tweet (a MODIFY): her entry is written again, under
	// the new key; bob unfollowed her: his entry goes.
	modify := tweetRecord("100", "ann", "t1", map[string]events.DynamoDBAttributeValue{AttrCreatedAt: sattr(at)})
	modify.EventName = "MODIFY"
	unfollow := events.DynamoDBEventRecord{EventID: "ev-200", EventName: "REMOVE", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/follows/stream/x",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "200",
			Keys:     map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")},
			OldImage: map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr("bob"), AttrFolloweeID: sattr("ann")}}}
	if resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{modify, unfollow}}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("Handle: %v %v", resp.BatchItemFailures, err)
	}
	if got, want := view(t, db, tb.Timelines), []string{"ann|" + SortKey(at, "ann", "t1")}; !slices.Equal(got, want) {
		t.Errorf("view %v, want %v: each entry once, under the new key", got, want)
	}
}

// sortKeyTables is a stand-in with the timeline's tables, and a put that
// writes an item to one of them.
func sortKeyTables(t *testing.T, prefix string) (*dynamodb.Client, Tables, func(string, map[string]types.AttributeValue)) {
	t.Helper()
	db := sharedDB
	tb := createTables(t, db, prefix)
	put := func(table string, item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	return db, tb, put
}
