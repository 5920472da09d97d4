package aggregate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/pkg/window"
)

func TestKeyedEncodingRoundTrips(t *testing.T) {
	buf := &keyedBuf{
		Points: []point{
			{T: -5, V: 0}, {T: 1_700_000_000_000, V: -3}, {T: 1_700_000_000_000, V: 2.5, D: distinctHash([]byte("u1"))},
			{T: 1_700_000_000_250, V: 1 << 52}, {T: 1_700_000_000_251, V: -(1 << 53)}, {T: 1_700_000_000_300, V: math.Copysign(0, -1)},
			{T: 1_700_000_009_999, V: 1e-300, Th: 1_700_000_010_000},
		},
		Emitted: map[string]emitted{
			window.Of(1_700_000_000_000, 1_700_000_030_000).ID(): {Start: 1_700_000_000_000, End: 1_700_000_030_000, Rev: 2, Blob: []byte{1, 2, 3}},
			window.Of(-1, 5).ID():                                {Start: -1, End: 5, Rev: 1},
		},
		Frozen: -7,
	}
	for i := range buf.Points[:len(buf.Points)-1] {
		buf.Points[i].Th = noThreshold
	}
	got, err := decodeKeyed(encodeKeyed(nil, buf))
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf.Points {
		w, g := buf.Points[i], got.Points[i]
		if g.T != w.T || g.Th != w.Th || math.Float64bits(g.V) != math.Float64bits(w.V) || string(g.D) != string(w.D) {
			t.Errorf("point %d: got %+v, want %+v", i, g, w)
		}
	}
	if got.Frozen != buf.Frozen {
		t.Errorf("frozen: got %d, want %d", got.Frozen, buf.Frozen)
	}
	if len(got.Emitted) != len(buf.Emitted) {
		t.Errorf("emitted: got %d windows, want %d", len(got.Emitted), len(buf.Emitted))
	}
	for id, e := range buf.Emitted {
		g := got.Emitted[id]
		if g.Start != e.Start || g.End != e.End || g.Rev != e.Rev || string(g.Blob) != string(e.Blob) {
			t.Errorf("emitted %s: got %+v, want %+v", id, g, e)
		}
	}
	// The JSON encoding of earlier versions still reads, its emitted
	// windows under their bounds' ids.
	old, err := decodeKeyed([]byte(`{"points":[{"t":5,"v":1.5,"s":"9"}],"emitted":{"x":{"start":0,"end":30000,"rev":1}}}`))
	if err != nil || len(old.Points) != 1 || old.Points[0].V != 1.5 {
		t.Fatalf("JSON state: %+v, %v", old, err)
	}
	if e, ok := old.Emitted[window.Of(0, 30_000).ID()]; !ok || e.Rev != 1 || old.Frozen != 30_000 {
		t.Errorf("JSON state's emitted windows: %+v frozen %d", old.Emitted, old.Frozen)
	}
	for _, bad := range [][]byte{{keyedVersion}, {keyedVersion, 0x80, 0}, {keyedVersion, 0, 3, 0}, {9}, append(encodeKeyed(nil, buf), 0)} {
		if _, err := decodeKeyed(bad); err == nil {
			t.Errorf("decodeKeyed(%v) accepted", bad)
		}
	}
}

// A state with results a finalize recorded and has not published reads back
// with them, in order (a value that is its window's emitted one is written
// once, with the emitted entry). Without pending results none are written.
func TestKeyedEncodingPendingResultsRoundTrip(t *testing.T) {
	final := window.Of(1_000, 21_000)
	buf := &keyedBuf{
		Points:  []point{{T: 1_000, V: 1, Th: noThreshold}},
		Emitted: map[string]emitted{final.ID(): {Start: 1_000, End: 21_000, Rev: 2, Blob: []byte{7, 7}}},
		Frozen:  noThreshold,
		Pending: []pendingResult{
			{Kind: "final", Start: 1_000, End: 21_000, Rev: 1, Blob: []byte{5}},
			{Kind: "correction", Start: 1_000, End: 21_000, Rev: 2, Blob: []byte{7, 7}, Prev: []byte{5}},
			{Kind: "retraction", Start: -4_000, End: 16_000, Rev: 3, Prev: []byte{9}},
		},
	}
	enc := encodeKeyed(nil, buf)
	if enc[0] != keyedVersion || enc[1] != keyedHasPending {
		t.Fatalf("version %d flags %b, want %d flags %b", enc[0], enc[1], keyedVersion, keyedHasPending)
	}
	got, err := decodeKeyed(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Pending, buf.Pending) {
		t.Errorf("pending: got %+v, want %+v", got.Pending, buf.Pending)
	}
	buf.Pending = nil
	if enc := encodeKeyed(nil, buf); enc[0] != keyedVersion || enc[1] != 0 {
		t.Errorf("without pending results: version %d flags %b, want %d flags 0", enc[0], enc[1], keyedVersion)
	}
}

