package aggregate

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/window"
)

// codecProcessor is a processor of the stack's pipeline shape, for the
// window state codec: tumbling 1m, hopping 5m/1m, session.
func codecProcessor(t testing.TB) *Processor {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(`{"name":"codec","key":"key","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"},
	  {"kind":"hopping","size":"5m","advance":"1m"},{"kind":"session","gap":"30s"}],
	  "aggregates":["count","sum","min","max","mean","quantiles"],"quantiles":[0.5,0.99],"outOfOrderness":"5s"}`))
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, nil, nil, "")
}

// seqOf is sequence number i of a Kinesis shard: 56 digits.
func seqOf(i int) string {
	return fmt.Sprintf("4960118965842235937883629852182763847532018901%010d", i)
}

// randomPartials is a window state's partials as an interval builds them:
// keys with a tumbling window and the hopping pane it coincides with
// (equal partials), panes of hopping windows alone, late records' sets
// and odd windows, sequence numbers of a Kinesis shard and of other
// shapes.
func randomPartials(p *Processor, r *rand.Rand, keys int) (map[setKey]*partial, string) {
	out := map[setKey]*partial{}
	minute := time.Date(2026, 11, 29, 10, 41, 0, 0, time.UTC)
	last := 0
	newPartial := func(records int) *partial {
		pt := &partial{}
		pt.own = *p.cfg.Aggregates.New()
		pt.st = &pt.own
		for range records {
			last += 1 + r.IntN(300)
			v := float64(100 + r.IntN(900))
			if r.IntN(5) == 0 {
				v += 0.25
			}
			pt.st.Add(v, nil)
			if pt.minSeq == "" {
				pt.minSeq = seqOf(last)
			}
			pt.maxSeq = seqOf(last)
		}
		return pt
	}
	for i := range keys {
		key := fmt.Sprintf("user-%05d", i)
		if i%7 == 3 {
			key = "a|b " + key // keys may hold the format's separators
		}
		for pane := range 1 + r.IntN(3) {
			start := minute.Add(time.Duration(pane) * time.Minute)
			tumbling := window.Window{Start: start, End: start.Add(time.Minute)}
			pt := newPartial(1 + r.IntN(6))
			out[setKey{upKey{key, p.kinds[0], tumbling}, 1}] = pt
			hop := newPartial(0)
			hop.minSeq, hop.maxSeq = pt.minSeq, pt.maxSeq
			if r.IntN(4) == 0 {
				hop = newPartial(1 + r.IntN(3)) // a late record went to the tumbling window only
			} else {
				hop.own = *pt.st.Clone()
				hop.st = &hop.own
			}
			out[setKey{upKey{key, p.kinds[1], window.Window{Start: start.Add(-4 * time.Minute), End: start.Add(time.Minute)}}, 5}] = hop
		}
		if i%5 == 0 { // a late record's set: the hopping windows still open
			w := window.Window{Start: minute.Add(-2 * time.Minute), End: minute.Add(3 * time.Minute)}
			out[setKey{upKey{key, p.kinds[1], w}, 2}] = newPartial(1)
		}
		if i%11 == 0 { // a window not on the second: a partial of another size
			w := window.Window{Start: minute.Add(1234 * time.Millisecond), End: minute.Add(61234 * time.Millisecond)}
			out[setKey{upKey{key, p.kinds[0], w}, 1}] = newPartial(2)
		}
	}
	return out, seqOf(last)
}

// samePartials reports how got differs from want, or "".
func samePartials(got, want map[setKey]*partial) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d partials, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("no partial for %+v", k)
		}
		if g.minSeq != w.minSeq || g.maxSeq != w.maxSeq {
			return fmt.Sprintf("%+v: sequence numbers %s–%s, want %s–%s", k, g.minSeq, g.maxSeq, w.minSeq, w.maxSeq)
		}
		if !reflect.DeepEqual(g.st.Result(), w.st.Result()) {
			return fmt.Sprintf("%+v: aggregate %+v, want %+v", k, g.st.Result(), w.st.Result())
		}
	}
	return ""
}

