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
			"a": {Start: 1_700_000_000_000, End: 1_700_000_030_000, Rev: 2, Blob: []byte{1, 2, 3}},
			"b": {Start: -1, End: 5, Rev: 1},
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
	for id, e := range buf.Emitted {
		g := got.Emitted[id]
		if g.Start != e.Start || g.End != e.End || g.Rev != e.Rev || string(g.Blob) != string(e.Blob) {
			t.Errorf("emitted %s: got %+v, want %+v", id, g, e)
		}
	}
	// The JSON encoding of earlier versions still reads.
	old, err := decodeKeyed([]byte(`{"points":[{"t":5,"v":1.5,"s":"9"}],"emitted":{}}`))
	if err != nil || len(old.Points) != 1 || old.Points[0].V != 1.5 {
		t.Fatalf("JSON state: %+v, %v", old, err)
	}
	for _, bad := range [][]byte{{keyedVersion}, {keyedVersion, 3, 0}, {9}, append(encodeKeyed(nil, buf), 0)} {
		if _, err := decodeKeyed(bad); err == nil {
			t.Errorf("decodeKeyed(%v) accepted", bad)
		}
	}
}

// A state with results a finalize recorded and has not published reads back
// with them, in order (a value that is its window's emitted one is written
// once, with the emitted entry). Without pending results the state is written as before.
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
	if enc[0] != keyedVersionPending {
		t.Fatalf("version %d, want %d", enc[0], keyedVersionPending)
	}
	got, err := decodeKeyed(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Pending, buf.Pending) {
		t.Errorf("pending: got %+v, want %+v", got.Pending, buf.Pending)
	}
	buf.Pending = nil
	if enc := encodeKeyed(nil, buf); enc[0] != keyedVersion {
		t.Errorf("without pending results: version %d, want %d", enc[0], keyedVersion)
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
