package window

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func win(start, end string) Window { return Window{Start: ts(start).UTC(), End: ts(end).UTC()} }

func TestWindowID(t *testing.T) {
	tests := []struct {
		name string
		w    Window
		want string
	}{
		{"minute", win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z"), "2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z"},
		{"milliseconds", Of(1, 5002), "1970-01-01T00:00:00.001Z/1970-01-01T00:00:05.002Z"},
		{"other zone written in UTC", Window{Start: ts("2026-11-29T11:41:00+01:00"), End: ts("2026-11-29T11:42:00+01:00")}, "2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z"},
		{"before 1970", Of(-1500, -500), "1969-12-31T23:59:58.500Z/1969-12-31T23:59:59.500Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.ID(); got != tt.want {
				t.Fatalf("ID() = %q, want %q", got, tt.want)
			}
			if len(tt.want) != IDLength {
				t.Fatalf("len = %d, want IDLength %d", len(tt.want), IDLength)
			}
			back, err := ParseID(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Start.Equal(tt.w.Start) || !back.End.Equal(tt.w.End) {
				t.Fatalf("ParseID(%q) = %v, want %v", tt.want, back, tt.w)
			}
		})
	}
}

func TestWindowIDsSortByStart(t *testing.T) {
	// Whole seconds and fractions mixed: an optional fraction would sort
	// "10:41:00.500Z" before "10:41:00Z".
	r := rand.New(rand.NewPCG(1, 2))
	var ws []Window
	for range 500 {
		s := int64(1_795_000_000_000) + r.Int64N(10_000)*500
		ws = append(ws, Of(s, s+1+r.Int64N(120_000)))
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID()
	}
	slices.SortFunc(ws, compareWindows)
	sort.Strings(ids)
	for i := range ws {
		if ids[i] != ws[i].ID() {
			t.Fatalf("sorted IDs differ from windows sorted by (start, end) at %d: %s vs %s", i, ids[i], ws[i].ID())
		}
	}
}

func TestParseIDErrors(t *testing.T) {
	for _, s := range []string{"", "2026-11-29T10:41:00Z", "x/2026-11-29T10:41:00Z", "2026-11-29T10:41:00Z/y",
		"2026-11-29T10:42:00Z/2026-11-29T10:41:00Z", "2026-11-29T10:41:00Z/2026-11-29T10:41:00Z"} {
		if _, err := ParseID(s); !errors.Is(err, ErrBadID) {
			t.Errorf("ParseID(%q) error = %v, want ErrBadID", s, err)
		}
	}
}