// A session state as the reference load keeps it — about 70 points a few
// seconds apart with whole values, no distinct aggregate, 3 emitted
// windows — is written in version 5 without an empty distinct value a
// point or the emitted windows' ids: about 220 bytes fewer than version 3
// wrote, taking an item of about 1 KB (two write units) under it (one).
func TestKeyedEncodingSpendsNoBytesOnDerivableParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := &keyedBuf{Emitted: map[string]emitted{}, Frozen: 1_764_000_000_000}
	ts := buf.Frozen
	for range 70 {
		ts += int64(2_000 + rng.IntN(15_000))
		buf.Points = append(buf.Points, point{T: ts, V: float64(rng.IntN(9_000)), Th: noThreshold})
	}
	for i := range 3 {
		start := buf.Frozen - int64(i+1)*200_000
		buf.Emitted[window.Of(start, start+90_000).ID()] = emitted{Start: start, End: start + 90_000, Rev: 1, Blob: make([]byte, 50)}
	}
	v5 := encodeKeyed(nil, buf)
	v3 := len(v5) - 1 + len(buf.Points) + len(buf.Emitted)*(1+window.IDLength) // no flags byte; a zero length a point; each id with its length
	if saved := v3 - len(v5); saved < 200 {
		t.Errorf("version 5 is %d bytes, %d fewer than version 3's %d; want at least 200 fewer", len(v5), saved, v3)
	}
	if v5[1]&keyedHasDistinct != 0 {
		t.Errorf("flags %b: points without distinct values flagged as carrying them", v5[1])
	}
	back, err := decodeKeyed(v5)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Points, buf.Points) || !reflect.DeepEqual(back.Emitted, buf.Emitted) {
		t.Errorf("round trip changed the state")
	}
}

// TestKeyedStateCapacity measures how many points of one key fit in one
// keyed state item (MaxKeyedStateBytes): records about 100 ms apart with a
// whole-number value, without and with a distinct value.
func TestKeyedStateCapacity(t *testing.T) {
	for _, tt := range []struct {
		name     string
		distinct bool
		atLeast  int
	}{{"value", false, 25_000}, {"value and distinct", true, 25_000}} {
		rng := rand.New(rand.NewPCG(1, 2))
		buf := &keyedBuf{Emitted: map[string]emitted{}}
		ts := int64(1_764_000_000_000)
		for {
			ts += int64(50 + rng.IntN(100))
			pt := point{T: ts, V: float64(rng.IntN(3000))}
			if tt.distinct {
				pt.D = distinctHash([]byte(fmt.Sprint("user-", rng.IntN(1000))))
			}
			buf.Points = append(buf.Points, pt)
			if len(buf.Points)%1000 == 0 && len(encodeKeyed(nil, buf)) > MaxKeyedStateBytes {
				break
			}
		}
		for len(encodeKeyed(nil, buf)) > MaxKeyedStateBytes {
			buf.Points = buf.Points[:len(buf.Points)-1]
		}
		n := len(buf.Points)
		t.Logf("keyed state capacity (%s): %d points in %d bytes (%.1f bytes a point)", tt.name, n, MaxKeyedStateBytes, float64(MaxKeyedStateBytes)/float64(n))
		if n < tt.atLeast {
			t.Errorf("%s: %d points fit, want at least %d", tt.name, n, tt.atLeast)
		}
		back, err := decodeKeyed(encodeKeyed(nil, buf))
		if err != nil || !reflect.DeepEqual(back.Points[n-1].T, buf.Points[n-1].T) {
			t.Fatalf("round trip of a full state: %v", err)
		}
	}
}
