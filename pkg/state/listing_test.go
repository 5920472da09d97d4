package state_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

func minuteAt(n int) window.Window {
	start := minute.Start.Add(time.Duration(n) * time.Minute)
	return window.Window{Start: start, End: start.Add(time.Minute)}
}

func keysOf(ls []state.Listing) map[string][]string {
	out := map[string][]string{}
	for _, l := range ls {
		id := l.Kind + "|" + l.Window.ID()
		out[id] = append(out[id], l.Keys...)
		sort.Strings(out[id])
	}
	return out
}

// A finalize at a watermark finds the windows that end by it, with every
// key any write listed for them, and no window that ends later.
func TestListingsFindTheWindowsAWatermarkCloses(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	for _, l := range []struct {
		n    int
		keys []string
	}{{0, []string{"b", "a"}}, {1, []string{"c"}}, {0, []string{"a", "d"}}, {2, []string{"e"}}} {
		if _, err := f.views.ListWindow(ctx, "p#shard-0", "tumbling:1m0s", minuteAt(l.n), l.keys); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := f.views.Listings(ctx, "p#shard-0", minuteAt(1).End)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(keysOf(ls))
	want := fmt.Sprint(map[string][]string{
		"tumbling:1m0s|" + minuteAt(0).ID(): {"a", "b", "d"},
		"tumbling:1m0s|" + minuteAt(1).ID(): {"c"},
	})
	if got != want {
		t.Fatalf("listings at the end of the second minute:\n%s\nwant\n%s", got, want)
	}
	if ls, _ := f.views.Listings(ctx, "p#shard-1", minuteAt(2).End); len(ls) != 0 {
		t.Fatalf("another shard's finalize found %v", keysOf(ls))
	}
	refs := ls[0].Refs("p")
	if refs[0].PK != state.PartitionKey("p", ls[0].Keys[0]) || refs[0].SK != state.SortKey(ls[0].Kind, ls[0].Window) {
		t.Fatalf("a listing names %+v for key %q", refs[0], ls[0].Keys[0])
	}
}

// A grouping key may be empty (a data field holding ""): a string set holds
// an empty string (DynamoDB has allowed them in sets since 2020), so the
// listing lists it beside the others and a finalize finds its window.
func TestAListingHoldsAnEmptyKey(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	if _, err := f.views.ListWindow(ctx, "p#shard-0", "tumbling:1m0s", minute, []string{"", "a"}); err != nil {
		t.Fatalf("listing an empty key: %v", err)
	}
	ls, err := f.views.Listings(ctx, "p#shard-0", minute.End)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(keysOf(ls)), fmt.Sprint(map[string][]string{"tumbling:1m0s|" + minute.ID(): {"", "a"}}); got != want {
		t.Fatalf("listings %s, want %s", got, want)
	}
}

// A listing that a write added to after a finalize read it survives that
// finalize's drop: the key added is still found by the next one.
func TestDropListingKeepsWhatWasAddedSinceItWasRead(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	list := func(keys ...string) {
		t.Helper()
		if _, err := f.views.ListWindow(ctx, "p#shard-0", "tumbling:1m0s", minute, keys); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []state.Listing {
		t.Helper()
		ls, err := f.views.Listings(ctx, "p#shard-0", minute.End)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	list("a")
	seen := read()
	list("b") // a late write lists its window again meanwhile
	for _, l := range seen {
		if _, err := f.views.DropListing(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	again := read()
	if got := fmt.Sprint(keysOf(again)); got != fmt.Sprint(map[string][]string{"tumbling:1m0s|" + minute.ID(): {"a", "b"}}) {
		t.Fatalf("after a drop that raced a write: %s, want both keys still listed", got)
	}
	for _, l := range again {
		if _, err := f.views.DropListing(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if ls := read(); len(ls) != 0 {
		t.Fatalf("a listing read and dropped with nothing added since is still there: %v", keysOf(ls))
	}
}

// Thousands of keys with long names spread over chunks, each billed
// small and far under the item limit, and every key is found.
func TestAListingOfManyKeysIsChunked(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	keys := make([]string, 4000)
	for i := range keys {
		keys[i] = fmt.Sprintf("customer-%06d-with-a-long-name-for-its-key", i)
	}
	// Twice, as two flushes of one window list the same keys.
	for range 2 {
		if _, err := f.views.ListWindow(ctx, "p#shard-0", "hopping:5m0s/1m0s", minute, keys); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := f.views.Listings(ctx, "p#shard-0", minute.End)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) < 4 {
		t.Fatalf("%d keys of %d bytes went to %d listing items, want them chunked", len(keys), len(keys[0]), len(ls))
	}
	found := map[string]bool{}
	for _, l := range ls {
		for _, k := range l.Keys {
			found[k] = true
		}
	}
	if len(found) != len(keys) {
		t.Fatalf("found %d of %d keys listed", len(found), len(keys))
	}
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if n := limits.ItemSize(it); n > 80<<10 {
			t.Errorf("a listing item holds %d bytes, want at most 80 KB (each write is billed by the whole item)", n)
		}
	}
}
