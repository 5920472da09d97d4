package aggregate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/window"
)

var foldSpec = &agg.Spec{Aggregates: agg.Count | agg.Sum | agg.Max | agg.Distinct, DistinctPrecision: 10}

// sessionValues are the sessions of buf (gap ms) that end after its Frozen
// time, each with its count, sum, max and distinct estimate.
func sessionValues(t *testing.T, gap int64, buf *keyedBuf) []string {
	t.Helper()
	ws := pipeline.WindowSpec{Kind: pipeline.Session, Gap: time.Duration(gap) * time.Millisecond}
	var out []string
	for _, kw := range keyedWindows(ws, buf) {
		st, err := kw.value(foldSpec, buf.Points)
		if err != nil {
			t.Fatal(err)
		}
		r := st.Result()
		out = append(out, fmt.Sprintf("%s n=%d sum=%v max=%v d=%d", kw.w.ID(), r.Count, r.Sum, r.Max, r.Distinct))
	}
	return out
}

// Holding runs as their aggregates changes no session, now or after more
// records: random keys' records, on time and late, are folded at random
// moments, and after every step the held state and one that keeps every
// record make the same sessions with the same values, judge the next
// records alike, and the held state round-trips through its encoding.
func TestHeldRunsMakeTheSameSessions(t *testing.T) {
	const gap = 1000
	ws := pipeline.WindowSpec{Kind: pipeline.Session, Gap: gap * time.Millisecond}
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		plain := &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold}
		held := &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold}
		var now, wm int64
		for step := 0; step < 12; step++ {
			var fresh []point
			for range 1 + rng.IntN(40) {
				now += int64(rng.IntN(700))
				t0 := now - int64(rng.IntN(3000)) // out of order, sometimes late
				pt := point{T: t0, V: float64(rng.IntN(50)), D: distinctHash([]byte{byte(rng.IntN(30))}), Th: noThreshold}
				if wm > t0 {
					pt.Th = wm
				}
				fresh = append(fresh, pt)
				wm = max(wm, now-500)
			}
			keptPlain, latePlain := judgeKeyed(ws, plain, fresh)
			keptHeld, lateHeld := judgeKeyed(ws, held, fresh)
			if fmt.Sprint(keptPlain) != fmt.Sprint(keptHeld) || fmt.Sprint(latePlain) != fmt.Sprint(lateHeld) {
				t.Fatalf("seed %d step %d: judged differently: kept %v / %v, late %v / %v", seed, step, keptPlain, keptHeld, latePlain, lateHeld)
			}
			plain.Points = mergePoints(plain.Points, keptPlain)
			held.Points = mergePoints(held.Points, keptHeld)
			if rng.IntN(2) == 0 {
				if _, err := foldSessionRuns(foldSpec, gap, held, rng.IntN(2) == 0); err != nil {
					t.Fatal(err)
				}
			}
			want, got := sessionValues(t, gap, plain), sessionValues(t, gap, held)
			if fmt.Sprint(want) != fmt.Sprint(got) {
				t.Fatalf("seed %d step %d: sessions differ\nrecords: %v\nheld:    %v", seed, step, want, got)
			}
			back, err := decodeKeyed(encodeKeyed(nil, held))
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if fmt.Sprint(sessionValues(t, gap, back)) != fmt.Sprint(got) || len(back.Points) != len(held.Points) {
				t.Fatalf("seed %d step %d: the held state does not round-trip", seed, step)
			}
		}
	}
}

// A session already emitted is not folded (recomputed from other bytes, a
// sum added in another order could differ and be corrected for nothing),
// nor a late record; a busy session's thousands of records become one point.
func TestFoldHoldsOpenRunsOnly(t *testing.T) {
	buf := &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold}
	for i := range 3 { // an emitted session [0, 1200)
		buf.Points = append(buf.Points, point{T: int64(i) * 100, V: 1, Th: noThreshold})
	}
	buf.Emitted[window.Of(0, 1200).ID()] = emitted{Start: 0, End: 1200, Rev: 1, Blob: []byte{1}}
	for i := range 5000 { // a busy open session from 10,000
		buf.Points = append(buf.Points, point{T: 10_000 + int64(i)*10, V: float64(i), Th: noThreshold})
	}
	buf.Points = append(buf.Points, point{T: 10_005, V: 7, Th: 60_000}) // late
	buf.Points = mergePoints(buf.Points, nil)
	before := pointsBytes(buf.Points)
	n, err := foldSessionRuns(foldSpec, 1000, buf, false)
	if err != nil || n != 1 {
		t.Fatalf("folded %d runs (%v), want the busy session's one", n, err)
	}
	if len(buf.Points) != 5 || buf.Points[3].Agg == nil || buf.Points[3].T != 10_000 || buf.Points[3].Until != 10_000+4999*10 {
		t.Fatalf("points after the fold: %d, want the emitted session's 3, the run, the late record: %+v", len(buf.Points), buf.Points[3:])
	}
	if after := pointsBytes(buf.Points); after*20 > before {
		t.Fatalf("the state takes %d bytes after the fold, %d before: want a twentieth at most", after, before)
	}
}

