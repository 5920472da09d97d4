package cdc_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestSnapshotThenChanges: a consumer that applies the snapshot and then
// the changelog by version ends with the table's contents, applying every
// (key, version) once and missing no change made after the snapshot.
func TestSnapshotThenChanges(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	streamArn := createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 2)

	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	put := func(user, version, plan string) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"),
			Item: map[string]ddbtypes.AttributeValue{"userId": s(user), "version": n(version), "plan": s(plan)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Before the snapshot.
	put("u-1", "1", "free")
	put("u-2", "1", "free")
	put("u-1", "2", "pro")

	h := cdc.New(kin, "events")
	pos, counts, err := h.Snapshot(ctx, db, streams, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	if published := counts.Published; published != 2 || counts.Skipped != 0 {
		t.Errorf("published %d snapshot records, want 2", published)
	}
	if pos.StreamArn != streamArn || len(pos.Shards) == 0 {
		t.Fatalf("position %+v: want the table's stream %s and its shards", pos, streamArn)
	}

	// After the snapshot.
	put("u-2", "2", "team")
	put("u-3", "1", "free")
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("profiles"), Key: map[string]ddbtypes.AttributeValue{"userId": s("u-1")}}); err != nil {
		t.Fatal(err)
	}
	// The cdc function reads the table's stream from TRIM_HORIZON.
	ev := streamEvent(t, streams, streamArn)
	if resp, err := h.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}

	// The position splits the stream: the three earlier changes are at or
	// before it, the three later ones after it.
	var last string
	for _, seq := range pos.Shards {
		if last == "" || stream.CompareSequence(seq, last) > 0 {
			last = seq
		}
	}
	var after int
	for _, r := range ev.Records {
		if stream.CompareSequence(r.Change.SequenceNumber, last) > 0 {
			after++
		}
	}
	if after != 3 {
		t.Errorf("%d changes after position %v, want 3", after, pos.Shards)
	}

	// The cdc function lagged: the changes from before the snapshot reach
	// the events stream after it, the hard case for applying twice. The
	// consumer reads each shard in order and applies a record only above
	// the version it holds for the key.
	type held struct {
		version string
		image   map[string]any
	}
	state := map[string]held{}
	applied := map[string]int{}
	var snapshots int
	for _, c := range readKinesis(t, kin, "events") {
		if c.env.Type == cdc.TypeSnapshot {
			snapshots++
			if c.data.SnapshotOf == nil || c.data.SnapshotOf.StreamArn != streamArn {
				t.Errorf("snapshot record %s: snapshotOf %+v, want the position", c.env.ID, c.data.SnapshotOf)
			}
		}
		cur, ok := state[c.env.Key]
		if ok && stream.CompareSequence(c.data.Version.String(), cur.version) <= 0 {
			continue
		}
		state[c.env.Key] = held{c.data.Version.String(), c.data.Image}
		applied[c.env.Key+"@"+c.data.Version.String()]++
	}
	if snapshots != 2 {
		t.Errorf("%d snapshot records on the stream, want 2", snapshots)
	}
	want := map[string]int{"u-1@2": 1, "u-2@1": 1, "u-2@2": 1, "u-3@1": 1, "u-1@3": 1}
	for k, n := range applied {
		if want[k] != n {
			t.Errorf("applied %s %d times, want %d", k, n, want[k])
		}
	}
	for k := range want {
		if applied[k] == 0 {
			t.Errorf("never applied %s: a gap", k)
		}
	}
	if st := state["u-1"]; st.image != nil {
		t.Errorf("u-1 = %v, want deleted (a tombstone)", st.image)
	}
	if st := state["u-2"]; st.image["plan"] != "team" {
		t.Errorf("u-2 = %v, want plan team", st.image)
	}
}
