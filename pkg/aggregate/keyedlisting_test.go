package aggregate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// A session that grows batch after batch keeps its keyed state's entry in
// the open-windows index where it is: DynamoDB bills two index write units
// each time an entry's key moves, which a session extended by every batch
// paid on every batch (1.4 of 5.3 write units per event of the deployed
// pipeline at 100 events/s over 1,000 keys). The session is still final, and
// on the output stream, at the batch whose watermark passes its end.
func TestGrowingSessionKeepsItsIndexEntry(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			var table string
			p, out := pipelineOn(t, `{"name":"kg","key":"key","value":"data.v","windows":[{"kind":"session","gap":"20s"}],
			  "aggregates":["count","sum"],"outOfOrderness":"30s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`,
				func(cfg *pipeline.Config, tbl string) *state.Views {
					table = tbl
					return state.NewViews(db, tbl, cfg.Aggregates)
				})
			ctx := context.Background()
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			f := &feed{t: t, p: p, base: base, path: path}
			send := f.batch
			listedUntil := func() string {
				t.Helper()
				got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
					Key: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: "kg#a"},
						"sk": &types.AttributeValueMemberS{Value: "session:20s|~state"},
					}})
				if err != nil {
					t.Fatal(err)
				}
				if got.Item == nil {
					t.Fatal("no keyed state item for key a")
				}
				v, _ := got.Item["openUntil"].(*types.AttributeValueMemberS)
				if v == nil {
					return ""
				}
				return v.Value
			}

			send(at{"a", 0, 1})
			first := listedUntil()
			if first == "" {
				t.Fatal("the session's state is not listed in the open-windows index")
			}
			for i, s := range []float64{10, 20, 30} {
				send(at{"a", s, 1})
				if got := listedUntil(); got != first {
					t.Errorf("after extending the session to %gs (batch %d): listed until %s, was %s; the index entry moved", s+20, i+2, got, first)
				}
				if got := out.of("a", base); len(got) != 0 {
					t.Errorf("the open session was emitted: %v", got)
				}
			}
			// Watermark 100s − 30s = 70s passes the session's end, 50s.
			send(at{"b", 100, 1})
			want := "final [0s,50s) r1 count 4 sum 4"
			if got := out.of("a", base); strings.Join(got, "\n") != want {
				t.Errorf("results of key a at watermark 70s:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
			}
			if got := listedUntil(); got != "" {
				t.Errorf("after the session is final, the state is still listed until %s", got)
			}
		})
	}
}

// A finalize that meets a growing session before its end (the watermark has
// passed where the state is listed, the session has grown since) finds
// nothing final and leaves the entry where it is: moving it, there and at
// the next fold, cost the deployed pipeline 0.35 write units an event. The
// session is still final, and on the output stream, once the watermark
// passes its real end.
func TestSessionFoundEarlyKeepsItsIndexEntry(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			var table string
			p, out := pipelineOn(t, `{"name":"ke","key":"key","value":"data.v","windows":[{"kind":"session","gap":"20s"}],
			  "aggregates":["count","sum"],"outOfOrderness":"0s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`,
				func(cfg *pipeline.Config, tbl string) *state.Views {
					table = tbl
					return state.NewViews(db, tbl, cfg.Aggregates)
				})
			base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			f := &feed{t: t, p: p, base: base, path: path}
			listed := func() string { t.Helper(); return listedUntilOf(t, table, "ke#a") }

			f.batch(at{"a", 0, 1})
			first := listed()
			if first == "" {
				t.Fatal("the session's state is not listed in the open-windows index")
			}
			// Each batch extends a's session, and its watermark passes
			// where a is listed: every finalize visits a early.
			for _, s := range []float64{15, 30, 45} {
				f.batch(at{"a", s, 1}, at{"b", s + 10, 1})
				if got := listed(); got != first {
					t.Errorf("after a's session grew to %gs with the watermark at %gs: listed until %s, was %s; the index entry moved", s+20, s+10, got, first)
				}
				if got := out.of("a", base); len(got) != 0 {
					t.Errorf("a's open session was emitted: %v", got)
				}
			}
			// Watermark 100s passes the session's end, 65s.
			f.batch(at{"b", 100, 1})
			want := "final [0s,1m5s) r1 count 4 sum 4"
			if got := out.of("a", base); strings.Join(got, "\n") != want {
				t.Errorf("results of key a at watermark 100s:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
			}
			if got := listed(); got != "" {
				t.Errorf("after the session is final, the state is still listed until %s", got)
			}
		})
	}
}

// listedUntilOf is where key pk's session state is listed in the
// open-windows index ("" if it is not).
func listedUntilOf(t *testing.T, table, pk string) string {
	t.Helper()
	got, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: "session:20s|~state"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Item == nil {
		t.Fatalf("no keyed state item %s", pk)
	}
	v, _ := got.Item["openUntil"].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}