// Held runs are refused when forged: past the points, on a late point, on
// a point with a value, without an aggregate; and code from before them
// (version 5 without the flag) refuses their flag rather than misread.
func TestHeldRunsRefuseForgeries(t *testing.T) {
	st := foldSpec.New()
	st.Add(3, nil)
	blob, _ := st.MarshalBinary()
	good := &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold, Points: []point{
		{T: 5, V: 2, Th: noThreshold}, {T: 10, Until: 900, Agg: blob, Th: noThreshold}, {T: 950, V: 1, Th: noThreshold},
	}}
	enc := encodeKeyed(nil, good)
	back, err := decodeKeyed(enc)
	if err != nil || back.Points[1].Until != 900 || !bytes.Equal(back.Points[1].Agg, blob) || back.Points[0].Agg != nil {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	forged := func(pts []point, runs []byte) []byte {
		b := encodeKeyed(nil, &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold, Points: pts})
		// The runs follow the points: splice forged ones in before the
		// emitted windows' count (0) and the Frozen time.
		tail := len(b) - 1 - len(encodeVarint(noThreshold))
		out := append([]byte(nil), b[:tail]...)
		out[1] |= keyedHasRuns
		out = append(out, runs...)
		return append(out, b[tail:]...)
	}
	two := []point{{T: 5, V: 0, Th: noThreshold}, {T: 10, V: 0, Th: noThreshold}}
	withBlob := func(skip, span byte) []byte { return append([]byte{1, skip, span, byte(len(blob))}, blob...) }
	if _, err := decodeKeyed(forged(two, withBlob(1, 3))); err != nil {
		t.Errorf("a well-formed run is refused: %v", err)
	}
	for name, b := range map[string][]byte{
		"past the points":   forged(two, withBlob(2, 0)),
		"no aggregate":      forged(two, []byte{1, 0, 0, 0}),
		"zero runs":         forged(two, []byte{0}),
		"on a late point":   forged([]point{{T: 5, V: 0, Th: 9}}, withBlob(0, 1)),
		"on a valued point": forged([]point{{T: 5, V: 4, Th: noThreshold}}, withBlob(0, 1)),
	} {
		if _, err := decodeKeyed(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func encodeVarint(v int64) []byte {
	var b [10]byte
	n := 0
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	for u >= 0x80 {
		b[n] = byte(u) | 0x80
		u >>= 7
		n++
	}
	b[n] = byte(u)
	return b[:n+1]
}

// FuzzDecodeKeyedRuns: a keyed state blob, forged or cut, with held runs
// decodes to a state that encodes again, or is refused; never a panic.
func FuzzDecodeKeyedRuns(f *testing.F) {
	st := foldSpec.New()
	st.Add(3, []byte("x"))
	blob, _ := st.MarshalBinary()
	f.Add(encodeKeyed(nil, &keyedBuf{Emitted: map[string]emitted{}, Frozen: noThreshold, Points: []point{
		{T: 5, V: 2, Th: noThreshold, D: distinctHash([]byte("a"))}, {T: 10, Until: 900, Agg: blob, Th: noThreshold}, {T: 950, V: 1, Th: 2000},
	}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		buf, err := decodeKeyed(b)
		if err != nil {
			return
		}
		again, err := decodeKeyed(encodeKeyed(nil, buf))
		if err != nil || len(again.Points) != len(buf.Points) {
			t.Fatalf("a decoded state does not encode again: %v", err)
		}
		for i := range buf.Points {
			if buf.Points[i].HeldUntil() < buf.Points[i].T && buf.Points[i].Agg != nil {
				t.Fatalf("point %d: a run ending before it starts", i)
			}
		}
	})
}
