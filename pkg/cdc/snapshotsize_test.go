package cdc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/cdc"
)

// TestSnapshotRecordSizes: snapshot records are written as cdc writes the
// changelog — without HTML escaping, each checked against Kinesis' 1 MiB,
// in calls of at most 5 MiB — so an item cdc can publish the snapshot can
// publish too, and an item too big for a record is skipped by name while
// the others are published.
func TestSnapshotRecordSizes(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	tests := []struct {
		name     string
		items    int
		bio      string
		wantSkip string // the reason of the first item skipped ("" when none); one skipped, the others published
		maxSize  int    // of each record, when published
	}{
		// 300 KB of markup: 1.8 MB if '<' became "\u003c".
		{name: "markup", items: 1, bio: strings.Repeat("<", 300_000), maxSize: 301_000},
		// Eight items of 120 KB fit one Scan page; as JSON each is 720 KB,
		// 5.8 MB together: more than one PutRecords call takes.
		{name: "control characters", items: 8, bio: strings.Repeat("\x01", 120_000), maxSize: 721_000},
		// 200 KB of control characters is a 1.2 MB record.
		{name: "over 1 MiB", items: 1, bio: strings.Repeat("\x01", 200_000),
			wantSkip: "item u-0: the snapshot record would be 1200"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, events := fmt.Sprintf("profiles-size-%d", i), fmt.Sprintf("events-size-%d", i)
			createProfiles(t, db, table)
			createKinesis(t, kin, events, 1)
			if tt.wantSkip != "" { // an item that fits, beside the one that does not
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
					"userId": &ddbtypes.AttributeValueMemberS{Value: "small"}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
					t.Fatal(err)
				}
			}
			for j := range tt.items {
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
					"userId": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("u-%d", j)}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"},
					"bio": &ddbtypes.AttributeValueMemberS{Value: tt.bio}}}); err != nil {
					t.Fatal(err)
				}
			}
			_, counts, err := cdc.New(kin, events).Snapshot(ctx, db, streams, table)
			published := counts.Published
			if tt.wantSkip != "" {
				if err != nil || counts.Skipped != 1 || len(counts.SkippedItems) != 1 {
					t.Fatalf("Snapshot %+v %v, want one item skipped", counts, err)
				}
				if sk := counts.SkippedItems[0]; sk.Item != "userId=u-0" || !strings.Contains(sk.Reason, tt.wantSkip) || !strings.Contains(sk.Reason, "attribute bio") {
					t.Errorf("skipped %+v, want userId=u-0, its size and attribute bio (%q)", sk, tt.wantSkip)
				}
				if recs := rawKinesis(t, kin, events); published != 1 || len(recs) != 1 {
					t.Errorf("published %d (%d records on the stream), want the item that fits", published, len(recs))
				}
				return
			}
			if err != nil || published != tt.items {
				t.Fatalf("Snapshot published %d of %d items: %.300v", published, tt.items, err)
			}
			recs := rawKinesis(t, kin, events)
			if len(recs) != tt.items {
				t.Fatalf("%d records on the stream, want %d", len(recs), tt.items)
			}
			for k, b := range recs {
				if len(b) > tt.maxSize {
					t.Errorf("record of %s is %d bytes, want at most %d", k, len(b), tt.maxSize)
				}
			}
		})
	}
}
