package aggregate_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

const listingPipeline = `{"name":"lst","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
  "aggregates":["count","sum"],"outOfOrderness":"0s","latePolicy":"drop","dedupeHorizon":"0s"}`

// listingFixture is listingPipeline on an in-process table of its own.
func listingFixture(t *testing.T) (*aggregate.Processor, *outputLog, *memdb.DB, string) {
	t.Helper()
	var (
		mem   *memdb.DB
		table string
	)
	p, out := pipelineOn(t, listingPipeline, func(cfg *pipeline.Config, tbl string) *state.Views {
		mem, table = memdb.New(map[string]memdb.Schema{tbl: memdb.ViewsTable}), tbl
		return state.NewViews(mem, tbl, cfg.Aggregates)
	})
	return p, out, mem, table
}

// listingsIn is the window listings in table: their sort keys (window end,
// kind, window, chunk) and keys.
func listingsIn(mem *memdb.DB, table string) map[string]string {
	out := map[string]string{}
	for _, it := range mem.Items(table) {
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		if !strings.HasPrefix(pk, "~open#") {
			continue
		}
		keys := it["keys"].(*types.AttributeValueMemberSS).Value
		out[it["sk"].(*types.AttributeValueMemberS).Value] = strings.Join(keys, ",")
	}
	return out
}

// Tumbling and hopping windows are found by their listings, one item per
// window naming its keys, not by an index entry per key and window: no
// window item enters the open-windows index, a window's listing is there
// while it is open, and gone once its results are on the stream.
func TestWindowsAreFoundByTheirListings(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			p, out, mem, table := listingFixture(t)
			base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
			f := &feed{t: t, p: p, base: base, path: path}

			f.batch(at{"a", 10, 1}, at{"b", 20, 2}, at{"c", 30, 3})
			got := listingsIn(mem, table)
			if len(got) != 1 {
				t.Fatalf("after one minute's records: listings %v, want one for the minute", got)
			}
			for sk, keys := range got {
				if !strings.HasPrefix(sk, "2026-12-02T10:01:00.000Z|tumbling:1m0s|") || keys != "a,b,c" {
					t.Errorf("listing %s of %s, want the window ending 10:01 with a, b and c", sk, keys)
				}
			}
			for _, it := range mem.Items(table) {
				if _, ok := it["openUntil"]; ok {
					t.Errorf("item %v entered the open-windows index", it["sk"])
				}
			}
			// The watermark passes 10:01: the minute's windows are final,
			// published, and their listing is deleted.
			f.batch(at{"d", 70, 4})
			for _, k := range []struct{ key, want string }{{"a", "count 1 sum 1"}, {"b", "count 1 sum 2"}, {"c", "count 1 sum 3"}} {
				if got := strings.Join(out.of(k.key, base), "\n"); !strings.HasSuffix(got, k.want) || !strings.HasPrefix(got, "final [0s,1m0s) r1") {
					t.Errorf("results of %s: %q, want its final minute with %s", k.key, got, k.want)
				}
			}
			got = listingsIn(mem, table)
			if len(got) != 1 {
				t.Fatalf("after the first minute closed: listings %v, want only the second minute's", got)
			}
			for sk, keys := range got {
				if !strings.HasPrefix(sk, "2026-12-02T10:02:00.000Z|") || keys != "d" {
					t.Errorf("listing %s of %s, want the window ending 10:02 with d", sk, keys)
				}
			}
		})
	}
}

// failingListings refuses the first n listing writes, as a throttled
// partition would.
type failingListings struct {
	memdb.Client
	n atomic.Int64
}

func (f *failingListings) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "~open#") && f.n.Add(-1) >= 0 {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected: the listing's partition is throttled")}
	}
	return f.Client.UpdateItem(ctx, in, opts...)
}

// A window written but not listed would never be finalized: a failed
// listing fails the records of its window (per batch) or the final
// invocation (per interval), and the retry, which finds the window
// applied, lists it. Each record still counts once.
func TestAFailedListingIsRetried(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			store := &failingListings{}
			p, out := pipelineOn(t, listingPipeline, func(cfg *pipeline.Config, tbl string) *state.Views {
				store.Client = memdb.New(map[string]memdb.Schema{tbl: memdb.ViewsTable})
				return state.NewViews(store, tbl, cfg.Aggregates)
			})
			base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
			f := &feed{t: t, p: p, base: base, path: path}
			ctx := context.Background()
			store.n.Store(1)
			if path == perBatch {
				ev := f.records(at{"a", 10, 1}, at{"b", 20, 2})
				resp, err := p.HandleBatch(ctx, ev)
				if err != nil || len(resp.BatchItemFailures) == 0 {
					t.Fatalf("a batch whose listing failed: %+v %v, want its records failed", resp, err)
				}
				if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("the retry: %+v %v", resp, err)
				}
			} else {
				f.carry(at{"a", 10, 1}, at{"b", 20, 2})
				final := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: feedShard, State: f.state, IsFinalInvokeForWindow: true}}
				if _, err := p.HandleInterval(ctx, final); err == nil {
					t.Fatal("a flush whose listing failed succeeded")
				}
				if _, err := p.HandleInterval(ctx, final); err != nil {
					t.Fatalf("the retried flush: %v", err)
				}
				f.state = nil
			}
			f.batch(at{"z", 70, 9})
			for _, k := range []struct{ key, want string }{{"a", "final [0s,1m0s) r1 count 1 sum 1"}, {"b", "final [0s,1m0s) r1 count 1 sum 2"}} {
				if got := strings.Join(out.of(k.key, base), "\n"); got != k.want {
					t.Errorf("results of %s: %q, want %q", k.key, got, k.want)
				}
			}
		})
	}
}

// A window an earlier version wrote is in the open-windows index (openIn and
// openUntil) and has no listing: a finalize after the upgrade still finds it
// there, makes it final and publishes it.
func TestAWindowListedInTheIndexByAnEarlierVersionIsFinalized(t *testing.T) {
	p, out, mem, table := listingFixture(t)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f := &feed{t: t, p: p, base: base, path: perBatch}
	f.batch(at{"a", 10, 5})
	ctx := context.Background()
	// As the earlier version left it: listed in the index, no listing.
	for _, it := range mem.Items(table) {
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		key := map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}
		switch {
		case strings.HasPrefix(pk, "~open#"):
			if _, err := mem.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
				t.Fatal(err)
			}
		case pk == "lst#a":
			if _, err := mem.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
				UpdateExpression:          aws.String("SET openUntil = :u"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberS{Value: "2026-12-02T10:01:00.000Z"}},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := listingsIn(mem, table); len(got) != 0 {
		t.Fatalf("listings %v left", got)
	}
	f.batch(at{"z", 70, 1})
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 1 sum 5"; got != want {
		t.Errorf("results of a: %q, want %q", got, want)
	}
	for _, it := range mem.Items(table) {
		if it["pk"].(*types.AttributeValueMemberS).Value == "lst#a" {
			if _, listed := it["openIn"]; listed {
				t.Errorf("a's published window is still listed: %v", it)
			}
		}
	}
}
