package timeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestFollowOfLongIDsSavesItsProgress follows, from a user id of 1,024
// bytes, a user id of 1,020 bytes: keys the Follows table and its
// followers index take (a sort key holds 1,024 bytes). The follower's
// timeline is longer than a page, so the follow record saves its
// progress; the progress item's key (both ids, over 2,048 bytes) must
// still be one DynamoDB takes, or the save fails on every delivery and the
// record holds its shard for good.
func TestFollowOfLongIDsSavesItsProgress(t *testing.T) {
	db := sharedDB
	tb := createTables(t, db, "longids")
	ctx := context.Background()
	follower, followee := strings.Repeat("f", 1024), strings.Repeat("a", 1020)
	reqs := map[string][]types.WriteRequest{
		tb.Follows: {{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{AttrFollowerID: s(follower), AttrFolloweeID: s(followee)}}}},
	}
	var want []string
	for i := range followScanPage + 1 {
		id, at := fmt.Sprintf("c%05d", i), fmt.Sprintf("2026-12-09T00:%02d:%02dZ", i/60, i%60)
		reqs[tb.Timelines] = append(reqs[tb.Timelines], types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			AttrUserID: s(follower), AttrSortKey: s(SortKey(at, "carl", id)), AttrAuthorID: s("carl"), AttrTweetID: s(id), AttrCreatedAt: s(at), AttrText: s("hello from carl")}}})
		want = append(want, follower+"|"+SortKey(at, "carl", id))
	}
	for table, all := range reqs {
		for chunk := range slices.Chunk(all, 25) {
			if out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: chunk}}); err != nil || len(out.UnprocessedItems) > 0 {
				t.Fatalf("writing %s: %v", table, err)
			}
		}
	}
	slices.Sort(want)

	h := New(db, tb)
	rec := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "100",
		Keys: map[string]events.DynamoDBAttributeValue{AttrFollowerID: sattr(follower), AttrFolloweeID: sattr(followee)}}}
	for delivery := 1; ; delivery++ {
		resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		if delivery == 5 {
			t.Fatalf("the follow record still fails after %d deliveries", delivery)
		}
	}
	if got := view(t, db, tb.Timelines); !slices.Equal(got, want) {
		t.Fatalf("timeline has %d entries, want carl's %d", len(got), len(want))
	}
}

// TestProgressKeysFitAPartitionKey: a tweet's progress key from ids at
// their limits (an author's 2,048 bytes, a tweet's 1,024) is one DynamoDB
// takes, and two such tweets keep two keys.
func TestProgressKeysFitAPartitionKey(t *testing.T) {
	author := strings.Repeat("a", 2048)
	k1, k2 := fanOutTweetKey(author, strings.Repeat("t", 1024)), fanOutTweetKey(author, strings.Repeat("t", 1023)+"u")
	if len(k1) > 2048 || len(k2) > 2048 || k1 == k2 {
		t.Fatalf("keys of %d and %d bytes (equal: %v); want two keys of at most 2,048", len(k1), len(k2), k1 == k2)
	}
	if k := fanOutTweetKey("ann", "t1"); k != "3#ann#t1" {
		t.Fatalf("a short key is %q, want it as before (progress saved before keeps its item)", k)
	}
}