// The partials come back from the window state as they went in: every
// key, window set, sequence number and aggregate, equal partials of a key
// written once, and decoded partials independent of each other (a flush
// merges into them).
func TestWindowStatePartialsRoundTrip(t *testing.T) {
	p := codecProcessor(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, keys := range []int{1, 40, 2000} {
		t.Run(fmt.Sprint(keys, " keys"), func(t *testing.T) {
			want, last := randomPartials(p, r, keys)
			st := p.encodeState(want, window.NewWatermark(time.Second), last)
			if len(st) != 3 {
				t.Fatalf("the state has %d entries, want 3 (watermark, sequence number, partials): %v", len(st), st)
			}
			got, err := p.decodePartials(st)
			if err != nil {
				t.Fatal(err)
			}
			if diff := samePartials(got, want); diff != "" {
				t.Fatal(diff)
			}
			for k, pt := range got {
				pt.st.Add(1e6, nil) // must not reach any other partial
				if pt.st.Count() != want[k].st.Count()+1 {
					t.Fatalf("%+v: count %d after one more", k, pt.st.Count())
				}
			}
			for k, pt := range got {
				if pt.st.Count() != want[k].st.Count()+1 {
					t.Fatalf("%+v shares its aggregate with another partial", k)
				}
			}
		})
	}
}

// Partials of the first format (an entry per partial, under p|) still
// decode, beside the current entry: an interval that began before an
// update flushes after it.
func TestWindowStatePartialsOfTheFirstFormatDecode(t *testing.T) {
	p := codecProcessor(t)
	st := p.cfg.Aggregates.New()
	st.Add(1210, nil)
	st.Add(87, nil)
	text, _ := st.MarshalText()
	w := window.Window{Start: time.Date(2026, 12, 3, 8, 56, 0, 0, time.UTC), End: time.Date(2026, 12, 3, 9, 1, 0, 0, time.UTC)}
	old := map[string]string{
		"p|hopping:5m0s:1m0s|2026-12-03T08:56:00.000Z/2026-12-03T09:01:00.000Z*5|user-06971": seqOf(7) + " " + seqOf(9) + " " + string(text),
		stateSeq: seqOf(9),
	}
	got, err := p.decodePartials(old)
	if err != nil {
		t.Fatal(err)
	}
	pt := got[setKey{upKey{"user-06971", "hopping:5m0s:1m0s", w}, 5}]
	if len(got) != 1 || pt == nil || pt.minSeq != seqOf(7) || pt.maxSeq != seqOf(9) || pt.st.Count() != 2 || pt.st.Result().Sum != 1297 {
		t.Fatalf("decoded %v", got)
	}
}

// The entry's name is one the first format's reader refuses as malformed:
// <kind>|<window id>|<key> with an empty kind and no second bar, and a
// value without the two spaces of "<minSeq> <maxSeq> <partial>". Code
// from before it fails the invocation and Lambda retries it, rather than
// reading the state without its partials.
func TestWindowStatePartialsAreRefusedByTheFirstFormatsReader(t *testing.T) {
	p := codecProcessor(t)
	partials, last := randomPartials(p, rand.New(rand.NewPCG(1, 2)), 3)
	v := p.encodeState(partials, window.NewWatermark(time.Second), last)[statePartials]
	// As the first format's reader cut them (decodePartials before it).
	kind, rest, ok1 := strings.Cut(statePartials[len(statePartial):], "|")
	_, _, ok2 := strings.Cut(rest, "|")
	_, rest, ok3 := strings.Cut(v, " ")
	_, _, ok4 := strings.Cut(rest, " ")
	if ok1 && ok2 && ok3 && ok4 {
		t.Fatalf("the first format's reader takes entry %q (kind %q) as one of its own", statePartials, kind)
	}
	if strings.ContainsAny(v, " |") {
		t.Fatalf("the entry's value holds a separator of the first format: %q", v)
	}
}

// Bytes appendPartials could not have written are refused with an error
// naming what is wrong, never decoded into partials made up.
func TestWindowStatePartialsRefuseWhatWasNotWritten(t *testing.T) {
	p := codecProcessor(t)
	partials, last := randomPartials(p, rand.New(rand.NewPCG(7, 8)), 4)
	good := appendPartials(nil, partials, last)
	// One key, two partials: a tumbling window, then a copy of it.
	one := func(edit func(b []byte) []byte) []byte {
		b := []byte{partialsVersion, 1, 13}
		b = append(b, "tumbling:1m0s"...)
		b = append(b, 0, 1, 0xe0, 0xd4, 0x03) // base 0, one key; the kind's size 60,000 ms
		b = append(b, 1, 'k', 2)              // key "k", two partials
		st := p.cfg.Aggregates.New()
		st.Add(5, nil)
		body, _ := st.AppendCompact(nil)
		b = append(b, partialOneSeq|partialSeconds, 0, 60, 1, 0, 2|1, 0x12, byte(len(body)))
		b = append(b, body...)
		b = append(b, partialCopy|partialSeconds, 0, 120, 1, 0) // the next minute
		return edit(b)
	}
	if _, err := p.decodePartialsFrom(one(func(b []byte) []byte { return b }), "1"); err != nil {
		t.Fatalf("the hand-made entry itself: %v", err)
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"another version", append([]byte{9}, good[1:]...), "version 9"},
		{"no kinds", []byte{partialsVersion, 0}, "0 window kinds"},
		{"unknown flags", one(func(b []byte) []byte { b[len(b)-5] |= 0x40; return b }), "unknown flags"},
		{"a kind not listed", one(func(b []byte) []byte { b[len(b)-4] = 3; return b }), "window kind 3 of 1"},
		{"a copy of itself", one(func(b []byte) []byte { b[len(b)-1] = 1; return b }), "a copy of partial 1"},
		{"more windows than a record is in", one(func(b []byte) []byte { b[len(b)-2] = 3; return b }), "3 windows, want 1 to 2"},
		{"no windows", one(func(b []byte) []byte { b[len(b)-2] = 0; return b }), "0 windows"},
		{"more partials than bytes", one(func(b []byte) []byte { b[23] = 100; return b }), "100 partials"},
		{"the same partial twice", one(func(b []byte) []byte { b[17] = 2; return append(b, b[21:]...) }), "there twice"},
		{"a sequence number sharing more than its reference", one(func(b []byte) []byte { b[28] = 5; return b }), "shares 5"},
		{"more keys than written", one(func(b []byte) []byte { b[17] = 2; return b }), "truncated"},
		{"more keys than bytes", one(func(b []byte) []byte { b[17] = 120; return b }), "120 keys"},
		{"trailing bytes", one(func(b []byte) []byte { return append(b, 1) }), "1 bytes after the last key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.decodePartialsFrom(tt.b, "1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("decoded %d partials, error %v; want one saying %q", len(got), err, tt.want)
			}
		})
	}
	// No prefix of a well-formed entry decodes, and none panics.
	for i := range len(good) {
		if _, err := p.decodePartialsFrom(good[:i], last); err == nil && i > 0 {
			t.Fatalf("%d of %d bytes decoded", i, len(good))
		}
	}
	// In the state: an error naming the entry.
	_, err := p.decodePartials(map[string]string{statePartials: "!!", stateSeq: last})
	if err == nil || !strings.Contains(err.Error(), `window state entry "p||"`) {
		t.Fatalf("an entry that is not base64: %v", err)
	}
}

