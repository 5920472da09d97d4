package aggregate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// The ticker whose closing windows do not fit writes the chunk out (open,
// listed) and stores it empty: in the first format (ed7af4a), which drops
// itemsBy, the bound past the windows the spill wrote. The shard's next
// carried records of such a window then close it as fresh: a create
// conditioned on no item, refused (the spill wrote it), then the closing
// write and its mark: three billed writes where the carry knew two.
func TestAWindowTheTickWroteOutIsNotTakenForFresh(t *testing.T) {
	const name = "tcf"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := base
	now := func() time.Time { return clock }
	ww := &windowWrites{Client: db}
	var views *state.Views
	p, _ := pipelineOn(t, carryConfig(name, true), func(cfg *pipeline.Config, table string) *state.Views {
		views = state.NewViews(ww, table, cfg.Aggregates, state.WithClock(now))
		return views
	}, aggregate.WithClock(now), aggregate.WithCarryBytes(112))
	r := &feed{t: t, p: p, base: base, clock: &clock}
	r.carry(at{"a", 10, 1}, at{"i", 11, 2}, at{"y", 12, 3}, at{"user-1", 13, 4}) // one chunk
	r.flush()                                                                    // wm 8 s: everything carried
	r.tick(60 * time.Second)
	if _, err := p.Tick(context.Background(), base.Add(100*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := views.Query(context.Background(), name, "a", "hopping:3m0s:1m0s", base, base.Add(time.Second))
	if err != nil || len(got) != 1 || got[0].Final {
		t.Fatalf("a's [0s,3m) after the tick: %+v %v; want it written open (the chunk written out)", got, err)
	}
	before := writesTo(ww, name+"#a", "hopping:3m0s:1m0s", base)
	r.carry(at{"a", 110, 5}) // into [0s,3m), carried
	r.flush()
	r.carry(at{"z", 400, 1}) // closes every window of a
	r.flush()
	if n := writesTo(ww, name+"#a", "hopping:3m0s:1m0s", base) - before; n != 2 {
		t.Errorf("writes closing a's [0s,3m), which the tick wrote out: %d, want 2 (the closing write, its mark)", n)
	}
	got, err = views.Query(context.Background(), name, "a", "hopping:3m0s:1m0s", base, base.Add(time.Second))
	if err != nil || len(got) != 1 || !got[0].Final || got[0].Result.Count != 2 {
		t.Errorf("a's [0s,3m): %+v %v", got, err)
	}
}
