package es_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/es"
)

// TestSnapshotAheadOfTheLog: the events table restored to an earlier
// point (its last versions gone) while the snapshots table still holds a
// snapshot past the log's end. A command must not decide on the
// snapshot's state and append after it — that leaves a gap in the log no
// load, projection or rebuild can cross, and a state holding events the
// log no longer has — but fail with es.ErrAheadOfLog (the API's 500: no
// retry succeeds until the snapshot is deleted), appending nothing.
func TestSnapshotAheadOfTheLog(t *testing.T) {
	ctx := context.Background()
	db, store := newStore(t)
	x := es.NewExecutor[account](store, ledger{}, es.WithSnapshotEvery[account](3))
	for i := 1; i <= 7; i++ {
		if res := run(t, x, cmd(fmt.Sprintf("c%d", i), "Deposit", "a1", 10, "")); res.Version != int64(i) {
			t.Fatalf("deposit %d: %+v", i, res)
		}
	}
	if snap, err := store.Snapshot(ctx, "a1"); err != nil || snap == nil || snap.Version != 6 {
		t.Fatalf("snapshot %+v (%v), want one at version 6", snap, err)
	}
	// The restore: versions 5 to 7 are gone from the log.
	for v := 5; v <= 7; v++ {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(store.Tables().Events), Key: map[string]types.AttributeValue{
			es.AttrAggregateID: &types.AttributeValueMemberS{Value: "a1"}, es.AttrVersion: &types.AttributeValueMemberN{Value: strconv.Itoa(v)}}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := x.Execute(ctx, cmd("c8", "Deposit", "a1", 10, ""))
	if !errors.Is(err, es.ErrAheadOfLog) {
		t.Errorf("a command on an aggregate whose snapshot (version 6) is past its log (version 4): %d %s, %v; want es.ErrAheadOfLog", res.HTTPStatus, res.Body, err)
	}
	evs, err := store.Events(ctx, "a1", 0, 0)
	if err != nil || len(evs) != 4 {
		var versions []int64
		for _, e := range evs {
			versions = append(versions, e.Version)
		}
		t.Fatalf("the log after the command: versions %v (%v); want 1 to 4, nothing appended", versions, err)
	}
	if _, _, err := x.Load(ctx, "a1"); !errors.Is(err, es.ErrAheadOfLog) {
		t.Errorf("load: %v, want es.ErrAheadOfLog", err)
	}
}