// decodePartialsFrom decodes an entry's bytes into a new map.
func (p *Processor) decodePartialsFrom(b []byte, ref string) (map[setKey]*partial, error) {
	out := map[setKey]*partial{}
	err := p.decodePartialsEntry(b, ref, out)
	return out, err
}

// FuzzDecodePartials: an entry, whatever it holds, decodes or is refused;
// it never panics nor runs out of memory, and what decodes encodes to an
// entry that decodes to the same partials.
func FuzzDecodePartials(f *testing.F) {
	p := codecProcessor(f)
	partials, last := randomPartials(p, rand.New(rand.NewPCG(9, 9)), 3)
	f.Add(appendPartials(nil, partials, last), last)
	f.Add([]byte{partialsVersion, 1, 1, 'x', 1, 0}, "")
	f.Fuzz(func(t *testing.T, b []byte, ref string) {
		got, err := p.decodePartialsFrom(b, ref)
		if err != nil || len(got) == 0 {
			return // encodeState writes no entry for no partials
		}
		// Sequence numbers are written against the largest.
		top := ref
		for _, pt := range got {
			if pt.maxSeq > top {
				top = pt.maxSeq
			}
		}
		again, err := p.decodePartialsFrom(appendPartials(nil, got, top), top)
		if err != nil {
			t.Fatalf("re-encoding decoded partials: %v", err)
		}
		if diff := samePartials(again, got); diff != "" {
			t.Fatalf("re-encoded: %s", diff)
		}
	})
}

// The entry is unpadded base64: it holds no character Lambda's JSON
// escapes.
func TestWindowStatePartialsAreUnpaddedBase64(t *testing.T) {
	p := codecProcessor(t)
	partials, last := randomPartials(p, rand.New(rand.NewPCG(5, 5)), 10)
	v := encodePartials(partials, last)
	if _, err := base64.RawStdEncoding.DecodeString(v); err != nil || strings.ContainsAny(v, "=\"\\<>&") {
		t.Fatalf("entry %q: %v", v, err)
	}
}

// The claims and the carried points each get half the room the rest of
// the state and the invocation's records leave, never less than 64 KB:
// their own entries in the incoming state do not count against them, and
// each gets at least 64 KB.
func TestCarriedBudgetIsHalfTheRoomLeft(t *testing.T) {
	big := func(n int) string { return strings.Repeat("A", n) }
	for _, tt := range []struct {
		name    string
		st      map[string]string
		records int
		want    int
	}{
		{"an empty state, no records", map[string]string{}, 0, (limits.LambdaWindowStateBytes - stateMargin - 2) / 2},
		{"an empty state, 500 records", map[string]string{}, 500, (limits.LambdaWindowStateBytes - stateMargin - 2 - 500*stateGrowthPerRecord) / 2},
		{"100 KB of partials", map[string]string{statePartials: big(100 << 10)}, 500,
			(limits.LambdaWindowStateBytes - stateMargin - 2 - (100<<10 + len(statePartials) + 6) - 500*stateGrowthPerRecord) / 2},
		{"its own entries do not count", map[string]string{statePending: big(400 << 10), stateCarriedAll: big(300 << 10)}, 0, (limits.LambdaWindowStateBytes - stateMargin - 2) / 2},
		{"900 KB of partials: the floor", map[string]string{statePartials: big(900 << 10)}, 500, minCarriedBudget},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := carriedBudget(tt.st, tt.records); got != tt.want {
				t.Errorf("budget %d, want %d", got, tt.want)
			}
		})
	}
}
