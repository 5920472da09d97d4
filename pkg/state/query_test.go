package state_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// TestQueryBoundedReadsLimitPlusOne: a key with more windows than the
// limit is read only as far as the limit and one more (which says there
// are more), from the range's start or, with Latest, its end; retracted
// sessions are skipped and do not count toward the limit. Before the
// bound, every window of the range was read whatever was shown.
func TestQueryBoundedReadsLimitPlusOne(t *testing.T) {
	const kind, n = "session:20s", 40
	ctx := context.Background()
	f := newViews(t)
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	win := func(i int) window.Window {
		start := base.Add(time.Duration(i) * time.Minute)
		return window.Window{Start: start, End: start.Add(20 * time.Second)}
	}
	// Sessions 0..n-1, a minute apart; every fourth of the first twenty
	// (0, 4, 8, 12, 16) is retracted, merged into a larger one.
	retracted := func(i int) bool { return i < 20 && i%4 == 0 }
	ref := state.KeyedRef{Pipeline: "p", Key: "k", Kind: kind}
	for i := range n {
		s := spec.New()
		s.Add(float64(i), nil)
		blob, err := s.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.views.PutWindow(ctx, ref, win(i), blob, 1, 1, retracted(i)); err != nil {
			t.Fatal(err)
		}
	}
	db := &standintest.QueryCounter{Client: f.db}
	views := state.NewViews(db, f.table, spec)

	tests := []struct {
		name     string
		from, to int // window indexes: the range is [win(from).Start, win(to).Start)
		bound    state.Bound
		want     string // the sums of the windows returned, in order
		more     bool
		maxItems int // items Query may return
	}{
		{"first 5 skip the retracted", 0, n, state.Bound{Limit: 5}, "1 2 3 5 6", true, 5 + 1 + 2},
		{"last 5", 0, n, state.Bound{Limit: 5, Latest: true}, "35 36 37 38 39", true, 5 + 1},
		{"limit 0 says whether any", 0, n, state.Bound{Limit: 0}, "", true, 1 + 1},
		{"limit 0 of an empty range", n, n + 10, state.Bound{Limit: 0}, "", false, 0},
		{"exactly the limit", 30, 35, state.Bound{Limit: 5}, "30 31 32 33 34", false, 5},
		{"fewer than the limit", 30, 33, state.Bound{Limit: 5, Latest: true}, "30 31 32", false, 3},
		{"all but the retracted", 0, 20, state.Bound{Limit: 100}, "1 2 3 5 6 7 9 10 11 13 14 15 17 18 19", false, 20},
		{"the end is exclusive", 36, 39, state.Bound{Limit: 3}, "36 37 38", false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, more, err := views.QueryBounded(ctx, "p", "k", kind, win(tt.from).Start, win(tt.to).Start, tt.bound)
			if err != nil {
				t.Fatal(err)
			}
			items, queries := db.Take()
			var sums []string
			for i, v := range vs {
				sums = append(sums, fmt.Sprint(v.Result.Sum))
				if i > 0 && !vs[i-1].Window.Start.Before(v.Window.Start) {
					t.Errorf("window %d starts at %s, not after the one before it (%s)", i, v.Window.Start, vs[i-1].Window.Start)
				}
			}
			if got := strings.Join(sums, " "); got != tt.want || more != tt.more {
				t.Errorf("windows %q more %v, want %q more %v", got, more, tt.want, tt.more)
			}
			if items > tt.maxItems {
				t.Errorf("read %d items in %d queries, want at most %d", items, queries, tt.maxItems)
			}
		})
	}

	// Query returns the whole range, as long as it holds no more than
	// MaxQueryWindows.
	vs, err := views.Query(ctx, "p", "k", kind, base, win(n).Start)
	if err != nil || len(vs) != n-5 {
		t.Errorf("Query: %d windows, %v; want %d", len(vs), err, n-5)
	}
	if _, _, err := views.QueryBounded(ctx, "p", "k", kind, base, win(n).Start, state.Bound{Limit: -1}); err == nil {
		t.Error("QueryBounded took limit -1")
	}
}
