package window

import (
	"testing"
	"time"
)

// heldAt is a held record for the tests: its time and threshold.
type heldAt struct{ t, th int64 }

func (h heldAt) HeldAt() int64    { return h.t }
func (h heldAt) Threshold() int64 { return h.th }
func (h heldAt) HeldUntil() int64 { return h.t }

// A key active without a pause holds every record of its one session:
// judging a batch replays them all, so the replay must not allocate per
// record held (it did once: a slice for each record that joined the
// previous one), or a busy key's every batch costs more than the last.
func TestReplaySessionsAllocatesPerRunNotPerRecord(t *testing.T) {
	const gap = int64(30 * time.Second / time.Millisecond)
	for _, n := range []int{100, 10_000} {
		pts := make([]heldAt, n)
		for i := range pts {
			pts[i] = heldAt{t: int64(i) * 400, th: NoThreshold} // one session: 400 ms apart, gap 30 s
		}
		var ss *SessionReplay
		allocs := testing.AllocsPerRun(5, func() { ss = ReplaySessions(gap, pts) })
		if got, want := ss.EndOf(n-1), pts[n-1].t+gap; got != want {
			t.Fatalf("%d records: the session ends at %d, want %d", n, got, want)
		}
		if allocs > 8 {
			t.Errorf("%d records in one session: ReplaySessions made %.0f allocations, want at most 8", n, allocs)
		}
	}
}

// HeldWindowBounds gives the windows HeldWindows gives, sessions and
// sliding windows alike, late records included.
func TestHeldWindowBoundsAreHeldWindows(t *testing.T) {
	pts := []heldAt{{0, NoThreshold}, {1000, NoThreshold}, {5000, NoThreshold}, {5500, 9000}, {20000, NoThreshold}, {20500, 25000}, {40000, NoThreshold}}
	for _, k := range []Defined{{Gap: 3 * time.Second}, {Gap: 10 * time.Second}, {Difference: 2 * time.Second}} {
		for _, frozen := range []int64{NoThreshold, 4000, 30000} {
			full, bounds := HeldWindows(k, frozen, pts), HeldWindowBounds(k, frozen, pts)
			if len(full) != len(bounds) {
				t.Fatalf("%+v frozen %d: %d windows, want %d", k, frozen, len(bounds), len(full))
			}
			for i := range full {
				if !full[i].Window.Start.Equal(bounds[i].Window.Start) || !full[i].Window.End.Equal(bounds[i].Window.End) {
					t.Errorf("%+v frozen %d: window %d is %v, want %v", k, frozen, i, bounds[i].Window, full[i].Window)
				}
			}
		}
	}
}
