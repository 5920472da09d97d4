package aggregate

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
)

// What an invocation writes as overflow is cut into items of at most
// overflowPartBytes by keys, and read back whole, in order, by a process
// that never saw it (a cold start) as by the one that wrote it.
func TestOverflowIsCutIntoItemsAndReadBackWhole(t *testing.T) {
	defer func(n int) { overflowPartBytes = n }(overflowPartBytes)
	overflowPartBytes = 2 << 10
	cfg, err := pipeline.Parse([]byte(`{"name":"parts","key":"key","value":"data.v","windows":[{"kind":"session","gap":"30s"}],"aggregates":["count","sum"]}`))
	if err != nil {
		t.Fatal(err)
	}
	db := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	newProc := func() *Processor { return New(cfg, state.NewViews(db, "views", cfg.Aggregates), nil, "") }
	const shard = "shardId-000000000000"
	points, claims := carried{}, map[string][]dedupe.Entry{}
	seq := 1000
	for k := range 60 {
		key := keyedKey{key: fmt.Sprintf("key-%03d", k), kind: "session:30s"}
		for i := range 5 {
			seq++
			points[key] = append(points[key], carriedPoint{point: point{T: int64(1_764_410_400_000 + k*1000 + i), V: float64(i), Th: noThreshold, Seq: fmt.Sprint(seq)}, Counted: i == 3})
			var e dedupe.Entry
			copy(e.ID[:], fmt.Sprintf("%016d", seq))
			e.Arrival = uint32(seq)
			claims[key.key] = append(claims[key.key], e)
		}
	}
	ctx := context.Background()
	w := newProc()
	pointNames, err := w.writeOverflowPoints(ctx, shard, fmt.Sprint(seq), "1000", points)
	if err != nil {
		t.Fatal(err)
	}
	claimNames, err := w.writeOverflowClaims(ctx, shard, fmt.Sprint(seq), claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(pointNames) < 2 || len(claimNames) < 2 {
		t.Fatalf("%d point items and %d claim items for 60 keys at 2 KB an item: nothing was cut", len(pointNames), len(claimNames))
	}
	names := append(append([]string{}, pointNames...), claimNames...)
	for _, p := range []*Processor{w, newProc()} { // the writer's copies, then the table's
		got, err := p.loadOverflow(ctx, shard, names)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.pointsOf(nil), points) {
			t.Errorf("points read back differ from those written")
		}
		if !reflect.DeepEqual(got.claimsOf(nil), claims) {
			t.Errorf("claims read back differ from those written")
		}
	}
	// One key alone past a part: its claims and points cut across
	// items, read back in order.
	hot := keyedKey{key: "hot", kind: "session:30s"}
	hotPoints, hotClaims := carried{}, map[string][]dedupe.Entry{}
	for i := range 400 {
		seq++
		hotPoints[hot] = append(hotPoints[hot], carriedPoint{point: point{T: int64(1_764_410_400_000 + i), V: float64(i) + 0.5, Th: noThreshold, Seq: fmt.Sprint(seq)}})
		var e dedupe.Entry
		copy(e.ID[:], fmt.Sprintf("%016d", seq))
		hotClaims["hot"] = append(hotClaims["hot"], e)
	}
	hp, err := w.writeOverflowPoints(ctx, shard, fmt.Sprint(seq), "1000", hotPoints)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := w.writeOverflowClaims(ctx, shard, fmt.Sprint(seq), hotClaims)
	if err != nil {
		t.Fatal(err)
	}
	if len(hp) < 2 || len(hc) < 2 {
		t.Fatalf("one key's 400 points and claims took %d and %d items of 2 KB: not cut", len(hp), len(hc))
	}
	got, err := newProc().loadOverflow(ctx, shard, append(hp, hc...))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.pointsOf(nil), hotPoints) || !reflect.DeepEqual(got.claimsOf(nil), hotClaims) {
		t.Error("one key's points or claims, cut across items, read back otherwise")
	}
	st := map[string]string{stateOverflow: strings.Join(names, ",")}
	if read, err := overflowNames(st); err != nil || !reflect.DeepEqual(read, names) {
		t.Fatalf("overflowNames = %v, %v; want %v", read, err, names)
	}
}

// Bytes an overflow item could not hold are refused, naming what is wrong.
func TestDecodeOverflowRefusesWhatItDidNotWrite(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{'x', 1, 2},
		{overflowPoints, 0},
		{overflowPoints, 200},
		{overflowPoints, 2, '1', '2', 9, 9},
		{overflowClaims, 3, 'a'},
	} {
		if _, err := decodeOverflow(b); err == nil {
			t.Errorf("decodeOverflow(%v) took it", b)
		}
	}
}
