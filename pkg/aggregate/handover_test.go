package aggregate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestNewVersionDoesNotPublishWhatThePreviousOnePublished: the live
// function published k's window from the version the readers used; a
// replay filled a new version (SetHandover names the previous one) in
// which the window is still open, as when the previous version's ticker
// advanced its idle shard and the replay's did not. The function on the new
// version makes the window final and finds it on the stream already: it is
// marked published, not sent or logged again. A correction made on the new
// version goes out (the previous version never had it), and so does a
// window the previous version never made final.
func TestNewVersionDoesNotPublishWhatThePreviousOnePublished(t *testing.T) {
	ctx := context.Background()
	old := newPublishFixture(t)
	old.mustBatch(old.processor(), old.rec(1, "k", 10*time.Second), old.rec(2, "k", 20*time.Second), old.rec(3, "k", 70*time.Second))
	old.wantOutputs(pubWindow + "r1")

	next := old.table + "-v2"
	if err := state.CreateTable(ctx, db, next); err != nil {
		t.Fatal(err)
	}
	if err := state.NewViews(db, next, old.cfg.Aggregates).SetHandover(ctx, old.table, time.Now()); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(db, next, old.cfg.Aggregates)
	live := aggregate.New(old.cfg, views, old.out, old.stream, aggregate.WithLogger(old.logger),
		aggregate.WithHandover(db, aggregate.FixedViewsTable(next).Current))
	// The new version gets the window's records (the replay), then the
	// record that closes it (the live function).
	old.mustBatch(live, old.rec(1, "k", 10*time.Second), old.rec(2, "k", 20*time.Second))
	old.mustBatch(live, old.rec(3, "k", 70*time.Second))
	vs, err := views.Query(ctx, "pub", "k", "tumbling:1m0s", pubBase, pubBase.Add(time.Minute))
	if err != nil || len(vs) != 1 || !vs[0].Final || vs[0].Pending {
		t.Fatalf("k's window in %s: %+v, %v; want final and marked published", next, vs, err)
	}
	old.wantOutputs(pubWindow + "r1")

	// A late record corrects the window on the new version: r2 is new.
	old.mustBatch(live, old.rec(4, "k", 30*time.Second))
	old.wantOutputs(pubWindow+"r1", pubWindow+"r2")
	// The next window, which the previous version never made final, goes
	// out from the new one.
	old.mustBatch(live, old.rec(5, "k", 130*time.Second))
	if _, copies, _ := old.outputs(); copies["pub/k/tumbling:1m0s/2026-11-29T10:01:00.000Z/2026-11-29T10:02:00.000Z/r1"] != 1 {
		t.Errorf("k's window [10:01, 10:02) is on the stream %d times, want once", copies["pub/k/tumbling:1m0s/2026-11-29T10:01:00.000Z/2026-11-29T10:02:00.000Z/r1"])
	}
}
