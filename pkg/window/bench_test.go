package window

import (
	"testing"
	"time"
)

var sinkWindow Window

func BenchmarkTumblingAssign(b *testing.B) {
	a := Tumbling{Size: time.Minute}
	at := ts("2026-11-29T10:41:07.250Z")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkWindow = a.Assign(at.Add(time.Duration(i) * time.Millisecond))
	}
}

func BenchmarkHoppingAppendWindows(b *testing.B) {
	h := Hopping{Size: 5 * time.Minute, Advance: time.Minute}
	at := ts("2026-11-29T10:41:07.250Z")
	buf := make([]Window, 0, 8)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = h.AppendWindows(buf[:0], at.Add(time.Duration(i)*time.Millisecond))
	}
}

func BenchmarkWindowAppendID(b *testing.B) {
	w := win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")
	buf := make([]byte, 0, IDLength)
	b.ReportAllocs()
	for b.Loop() {
		buf = w.AppendID(buf[:0])
	}
}

func BenchmarkWatermarkObserveAndDecide(b *testing.B) {
	wm := NewWatermark(5 * time.Second)
	rule := LateRule{Policy: Correct, AllowedLateness: time.Minute}
	a := Tumbling{Size: time.Minute}
	at := ts("2026-11-29T10:41:07.250Z")
	var d Decision
	ws := make([]Window, 0, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := at.Add(time.Duration(i) * time.Millisecond)
		wm.Observe(t)
		ws = a.AppendWindows(ws[:0], t)
		rule.Decide(&d, wm, ws)
	}
}

func BenchmarkSessionAssign(b *testing.B) {
	s := Session{Gap: 30 * time.Minute}
	at := ts("2026-11-29T10:41:07.250Z")
	existing := []Window{s.Of(at.Add(-2 * time.Hour)), s.Of(at)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = s.Assign(at.Add(time.Duration(i%1000)*time.Millisecond), existing)
	}
}

func BenchmarkSlidingAdd(b *testing.B) {
	s := Sliding{Difference: 10 * time.Second}
	at := ts("2026-11-29T10:41:07.250Z")
	held := make([]time.Time, 100) // 100 records of the key in the last 20s
	for i := range held {
		held[i] = at.Add(-20*time.Second + time.Duration(i)*200*time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Add(held, at)
	}
}
