package cdc_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/cdc"
)

// TestSnapshotNamesEverySkippedItem: a table with more items no record can
// be made of than the result lists (cdc.MaxSkippedListed) has each of them
// named in the log, with the attribute at fault, so an operator can mend
// them all before the next run rather than twenty a run; the others are
// published.
func TestSnapshotNamesEverySkippedItem(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	bad := cdc.MaxSkippedListed + 5
	for i := range bad + 3 {
		version := ddbtypes.AttributeValue(&ddbtypes.AttributeValueMemberN{Value: "1"})
		if i < bad {
			version = &ddbtypes.AttributeValueMemberS{Value: "one"}
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: map[string]ddbtypes.AttributeValue{
			"userId": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("u-%02d", i)}, "version": version}}); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	h := cdc.New(kin, "events", cdc.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	_, counts, err := h.Snapshot(ctx, db, streams, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	if counts.Published != 3 || counts.Skipped != bad || len(counts.SkippedItems) != cdc.MaxSkippedListed {
		t.Errorf("counts %+v: want 3 published, %d skipped, %d listed", counts, bad, cdc.MaxSkippedListed)
	}
	for i := range bad {
		item := fmt.Sprintf("userId=u-%02d", i)
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, item) && strings.Contains(line, "version: must be an N attribute") {
				found = true
			}
		}
		if !found {
			t.Errorf("skipped item %s is not named in the log with its attribute", item)
		}
	}
}

// TestSnapshotSkipsAnItemWithoutAVersion: an item without a version
// attribute was published at the highest sequence number of the position,
// which outranked every version the item was given next: the join kept
// serving the snapshot's image after the item's version 2. It is skipped
// and named now, as a change without one is set aside.
func TestSnapshotSkipsAnItemWithoutAVersion(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	for _, item := range []map[string]ddbtypes.AttributeValue{
		{"userId": &ddbtypes.AttributeValueMemberS{Value: "u-versioned"}, "version": &ddbtypes.AttributeValueMemberN{Value: "2"}},
		{"userId": &ddbtypes.AttributeValueMemberS{Value: "u-bare"}, "plan": &ddbtypes.AttributeValueMemberS{Value: "free"}},
	} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	_, counts, err := cdc.New(kin, "events").Snapshot(ctx, db, streams, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	if counts.Published != 1 || counts.Skipped != 1 || len(counts.SkippedItems) != 1 ||
		counts.SkippedItems[0].Item != "userId=u-bare" || !strings.Contains(counts.SkippedItems[0].Reason, "version: is missing") {
		t.Errorf("counts %+v: want u-versioned published and u-bare skipped, its version named missing", counts)
	}
}
