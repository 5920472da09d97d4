package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/state"
)

// A flush whose watermark passes a window's end makes it final in the write
// that applies its records: one write, not an update and a Finalize. The
// result is as Finalize would have made it (revision 1, listed until
// published), a redelivery finds it to publish again, and a later record
// meets a final window.
func TestAWriteThatClosesMakesTheWindowFinal(t *testing.T) {
	tests := []struct {
		name    string
		closeBy time.Time
		final   bool
	}{
		{"watermark past the end", minute.End.Add(time.Second), true},
		{"watermark at the end", minute.End, true},
		{"watermark before the end", minute.End.Add(-time.Millisecond), false},
		{"no watermark known", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newViews(t)
			ctx := context.Background()
			u := update(entries(1, 4))
			u.CloseBy = tt.closeBy
			res, err := f.views.Apply(ctx, "shard-0", u)
			if err != nil {
				t.Fatal(err)
			}
			if res.Writes != 1 || res.Closed != tt.final {
				t.Fatalf("Apply: %d writes, closed=%v; want 1 write, closed=%v", res.Writes, res.Closed, tt.final)
			}
			if !tt.final {
				if res.Publish != nil {
					t.Fatalf("an open window has a result to publish: %+v", res.Publish)
				}
				return
			}
			pub := res.Publish
			if pub == nil || !pub.Final || !pub.Pending || pub.Revision != 1 || pub.Result.Count != 4 || pub.Ref.SK != state.SortKey("tumbling:1m0s", minute) {
				t.Fatalf("closing write's result %+v, want the final, pending revision 1 of 4 records naming its item", pub)
			}
			// Finalize (the ticker, or the flush's own finalize) finds it
			// final already, with the same result still to publish.
			view, already, err := f.views.Finalize(ctx, pub.Ref)
			if err != nil || !already || !view.Pending || view.Result.Count != 4 || view.Revision != 1 {
				t.Fatalf("Finalize after a closing write: %+v already=%v %v", view, already, err)
			}
			// A redelivered flush is a duplicate handed the result to publish.
			again, err := f.views.Apply(ctx, "shard-0", u)
			if err != nil || again.Outcome != state.Duplicate || again.Publish == nil || again.Publish.Result.Count != 4 {
				t.Fatalf("redelivery: %+v %v, want a duplicate with the result to publish", again, err)
			}
			if first, err := f.views.UnlistRevision(ctx, pub.Ref, 1); err != nil || !first {
				t.Fatalf("UnlistRevision: first=%v %v", first, err)
			}
			// A later record is late for the final window.
			late, err := f.views.Apply(ctx, "shard-0", update(entries(5, 5)))
			if err != nil || late.Outcome != state.LateDropped {
				t.Fatalf("a record after the close: %+v %v, want late-dropped", late, err)
			}
		})
	}
}

// A fresh window (Update.Fresh: a carried window closing, every record of
// it in the write) is created final and already marked published: one
// write where there were two, the caller sending its result. Any write
// that meets it with its records applied (a retry after a crash between
// the write and the send, a spill, a batch) hands the result back to be
// sent again, and so does a correction, before its own; one that finds an
// item the caller did not know of writes to it as before, listed until
// published.
func TestAFreshWindowIsCreatedPublished(t *testing.T) {
	ctx := context.Background()
	t.Run("no item", func(t *testing.T) {
		f := newViews(t)
		u := update(entries(1, 4))
		u.CloseBy, u.Fresh = minute.End, true
		res, err := f.views.Apply(ctx, "shard-0", u)
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != 1 || !res.Closed || !res.Marked || res.Publish == nil || res.Publish.Pending || res.Publish.Result.Count != 4 {
			t.Fatalf("Apply: %+v (publish %+v), want one write creating the final window of 4 records, marked published", res, res.Publish)
		}
		view, already, err := f.views.Finalize(ctx, res.Publish.Ref)
		if err != nil || !already || view.Pending || view.Revision != 1 {
			t.Fatalf("Finalize after a fresh write: %+v already=%v %v, want final, revision 1, not pending", view, already, err)
		}
		for _, fresh := range []bool{true, false} {
			again := *u
			again.Fresh = fresh
			res, err := f.views.Apply(ctx, "shard-0", &again)
			if err != nil || res.Outcome != state.Duplicate || res.Marked || res.Publish != nil || res.Resend == nil || res.Resend.Result.Count != 4 {
				t.Fatalf("the write again (fresh %v): %+v %v, want a duplicate handing back the result to send again", fresh, res, err)
			}
		}
		if first, err := f.views.UnlistRevision(ctx, res.Publish.Ref, 1); err != nil || first {
			t.Fatalf("UnlistRevision of a fresh window: first=%v %v, want nothing to unlist", first, err)
		}
		// A late record corrects it as it corrects any final window.
		late := update(entries(5, 5))
		late.CorrectIfFinal = true
		fix, err := f.views.Apply(ctx, "shard-0", late)
		if err != nil || fix.Outcome != state.Corrected || fix.Marked || fix.Publish == nil || !fix.Publish.Pending || fix.Publish.Result.Count != 5 ||
			fix.Resend == nil || fix.Resend.Revision != 1 || fix.Resend.Result.Count != 4 {
			t.Fatalf("a late record: %+v %v, want a correction to 5 records, listed until published, after revision 1 sent again", fix, err)
		}
		// Corrected, the window is no longer fresh: revision 2 is
		// published the usual way, and nothing is sent again.
		dup, err := f.views.Apply(ctx, "shard-0", late)
		if err != nil || dup.Outcome != state.Duplicate || dup.Resend != nil || dup.Publish == nil || dup.Publish.Revision != 2 {
			t.Fatalf("the late record again: %+v %v, want a duplicate handing back revision 2 to publish", dup, err)
		}
	})
	t.Run("an item there", func(t *testing.T) {
		f := newViews(t)
		if _, err := f.views.Apply(ctx, "shard-0", update(entries(1, 2))); err != nil {
			t.Fatal(err)
		}
		u := update(entries(3, 4))
		u.CloseBy, u.Fresh = minute.End, true
		res, err := f.views.Apply(ctx, "shard-0", u)
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != 2 || !res.Closed || res.Marked || res.Publish == nil || !res.Publish.Pending || res.Publish.Result.Count != 4 {
			t.Fatalf("Apply: %+v (publish %+v), want the refused create and a write closing all 4 records, listed until published", res, res.Publish)
		}
		if first, err := f.views.UnlistRevision(ctx, res.Publish.Ref, 1); err != nil || !first {
			t.Fatalf("UnlistRevision: first=%v %v", first, err)
		}
	})
}
