package aggregate

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// noShards is a ListShards naming no shard: none has parents.
type noShards struct{}

func (noShards) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{}, nil
}

// A chunk stored by code from before result pages (format 3) has its
// closing windows written as items of their own, as that code, running
// beside the new one while a deploy finishes, writes them; stored again
// in the current format, its next closing windows go in pages. Code from
// before fails on the current format, so it never closes a window a page
// may hold.
func TestACarryFromBeforePagesClosesItsWindowsAsItems(t *testing.T) {
	ctx := context.Background()
	cfg, err := pipeline.Parse([]byte(`{"name":"fp","key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],
	  "outOfOrderness":"5s","idleTimeout":"30s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	db := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	views := state.NewViews(db, "views", cfg.Aggregates)
	p := New(cfg, views, nil, "", WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithShardLister(noShards{}, "events"))
	const shard = "shardId-000000000000"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(m int) window.Window {
		s := base.Add(time.Duration(m) * time.Minute)
		return window.Window{Start: s, End: s.Add(time.Minute)}
	}
	chunk := carryChunk("a")
	old := shardCarry{shard: shard, id: carryID(shard, chunk), fence: "49600000000000000000000000010",
		closed: base, itemsBy: base, sets: map[setKey]*partial{}}
	for m := 0; m < 2; m++ {
		st := cfg.Aggregates.New()
		st.Add(float64(m+1), nil)
		old.sets[setKey{upKey{key: "a", kind: "tumbling:1m0s", win: at(m)}, 1}] = &partial{st: st,
			minSeq: "4960000000000000000000000000" + string(rune('1'+m)), maxSeq: "4960000000000000000000000000" + string(rune('1'+m))}
	}
	data := encodeCarry(&old)
	data[0] = carryFormatNoPages
	if err := views.SaveCarry(ctx, "fp", state.Carry{Shard: carryID(shard, chunk), Data: data}); err != nil {
		t.Fatal(err)
	}
	pages := func() int {
		n := 0
		for _, it := range db.Items("views") {
			if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "~page#") {
				n++
			}
		}
		return n
	}
	// The ticker closes [0s,1m): from a carry in format 3, an item.
	if _, err := p.closeCarried(ctx, shard, base.Add(65*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := views.Query(ctx, "fp", "a", "tumbling:1m0s", base, base.Add(time.Minute)); err != nil || len(got) != 1 || !got[0].Final || got[0].Result.Sum != 1 {
		t.Fatalf("a's [0s,1m): %+v %v, want it final", got, err)
	}
	if n := pages(); n != 0 {
		t.Fatalf("%d result pages after closing a window of a format 3 carry, want none (an item)", n)
	}
	c, err := p.loadCarry(ctx, shard, chunk)
	if err != nil || c.format != carryFormat {
		t.Fatalf("the chunk after the tick: format %d %v, want %d", c.format, err, carryFormat)
	}
	// Stored in the current format, its next window closes in a page.
	if _, err := p.closeCarried(ctx, shard, base.Add(125*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := views.Query(ctx, "fp", "a", "tumbling:1m0s", at(1).Start, at(1).End); err != nil || len(got) != 1 || !got[0].Final || got[0].Result.Sum != 2 {
		t.Fatalf("a's [1m,2m): %+v %v, want it final", got, err)
	}
	if n := pages(); n != 1 {
		t.Fatalf("%d result pages after closing a window of a current carry, want 1", n)
	}
}
