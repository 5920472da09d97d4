package state_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// A bounded read of one key (cmd/results, the dashboard's latest windows,
// Processor.WindowsLatest) reads at most limit+1 window items, and, for a
// window kind whose results may be in pages, at most a few pages a window
// asked for: a key absent from most windows is looked for in the pages of
// its bucket. Two hours of one-minute windows, each closed in a page of
// 100 other keys of x's bucket: "the last 5 windows of x" reads no more
// than 6 items and 24 pages (it read all 120, most of a MB, with a bound
// of 2,048 pages), and says there may be more.
func TestABoundedReadOfARareKeyReadsAFewPagesAWindow(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	const x = "rare-key"
	var others []string
	for i := 0; len(others) < 100; i++ {
		if k := fmt.Sprintf("key-%d", i); state.PageBucket(k) == state.PageBucket(x) {
			others = append(others, k)
		}
	}
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const windows = 120
	for m := range windows {
		w := window.Window{Start: base.Add(time.Duration(m) * time.Minute), End: base.Add(time.Duration(m+1) * time.Minute)}
		us := make([]*state.Update, len(others))
		for i, k := range others {
			us[i] = freshUpdate(k, w, 10*m+1, 10*m+3)
		}
		if _, err := f.views.ApplyFresh(ctx, "shard-0", us); err != nil {
			t.Fatal(err)
		}
	}
	db := &standintest.QueryCounter{Client: f.db}
	views := state.NewViews(db, f.table, spec)
	const limit = 5
	vs, more, err := views.QueryBounded(ctx, "p", x, "tumbling:1m0s", base, base.Add(windows*time.Minute), state.Bound{Limit: limit, Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	items, queries := db.Take()
	if len(vs) != 0 {
		t.Fatalf("windows of %s: %d, want none", x, len(vs))
	}
	if items > 5*(limit+1) || !more {
		t.Errorf("the last %d windows of a key with none read %d items in %d queries (more %v), want at most %d and more", limit, items, queries, more, 5*(limit+1))
	}
}
