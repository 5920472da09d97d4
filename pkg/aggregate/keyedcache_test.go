package aggregate

import (
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
