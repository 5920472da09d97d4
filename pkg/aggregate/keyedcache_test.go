package aggregate

import (
	"context"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// TestKeyedCopiesStayWithinTheirBound: a process that meets ever more keys
// keeps copies of their session states within keyedCacheMax, letting some
// go, and its count of what it holds stays exact as copies are replaced
// and forgotten.
func TestKeyedCopiesStayWithinTheirBound(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"bound","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"30s"}],"aggregates":["count","max"]}`))
	if err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), "views", cfg.Aggregates)
	const bound = 16 << 10
	p := New(cfg, views, nil, "", WithKeyedCacheBytes(bound))
	total := func() int {
		n := 0
		for k, ks := range p.keyed {
			n += keyedEntryBytes(k, ks)
		}
		return n
	}
	for i := range 2000 {
		ref := state.KeyedRef{Pipeline: "bound", Key: fmt.Sprintf("user-%04d", i), Kind: "session:30s"}
		p.rememberKeyed(ref, "shardId-000000000000", state.KeyedState{Blob: make([]byte, 100+i%300), Version: 1})
		if i%3 == 0 { // a newer version of a key met before
			p.rememberKeyed(ref, "shardId-000000000000", state.KeyedState{Blob: make([]byte, 50), Version: 2})
		}
		if i%7 == 0 {
			p.forgetKeyed(ref, "shardId-000000000000")
		}
		if p.keyedBytes > bound {
			t.Fatalf("after %d keys the copies take %d bytes, past the bound %d", i+1, p.keyedBytes, bound)
		}
	}
	if got := total(); got != p.keyedBytes {
		t.Errorf("the copies take %d bytes, the count says %d", got, p.keyedBytes)
	}
	if len(p.keyed) == 0 || p.keyedBytes < bound/2 {
		t.Errorf("%d copies, %d bytes: the bound let go of more than it had to", len(p.keyed), p.keyedBytes)
	}
}

// TestKeyedCopiesAreLetGoWhenTheViewsTableChanges: the copies are of one
// views table's items; when a replay's version takes over, none is used
// against the new table, whose item for the same key may happen to be at
// the same version.
func TestKeyedCopiesAreLetGoWhenTheViewsTableChanges(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`{"name":"swap","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"30s"}],"aggregates":["count","max"]}`))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views-v1": memdb.ViewsTable})
	table := "views-v1"
	p := New(cfg, state.NewViews(mem, table, cfg.Aggregates), nil, "",
		WithHandover(mem, func(context.Context) string { return table }))
	ctx := context.Background()
	ref := state.KeyedRef{Pipeline: "swap", Key: "a", Kind: "session:30s"}
	const shard = "shardId-000000000000"
	if _, ok := p.keptKeyed(ctx, ref, shard); ok {
		t.Fatal("a copy before any was kept")
	}
	p.rememberKeyed(ref, shard, state.KeyedState{Blob: []byte{1, 2, 3}, Version: 4})
	if ks, ok := p.keptKeyed(ctx, ref, shard); !ok || ks.Version != 4 {
		t.Fatalf("the copy kept: %+v %v", ks, ok)
	}
	table = "views-v2"
	if ks, ok := p.keptKeyed(ctx, ref, shard); ok {
		t.Errorf("after the swap the copy of the table before is still used: %+v", ks)
	}
	if p.keyedBytes != 0 || len(p.keyed) != 0 {
		t.Errorf("after the swap %d copies, %d bytes counted", len(p.keyed), p.keyedBytes)
	}
}