func TestWindowJSON(t *testing.T) {
	w := win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")
	b, err := json.Marshal(struct{ W Window }{w})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"W":"2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z"}` {
		t.Fatalf("json = %s", b)
	}
	var back struct{ W Window }
	if err := json.Unmarshal(b, &back); err != nil || back.W != w {
		t.Fatalf("round trip = %v, %v", back.W, err)
	}
}

func TestAppendIDDoesNotAllocate(t *testing.T) {
	w := win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")
	buf := make([]byte, 0, IDLength)
	if n := testing.AllocsPerRun(100, func() { buf = w.AppendID(buf[:0]) }); n != 0 {
		t.Fatalf("AppendID allocates %v times", n)
	}
}

func TestTumbling(t *testing.T) {
	tests := []struct {
		name string
		a    Tumbling
		at   string
		want Window
	}{
		{"round down to the minute", Tumbling{Size: time.Minute}, "2026-11-29T10:41:07.250Z", win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")},
		{"start is inside", Tumbling{Size: time.Minute}, "2026-11-29T10:41:00Z", win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")},
		{"end is outside", Tumbling{Size: time.Minute}, "2026-11-29T10:41:59.999999999Z", win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")},
		{"zone does not matter", Tumbling{Size: time.Hour}, "2026-11-29T11:41:07+01:00", win("2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z")},
		{"day at midnight UTC-5", Tumbling{Size: 24 * time.Hour, Offset: 5 * time.Hour}, "2026-11-29T03:00:00Z", win("2026-11-28T05:00:00Z", "2026-11-29T05:00:00Z")},
		{"offset larger than size", Tumbling{Size: time.Minute, Offset: 90 * time.Second}, "2026-11-29T10:41:07Z", win("2026-11-29T10:40:30Z", "2026-11-29T10:41:30Z")},
		{"before 1970", Tumbling{Size: time.Minute}, "1969-12-31T23:59:30.5Z", win("1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.a.Validate(); err != nil {
				t.Fatal(err)
			}
			got := tt.a.Assign(ts(tt.at))
			if got != tt.want {
				t.Fatalf("Assign(%s) = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}

func TestTumblingEveryRecordInExactlyOneWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a := Tumbling{Size: time.Duration(1+r.Int64N(3_600_000)) * time.Millisecond, Offset: time.Duration(r.Int64N(7_200_000)-3_600_000) * time.Millisecond}
		at := time.Unix(0, r.Int64N(4e18)-2e18)
		w := a.Assign(at)
		if !w.Contains(at) {
			t.Fatalf("%+v: window %v does not contain %v", a, w, at)
		}
		if w.Size() != a.Size {
			t.Fatalf("%+v: window %v has size %s", a, w, w.Size())
		}
		// The neighbours do not contain it, and tile the line with w.
		prev, next := a.Assign(w.Start.Add(-time.Nanosecond)), a.Assign(w.End)
		if prev.End != w.Start || next.Start != w.End || prev.Contains(at) || next.Contains(at) {
			t.Fatalf("%+v: windows around %v: %v %v %v", a, at, prev, w, next)
		}
		// Windows are aligned: every start is offset + k·size.
		if (w.Start.UnixMilli()-a.Offset.Milliseconds())%a.Size.Milliseconds() != 0 {
			t.Fatalf("%+v: window %v is not aligned", a, w)
		}
	}
}

func TestTumblingValidate(t *testing.T) {
	tests := []struct {
		a    Tumbling
		want string
	}{
		{Tumbling{}, "size must be positive, not 0s"},
		{Tumbling{Size: -time.Second}, "size must be positive, not -1s"},
		{Tumbling{Size: time.Second + time.Microsecond}, "size 1.000001s is not a whole number of milliseconds"},
		{Tumbling{Size: time.Second, Offset: time.Microsecond}, "offset 1µs is not a whole number of milliseconds"},
	}
	for _, tt := range tests {
		if err := tt.a.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: Validate() = %v, want %q", tt.a, err, tt.want)
		}
	}
}

func TestHoppingValidate(t *testing.T) {
	tests := []struct {
		h    Hopping
		want string
	}{
		{Hopping{Size: 2 * time.Minute, Advance: 45 * time.Second}, "advance 45s does not divide size 2m0s"},
		{Hopping{Size: time.Minute, Advance: 2 * time.Minute}, "advance 2m0s is longer than size 1m0s: records between windows would be in none"},
		{Hopping{Size: time.Minute}, "advance must be positive, not 0s"},
		{Hopping{Advance: time.Minute}, "size must be positive, not 0s"},
		{Hopping{Size: time.Minute, Advance: time.Second, Offset: time.Nanosecond}, "offset 1ns is not a whole number of milliseconds"},
	}
	for _, tt := range tests {
		if err := tt.h.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: Validate() = %v, want %q", tt.h, err, tt.want)
		}
	}
	if err := (Hopping{Size: time.Minute, Advance: time.Minute}).Validate(); err != nil {
		t.Errorf("advance = size is a tumbling window: %v", err)
	}
}

func TestHoppingWindowsAndPanes(t *testing.T) {
	h := Hopping{Size: 3 * time.Minute, Advance: time.Minute}
	at := ts("2026-11-29T10:41:07Z")
	if got, want := h.Pane(at), win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z"); got != want {
		t.Fatalf("Pane = %v, want %v", got, want)
	}
	got := h.AppendWindows(nil, at)
	want := []Window{
		win("2026-11-29T10:39:00Z", "2026-11-29T10:42:00Z"),
		win("2026-11-29T10:40:00Z", "2026-11-29T10:43:00Z"),
		win("2026-11-29T10:41:00Z", "2026-11-29T10:44:00Z"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppendWindows = %v, want %v", got, want)
	}
	panes := h.AppendPanesOf(nil, want[0])
	wantPanes := []Window{
		win("2026-11-29T10:39:00Z", "2026-11-29T10:40:00Z"),
		win("2026-11-29T10:40:00Z", "2026-11-29T10:41:00Z"),
		win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z"),
	}
	if !slices.Equal(panes, wantPanes) {
		t.Fatalf("AppendPanesOf = %v, want %v", panes, wantPanes)
	}
}

// TestHoppingWindowEqualsMergeOfPanes aggregates records straight into every
// hopping window that contains them (the definition) and through panes (one
// write per record, windows merged from Size/Advance panes), and expects the
// same count and sum in every window.
func TestHoppingWindowEqualsMergeOfPanes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 50 {
		adv := time.Duration(1+r.Int64N(10)) * time.Second
		h := Hopping{Size: adv * time.Duration(1+r.IntN(6)), Advance: adv, Offset: time.Duration(r.Int64N(10_000)) * time.Millisecond}
		if err := h.Validate(); err != nil {
			t.Fatal(err)
		}
		type agg struct{ n, sum int64 }
		direct := map[Window]agg{}
		panes := map[Window]agg{}
		base := int64(1_795_000_000_000)
		for range 300 {
			at := time.UnixMilli(base + r.Int64N(120_000))
			v := r.Int64N(100)
			// The definition: every window [s, s+Size) with s aligned to
			// Advance+Offset that contains at.
			n := 0
			// Aligned starts: offset + k·advance, stepping from far before.
			first := h.Offset.Milliseconds() + (base/adv.Milliseconds()-1000)*adv.Milliseconds()
			for s := first; s < base+140_000; s += adv.Milliseconds() {
				w := Of(s, s+h.Size.Milliseconds())
				if w.Contains(at) {
					a := direct[w]
					direct[w] = agg{a.n + 1, a.sum + v}
					n++
				}
			}
			if n != h.PaneCount() {
				t.Fatalf("round %d: %v is in %d windows, want %d", round, at, n, h.PaneCount())
			}
			ws := h.AppendWindows(nil, at)
			if len(ws) != n {
				t.Fatalf("AppendWindows gave %d windows, want %d", len(ws), n)
			}
			for _, w := range ws {
				if !w.Contains(at) {
					t.Fatalf("AppendWindows: %v does not contain %v", w, at)
				}
			}
			p := h.Pane(at)
			a := panes[p]
			panes[p] = agg{a.n + 1, a.sum + v}
		}
		for w, want := range direct {
			var got agg
			for _, p := range h.AppendPanesOf(nil, w) {
				got.n += panes[p].n
				got.sum += panes[p].sum
			}
			if got != want {
				t.Fatalf("round %d: %+v window %v: merged panes %+v, direct %+v", round, h, w, got, want)
			}
		}
		// Every pane's update touches exactly the windows made of it.
		for p := range panes {
			for _, w := range h.AppendWindowsOfPane(nil, p) {
				if !slices.Contains(h.AppendPanesOf(nil, w), p) {
					t.Fatalf("window %v of pane %v does not list the pane", w, p)
				}
			}
		}
	}
}

func TestSlidingKafkaExample(t *testing.T) {
	// From Kafka Streams' SlidingWindows documentation: difference 5000ms,
	// records at 8000, 9200 and 12400 give five windows.
	s := Sliding{Difference: 5 * time.Second}
	recs := []time.Time{time.UnixMilli(8000), time.UnixMilli(9200), time.UnixMilli(12400)}
	want := []Window{
		Of(3000, 8001),  // [3000;8000] {8000}
		Of(4200, 9201),  // [4200;9200] {8000, 9200}
		Of(7400, 12401), // [7400;12400] all three
		Of(8001, 13002), // [8001;13001] {9200, 12400}
		Of(9201, 14202), // [9201;14201] {12400}
	}
	if got := s.Windows(recs); !slices.Equal(got, want) {
		t.Fatalf("Windows = %v, want %v", got, want)
	}
	wantContents := [][]int64{{8000}, {8000, 9200}, {8000, 9200, 12400}, {9200, 12400}, {12400}}
	for i, w := range want {
		var got []int64
		for _, r := range recs {
			if w.Contains(r) {
				got = append(got, r.UnixMilli())
			}
		}
		if !slices.Equal(got, wantContents[i]) {
			t.Errorf("window %v holds %v, want %v", w, got, wantContents[i])
		}
	}

	// The same, record by record, in order: what each record creates.
	var held []time.Time
	steps := []SlidingUpdate{
		{Created: []Window{Of(3000, 8001)}},
		{Created: []Window{Of(4200, 9201), Of(8001, 13002)}, Updated: nil},
		{Created: []Window{Of(7400, 12401), Of(9201, 14202)}, Updated: []Window{Of(8001, 13002)}},
	}
	for i, r := range recs {
		u := s.Add(held, r)
		if !slices.Equal(u.Created, steps[i].Created) || !slices.Equal(u.Updated, steps[i].Updated) {
			t.Fatalf("record %d: Add = %+v, want %+v", i, u, steps[i])
		}
		held = append(held, r)
	}
}

func TestSlidingAdd(t *testing.T) {
	s := Sliding{Difference: 10 * time.Millisecond}
	ms := func(v ...int64) []time.Time {
		var out []time.Time
		for _, x := range v {
			out = append(out, time.UnixMilli(x))
		}
		return out
	}
	tests := []struct {
		name string
		held []time.Time
		at   int64
		want SlidingUpdate
	}{
		{"first record: only its left window", nil, 100, SlidingUpdate{Created: []Window{Of(90, 101)}}},
		{"same millisecond again: updates its left window", ms(100), 100, SlidingUpdate{Updated: []Window{Of(90, 101)}}},
		{"exactly d later: inclusive, so the earlier record's right window appears", ms(100), 110,
			SlidingUpdate{Created: []Window{Of(100, 111), Of(101, 112)}, Updated: nil}},
		{"d+1 later: no shared window", ms(100), 111, SlidingUpdate{Created: []Window{Of(101, 112)}}},
		{"earlier record arriving late: its right window holds the later one", ms(100), 95,
			SlidingUpdate{Created: []Window{Of(85, 96), Of(96, 107)}, Updated: []Window{Of(90, 101)}}},
		{"between two: updates the windows spanning it", ms(100, 106), 103,
			SlidingUpdate{Created: []Window{Of(93, 104), Of(104, 115)}, Updated: []Window{Of(96, 107), Of(101, 112)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := s.Add(tt.held, time.UnixMilli(tt.at))
			if !slices.Equal(u.Created, tt.want.Created) || !slices.Equal(u.Updated, tt.want.Updated) {
				t.Fatalf("Add = %+v, want %+v", u, tt.want)
			}
		})
	}
}

// TestSlidingIncrementalEqualsDefinition adds random records in random order
// and keeps each window's contents as a caller would (created windows computed
// from the buffer, updated ones get the record); at the end the windows and
// their contents must be the definition's (Windows over all records).
func TestSlidingIncrementalEqualsDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 200 {
		s := Sliding{Difference: time.Duration(1+r.Int64N(30)) * time.Millisecond}
		n := 1 + r.IntN(40)
		recs := make([]time.Time, n)
		for i := range recs {
			recs[i] = time.UnixMilli(1000 + r.Int64N(120)).Add(time.Duration(r.Int64N(1e6))) // sub-ms noise
		}
		contents := map[Window]int{}
		var held []time.Time
		for _, at := range recs {
			u := s.Add(held, at)
			for _, w := range u.Updated {
				if _, ok := contents[w]; !ok {
					t.Fatalf("round %d: updated window %v did not exist", round, w)
				}
				contents[w]++
			}
			i, _ := slices.BinarySearchFunc(held, at, func(a, b time.Time) int { return a.Compare(b) })
			held = slices.Insert(held, i, at)
			for _, w := range u.Created {
				if _, ok := contents[w]; ok {
					t.Fatalf("round %d: created window %v existed", round, w)
				}
				for _, h := range held {
					if w.Contains(h) {
						contents[w]++
					}
				}
			}
		}
		want := s.Windows(recs)
		if len(want) != len(contents) {
			t.Fatalf("round %d: %d windows incrementally, %d by definition", round, len(contents), len(want))
		}
		for _, w := range want {
			n := 0
			for _, h := range recs {
				if w.Contains(h) {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("round %d: empty window %v", round, w)
			}
			if contents[w] != n {
				t.Fatalf("round %d: window %v holds %d incrementally, %d by definition", round, w, contents[w], n)
			}
		}
	}
}

func TestSessionAssign(t *testing.T) {
	s := Session{Gap: 30 * time.Minute}
	a := win("2026-11-29T10:00:00Z", "2026-11-29T10:40:00Z") // records 10:00 .. 10:10
	b := win("2026-11-29T11:00:00Z", "2026-11-29T11:30:00Z") // one record at 11:00
	tests := []struct {
		name     string
		at       string
		want     Window
		replaces []Window
	}{
		{"new session far from both", "2026-11-29T14:00:00Z", win("2026-11-29T14:00:00Z", "2026-11-29T14:30:00Z"), nil},
		{"inside a session leaves it alone", "2026-11-29T10:05:00Z", a, []Window{a}},
		{"just after extends the end", "2026-11-29T10:20:00Z", win("2026-11-29T10:00:00Z", "2026-11-29T10:50:00Z"), []Window{a}},
		{"just before extends the start", "2026-11-29T09:45:00Z", win("2026-11-29T09:45:00Z", "2026-11-29T10:40:00Z"), []Window{a}},
		{"bridging merges both", "2026-11-29T10:35:00Z", win("2026-11-29T10:00:00Z", "2026-11-29T11:30:00Z"), []Window{a, b}},
		{"exactly gap after the last record starts a new session", "2026-11-29T11:30:00Z", win("2026-11-29T11:30:00Z", "2026-11-29T12:00:00Z"), nil},
		{"exactly gap before the first record starts a new session", "2026-11-29T09:30:00Z", win("2026-11-29T09:30:00Z", "2026-11-29T10:00:00Z"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := s.Assign(ts(tt.at), []Window{b, a})
			if u.Window != tt.want || !slices.Equal(u.Replaces, tt.replaces) {
				t.Fatalf("Assign = %v replacing %v, want %v replacing %v", u.Window, u.Replaces, tt.want, tt.replaces)
			}
		})
	}
}

// TestSessionsAreOrderIndependent feeds the same records in many orders and
// expects the same sessions, equal to the definition: sort the records and
// cut wherever two neighbours are Gap or more apart.
func TestSessionsAreOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for round := range 300 {
		s := Session{Gap: time.Duration(1+r.Int64N(20)) * time.Millisecond}
		recs := make([]time.Time, 1+r.IntN(30))
		for i := range recs {
			recs[i] = time.UnixMilli(r.Int64N(200))
		}
		sorted := slices.SortedFunc(slices.Values(recs), func(a, b time.Time) int { return a.Compare(b) })
		var want []Window
		for i, at := range sorted {
			if i == 0 || at.Sub(sorted[i-1]) >= s.Gap {
				want = append(want, s.Of(at))
				continue
			}
			want[len(want)-1].End = s.Of(at).End
		}
		for range 5 {
			r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			var sessions []Window
			for _, at := range recs {
				u := s.Assign(at, sessions)
				if !u.Window.Contains(at) {
					t.Fatalf("session %v does not contain its record %v", u.Window, at)
				}
				sessions = u.Apply(sessions)
			}
			if !slices.Equal(sessions, want) {
				t.Fatalf("round %d gap %s order %v: sessions %v, want %v", round, s.Gap, recs, sessions, want)
			}
		}
	}
}

func TestWatermark(t *testing.T) {
	wm := NewWatermark(5 * time.Second)
	w := win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")
	if wm.Final(w) || !wm.Current().IsZero() {
		t.Fatal("a fresh watermark finalises nothing")
	}
	if !wm.Observe(ts("2026-11-29T10:41:30Z")) {
		t.Fatal("first observation moves the watermark")
	}
	if got, want := wm.Current(), ts("2026-11-29T10:41:25Z"); !got.Equal(want) {
		t.Fatalf("Current = %v, want %v", got, want)
	}
	if wm.Observe(ts("2026-11-29T10:41:10Z")) {
		t.Fatal("an out-of-order record must not move the watermark")
	}
	wm.Observe(ts("2026-11-29T10:42:04.999Z"))
	if wm.Final(w) {
		t.Fatal("window is not final while watermark < end")
	}
	wm.Observe(ts("2026-11-29T10:42:05Z"))
	if !wm.Final(w) || !wm.Late(w) {
		t.Fatal("window is final when watermark = end")
	}
	if next := win("2026-11-29T10:42:00Z", "2026-11-29T10:43:00Z"); wm.Final(next) {
		t.Fatal("next window is not final")
	}
}

func TestWatermarkAdvanceIdle(t *testing.T) {
	const idle = time.Minute
	wm := NewWatermark(5 * time.Second)
	wm.Observe(ts("2026-11-29T10:41:30Z"))
	now := ts("2026-11-29T10:41:31Z")
	if wm.AdvanceIdle(now, idle) {
		t.Fatal("the first tick only starts the idle clock")
	}
	if wm.AdvanceIdle(now.Add(59*time.Second), idle) {
		t.Fatal("not idle before the timeout")
	}
	if !wm.AdvanceIdle(now.Add(2*time.Minute), idle) {
		t.Fatal("idle for 2m with a 1m timeout must advance")
	}
	// now − idleTimeout − outOfOrderness
	if got, want := wm.Current(), ts("2026-11-29T10:42:26Z"); !got.Equal(want) {
		t.Fatalf("Current = %v, want %v", got, want)
	}
	if !wm.Final(win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z")) {
		t.Fatal("the idle shard's window must close")
	}

	// A busy shard is not idle: its max event time moves between ticks.
	busy := NewWatermark(5 * time.Second)
	at := ts("2026-11-29T09:00:00Z") // an hour of backlog behind now
	for i := range 10 {
		busy.Observe(at.Add(time.Duration(i) * time.Second))
		if busy.AdvanceIdle(now.Add(time.Duration(i)*2*time.Minute), idle) {
			t.Fatal("a shard with progressing records was advanced by processing time")
		}
	}
	// A shard that never saw a record still advances.
	empty := NewWatermark(0)
	empty.AdvanceIdle(now, idle)
	if !empty.AdvanceIdle(now.Add(idle), idle) || !empty.Current().Equal(now) {
		t.Fatalf("empty shard's watermark = %v, want %v", empty.Current(), now)
	}
}

// An idle shard whose records are held between invocations (Lambda's
// tumbling window state) advances no further than the hold: the windows
// holding those records stay open until they are applied.
func TestWatermarkAdvanceIdleHeld(t *testing.T) {
	const idle = 30 * time.Second
	now := ts("2026-11-29T10:00:15Z")
	for _, tt := range []struct {
		name string
		hold string
		want string
	}{
		{"no hold: now − idle − outOfOrderness", "", "2026-11-29T10:00:10Z"},
		{"a hold before that stops it there", "2026-11-29T10:00:05Z", "2026-11-29T10:00:05Z"},
		{"a hold after that changes nothing", "2026-11-29T10:00:40Z", "2026-11-29T10:00:10Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wm := NewWatermark(5 * time.Second)
			wm.Observe(ts("2026-11-29T10:00:00Z"))
			var hold time.Time
			if tt.hold != "" {
				hold = ts(tt.hold)
			}
			wm.AdvanceIdleHeld(now, idle, hold)
			if !wm.AdvanceIdleHeld(now.Add(idle), idle, hold) {
				t.Fatal("idle for the timeout: the watermark must move")
			}
			if got := wm.Current(); !got.Equal(ts(tt.want)) {
				t.Errorf("Current = %v, want %s", got, tt.want)
			}
			if tt.hold != "" && !ts(tt.hold).Before(ts(tt.want)) && wm.Final(win(tt.hold, "2026-11-29T10:01:00Z")) {
				t.Error("the window holding the held records closed")
			}
		})
	}
}

// An idle advance subtracts the idle timeout and the out-of-orderness
// from processing time one after the other: their sum, for a caller that
// set them past what any check allows, wrapped round to a time far ahead
// of now, so two ticks after one record closed its window and the next
// record for it was dropped as late. Past the range a time can hold, the
// advance stops at the earliest time, not a wrapped one.
func TestWatermarkIdleAdvanceDoesNotWrap(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	record := ts("2026-11-29T10:00:00Z")
	for _, tt := range []struct {
		name                 string
		outOfOrderness, idle time.Duration
	}{
		{"out-of-orderness the largest duration", huge, time.Minute},
		{"the two together just past the largest duration", huge - 30*time.Second, time.Minute},
		{"idle timeout the largest duration", time.Second, huge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wm := NewWatermark(tt.outOfOrderness)
			wm.Observe(record)
			now := record.Add(time.Minute)
			wm.AdvanceIdle(now, tt.idle)
			wm.AdvanceIdle(now.Add(time.Minute), tt.idle)
			if w := win("2026-11-29T10:00:00Z", "2026-11-29T10:01:00Z"); wm.Final(w) {
				t.Errorf("watermark %v closed the record's window %v", wm.Current(), w)
			}
			if wm.Current().After(record) {
				t.Errorf("watermark %v is past the only record, at %v", wm.Current(), record)
			}
		})
	}
}

func TestWatermarkIsMonotonic(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 100 {
		wm := NewWatermark(time.Duration(r.Int64N(10)) * time.Second)
		now := ts("2026-11-29T10:00:00Z")
		prev := wm.Current()
		for range 200 {
			switch r.IntN(4) {
			case 0, 1:
				wm.Observe(now.Add(time.Duration(r.Int64N(600)-400) * time.Second))
			case 2:
				now = now.Add(time.Duration(r.Int64N(90)) * time.Second)
				wm.AdvanceIdle(now, time.Duration(1+r.Int64N(60))*time.Second)
			case 3:
				o := NewWatermark(time.Duration(r.Int64N(10)) * time.Second)
				o.Observe(now.Add(time.Duration(r.Int64N(600)-400) * time.Second))
				wm.Merge(o)
			}
			if wm.Current().Before(prev) {
				t.Fatalf("watermark went back from %v to %v", prev, wm.Current())
			}
			prev = wm.Current()
		}
	}
}

func TestWatermarkEncoding(t *testing.T) {
	wm := NewWatermark(5 * time.Second)
	wm.Observe(ts("2026-11-29T10:41:30.123456789Z"))
	wm.AdvanceIdle(ts("2026-11-29T10:43:00Z"), time.Minute)

	b, err := wm.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Watermark
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if back != *wm {
		t.Fatalf("binary round trip: %+v, want %+v", back, *wm)
	}
	t.Logf("binary watermark: %d bytes", len(b))
	var zero Watermark
	zb, _ := zero.MarshalBinary()
	var zback Watermark
	if err := zback.UnmarshalBinary(zb); err != nil || zback != zero {
		t.Fatalf("zero watermark round trip: %+v, %v", zback, err)
	}
	for i := range len(b) {
		if err := new(Watermark).UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("truncated encoding (%d of %d bytes) decoded", i, len(b))
		}
	}

	j, err := json.Marshal(wm)
	if err != nil {
		t.Fatal(err)
	}
	var jback Watermark
	if err := json.Unmarshal(j, &jback); err != nil {
		t.Fatal(err)
	}
	if !jback.Value.Equal(wm.Value) || !jback.MaxEventTime.Equal(wm.MaxEventTime) || !jback.IdleSince.Equal(wm.IdleSince) || jback.OutOfOrderness != wm.OutOfOrderness {
		t.Fatalf("JSON round trip: %s gave %+v", j, jback)
	}
}

func TestLateRuleDecide(t *testing.T) {
	wm := NewWatermark(0)
	wm.Observe(ts("2026-11-29T10:45:00Z"))
	old := win("2026-11-29T10:30:00Z", "2026-11-29T10:31:00Z")    // final 14m ago
	recent := win("2026-11-29T10:43:00Z", "2026-11-29T10:44:00Z") // final 1m ago
	edge := win("2026-11-29T10:44:00Z", "2026-11-29T10:45:00Z")   // final right now
	open := win("2026-11-29T10:45:00Z", "2026-11-29T10:46:00Z")   // open
	ws := []Window{old, recent, edge, open}
	tests := []struct {
		name                     string
		rule                     LateRule
		open, corrected, dropped []Window
	}{
		{"drop", LateRule{Policy: Drop}, []Window{open}, nil, []Window{old, recent, edge}},
		{"correct within 5m", LateRule{Policy: Correct, AllowedLateness: 5 * time.Minute}, []Window{open}, []Window{recent, edge}, []Window{old}},
		{"correct within exactly 1m: the limit is exclusive", LateRule{Policy: Correct, AllowedLateness: time.Minute}, []Window{open}, []Window{edge}, []Window{old, recent}},
	}
	var d Decision
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.rule.Validate(); err != nil {
				t.Fatal(err)
			}
			tt.rule.Decide(&d, wm, ws)
			if !slices.Equal(d.Open, tt.open) || !slices.Equal(d.Corrected, tt.corrected) || !slices.Equal(d.Dropped, tt.dropped) {
				t.Fatalf("Decide = %+v", d)
			}
			if !d.Late() || !d.Apply() {
				t.Fatal("a record with open and late windows is late and applies")
			}
		})
	}
	LateRule{Policy: Drop}.Decide(&d, wm, []Window{old})
	if d.Apply() || !d.Late() {
		t.Fatal("a record whose only window was dropped does not apply")
	}
}

func TestLateRuleValidate(t *testing.T) {
	tests := []struct {
		r    LateRule
		want string
	}{
		{LateRule{Policy: Drop, AllowedLateness: time.Minute}, "allowed lateness 1m0s only applies to the correct policy"},
		{LateRule{Policy: Correct}, "allowed lateness must be positive under the correct policy, not 0s"},
		{LateRule{}, "unknown late policy 0"},
	}
	for _, tt := range tests {
		if err := tt.r.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: Validate() = %v, want %q", tt.r, err, tt.want)
		}
	}
	for _, s := range []string{"drop", "correct"} {
		p, err := ParseLatePolicy(s)
		if err != nil || p.String() != s {
			t.Errorf("ParseLatePolicy(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParseLatePolicy("ignore"); err == nil || !strings.Contains(err.Error(), `"ignore" is not a late policy`) {
		t.Errorf("ParseLatePolicy(ignore) = %v", err)
	}
}

func TestCorrectionJSON(t *testing.T) {
	c := NewCorrection(win("2026-11-29T10:41:00Z", "2026-11-29T10:42:00Z"), 1, 41, 42)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"window":"2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z","revision":2,"previous":41,"current":42}`
	if string(b) != want {
		t.Fatalf("correction = %s, want %s", b, want)
	}
}

func TestAppendIDTimeMatchesLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 10_000 {
		at := time.UnixMilli(r.Int64N(400_000_000_000_000) - 200_000_000_000_000) // years about −4400 to 8300
		want := at.UTC().AppendFormat(nil, idLayout)
		if got := appendIDTime(nil, at); string(got) != string(want) {
			t.Fatalf("appendIDTime(%v) = %s, want %s", at, got, want)
		}
	}
}

// TestMergeKeepsTheIdleClock: a batch of records that move no event time
// (another type's, which a join or stream handler skips) stores its copy
// of the shard's watermark, merged with the stored one. The merge dropped
// the tick's idle memory (IdleMax, IdleSince), so each such batch
// restarted the idle clock and, while other traffic kept arriving, the
// shard never advanced as idle (a search waited for minutes to come out
// unmatched). The memory is kept while it is of the merged newest event
// time, the earlier clock when both copies have one; a copy whose event
// time moved has no idle memory to keep.
func TestMergeKeepsTheIdleClock(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	idle := 20 * time.Second
	stored := NewWatermark(5 * time.Second)
	stored.Observe(t0)
	stored.AdvanceIdle(t0.Add(10*time.Second), idle) // the tick starts the clock

	batch := NewWatermark(5 * time.Second) // a batch's copy: the same event time, no clock
	batch.Observe(t0)
	batch.Merge(stored)
	if !batch.IdleSince.Equal(t0.Add(10*time.Second)) || !batch.IdleMax.Equal(t0) {
		t.Fatalf("merged idle memory %v since %v: want the tick's, %v since %v", batch.IdleMax, batch.IdleSince, t0, t0.Add(10*time.Second))
	}
	if !batch.AdvanceIdle(t0.Add(31*time.Second), idle) {
		t.Error("the merged copy did not advance 21 s after the tick started the idle clock")
	}

	// Both with a clock on the same event time: the earlier.
	a, b := *stored, *stored
	b.IdleSince = t0.Add(15 * time.Second)
	b.Merge(&a)
	if !b.IdleSince.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("merged clock %v, want the earlier %v", b.IdleSince, t0.Add(10*time.Second))
	}

	// A copy that saw a newer event time: the clock of the older time is
	// not kept (the shard was not idle).
	moved := NewWatermark(5 * time.Second)
	moved.Observe(t0.Add(time.Second))
	moved.Merge(stored)
	if !moved.IdleSince.IsZero() {
		t.Errorf("a copy whose event time moved kept the idle clock of the older one (since %v)", moved.IdleSince)
	}
}
