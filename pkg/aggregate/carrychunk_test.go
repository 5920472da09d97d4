package aggregate

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// A shard's carry written before chunks is one item of every key's
// partials, where chunk 0 is now. Read as chunk 0 it writes the other
// chunks' keys out (open, listed) before it is stored again with chunk
// 0's keys alone: no key is left in two chunks, whose windows two chunks
// would close.
func TestAWholeCarryIsReadAsChunkZero(t *testing.T) {
	ctx := context.Background()
	cfg, err := pipeline.Parse([]byte(`{"name":"wc","key":"key","value":"data.v",
	  "windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],
	  "outOfOrderness":"5s","idleTimeout":"30s","partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable}), "views", cfg.Aggregates)
	p := New(cfg, views, nil, "", WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	const shard = "shardId-000000000000"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	minute := window.Window{Start: base, End: base.Add(time.Minute)}
	keys := map[string]float64{"e": 2, "a": 3} // chunks 0 and 4
	whole := shardCarry{shard: shard, id: shard, fence: "49600000000000000000000000010",
		closed: base.Add(30 * time.Second), itemsBy: base.Add(30 * time.Second), sets: map[setKey]*partial{}}
	for k, v := range keys {
		if c := carryChunk(k); (k == "e") != (c == 0) {
			t.Fatalf("key %s is in chunk %d", k, c)
		}
		st := cfg.Aggregates.New()
		st.Add(v, nil)
		whole.sets[setKey{upKey{key: k, kind: "tumbling:1m0s", win: minute}, 1}] = &partial{st: st,
			minSeq: "49600000000000000000000000001", maxSeq: "49600000000000000000000000009"}
	}
	// And a's next window, which the tick does not close: left in chunk
	// 0, a flush of chunk 4 would close it too, without these records.
	next := window.Window{Start: minute.End, End: minute.End.Add(time.Minute)}
	st := cfg.Aggregates.New()
	st.Add(5, nil)
	whole.sets[setKey{upKey{key: "a", kind: "tumbling:1m0s", win: next}, 1}] = &partial{st: st,
		minSeq: "49600000000000000000000000010", maxSeq: "49600000000000000000000000010"}
	data := encodeCarry(&whole)
	data[0] = carryFormatWhole
	if err := views.SaveCarry(ctx, "wc", state.Carry{Shard: shard, Data: data}); err != nil {
		t.Fatal(err)
	}
	// The ticker closes [0s,1m) (the watermark at 65 s).
	if _, err := p.closeCarried(ctx, shard, base.Add(65*time.Second)); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		got, err := views.Query(ctx, "wc", k, "tumbling:1m0s", base, base.Add(time.Minute))
		if err != nil || len(got) != 1 || got[0].Result.Count != 1 || got[0].Result.Sum != v {
			t.Errorf("key %s's window: %+v %v, want its one record (sum %g)", k, got, err, v)
		}
	}
	if got, err := views.Query(ctx, "wc", "a", "tumbling:1m0s", next.Start, next.End); err != nil || len(got) != 1 || got[0].Final || got[0].Result.Sum != 5 {
		t.Errorf("key a's next window: %+v %v, want it written open with its record", got, err)
	}
	c0, err := p.loadCarry(ctx, shard, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(c0.sets)+len(c0.spilling)+len(c0.closing) != 0 {
		t.Errorf("chunk 0 after the tick: %d sets, %d spilling, %d closing; want nothing left", len(c0.sets), len(c0.spilling), len(c0.closing))
	}
}

// A pipeline that stops carrying stores its empty carries in the first
// format (encodePortable), the one the code before chunks and itemsBy
// reads, and they read back as what they were but for itemsBy (then the
// closed watermark); while it carries, an empty one keeps the current
// format.
func TestAnEmptyCarryIsStoredInTheFirstFormat(t *testing.T) {
	closed := time.Date(2026, 11, 29, 10, 1, 5, 0, time.UTC)
	c := shardCarry{fence: "49600000000000000000000000010", closed: closed, itemsBy: closed.Add(time.Hour)}
	if b := encodeCarry(&c); b[0] != carryFormat {
		t.Errorf("an empty carry while carrying in format %d, want %d", b[0], carryFormat)
	}
	b := encodePortable(&c)
	if b[0] != carryFormatNoItemsBy {
		t.Fatalf("an empty carry in format %d, want %d", b[0], carryFormatNoItemsBy)
	}
	p := &Processor{cfg: &pipeline.Config{}}
	got := shardCarry{sets: map[setKey]*partial{}, closing: map[setKey]*partial{}, spilling: map[setKey]*partial{}}
	if err := p.decodeCarry(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.fence != c.fence || !got.closed.Equal(closed) || !got.itemsBy.Equal(closed) || len(got.sets)+len(got.closing)+len(got.spilling) != 0 || got.spillTo != "" {
		t.Errorf("read back: %+v, want fence %s, closed and itemsBy %v, nothing carried", got, c.fence, closed)
	}
}
