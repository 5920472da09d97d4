package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Carried points come back from the window state as they went in: sequence
// number, event time, value, the close time they arrived at, the distinct
// hash and whether LateDropped already counted them.
func TestCarriedPointsRoundTrip(t *testing.T) {
	pts := []carriedPoint{
		{point: point{T: 1_764_410_400_000, V: 12.5, Th: noThreshold, Seq: "49601189658422359378836298521827638475320189012309704722"}},
		{point: point{T: -5, V: math.Inf(-1), D: []byte{1, 2, 3, 4, 5, 6}, Th: 1_764_410_460_000, Seq: "7"}, Counted: true},
		{point: point{T: 0, V: -0.25, Seq: ""}},
	}
	for _, tt := range []struct {
		name string
		in   carried
	}{
		{"one key, three points", carried{{key: "user-1", kind: "session:30s"}: pts}},
		{"a key with '|' in it, two kinds", carried{{key: "a|b", kind: "session:30s"}: pts[:1], {key: "a|b", kind: "sliding:1m0s"}: pts[1:]}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := map[string]string{"p|tumbling:1m0s|w|k": "untouched", stateSeq: "49601189658422359378836298521827638475320189012309704799"}
			size := tt.in.encode(st, st[stateSeq])
			got, gotSize, err := decodeCarried(st)
			if err != nil {
				t.Fatal(err)
			}
			if gotSize != size {
				t.Errorf("size %d, encode said %d", gotSize, size)
			}
			if !reflect.DeepEqual(got, tt.in) {
				t.Errorf("decoded %+v\nwant %+v", got, tt.in)
			}
		})
	}
}

// A damaged entry is an error naming it, never points made up.
func TestCarriedPointsRefuseDamage(t *testing.T) {
	st := map[string]string{}
	carried{{key: "k", kind: "session:30s"}: {{point: point{T: 1, V: 2, Seq: "3"}}}}.encode(st, "3")
	for name, v := range st {
		for _, bad := range []string{v[:len(v)-4], "!!not base64", "AAAA"} {
			if _, _, err := decodeCarried(map[string]string{name: bad}); err == nil {
				t.Errorf("entry %q = %q decoded without an error", name, bad)
			}
		}
	}
	if _, _, err := decodeCarried(map[string]string{stateCarried + "no-bar": ""}); err == nil {
		t.Error("an entry without kind|key decoded")
	}
}

// appendCarriedPointV1 encodes one point as the earlier version did, whole
// (what decodeCarriedPointsV1 reads).
func appendCarriedPointV1(b []byte, p *carriedPoint) []byte {
	b = binary.AppendUvarint(b, uint64(len(p.Seq)))
	b = append(b, p.Seq...)
	b = binary.AppendVarint(b, p.T)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.V))
	b = binary.AppendVarint(b, p.Th)
	b = binary.AppendUvarint(b, uint64(len(p.D)))
	b = append(b, p.D...)
	flag := byte(0)
	if p.Counted {
		flag = 1
	}
	return append(b, flag)
}

// A window state an earlier version wrote (each point whole, under k|)
// still decodes: an interval that began before an update flushes after it.
func TestCarriedPointsOfAnEarlierVersionDecode(t *testing.T) {
	st := map[string]string{"k|session:30s|user-7": "ODQ5NjAxMTg5NjU4NDIyMzU5Mzc4ODM2Mjk4NTIxODI3NjM4NDc1MzIwMTg5MDEyMzA5NzA0NzIygPTw8NlmAAAAAAAAKUD///////////8BAAA4NDk2MDExODk2NTg0MjIzNTkzNzg4MzYyOTg1MjE4Mjc2Mzg0NzUzMjAxODkwMTIzMDk3MDQ3Mzi4i/Hw2WYAAAAAAAAIQMCd+PDZZgYBAgMEBQYB"}
	got, _, err := decodeCarried(st)
	if err != nil {
		t.Fatal(err)
	}
	want := carried{{key: "user-7", kind: "session:30s"}: {
		{point: point{T: 1_764_410_400_000, V: 12.5, Th: noThreshold, Seq: "49601189658422359378836298521827638475320189012309704722"}},
		{point: point{T: 1_764_410_401_500, V: 3, D: []byte{1, 2, 3, 4, 5, 6}, Th: 1_764_410_460_000, Seq: "49601189658422359378836298521827638475320189012309704738"}, Counted: true},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v\nwant %+v", got, want)
	}
}

// A shard's points take less than half the window state they took whole:
// at 100 events a second over 1,000 keys a minute's points were past the
// 256 KB budget then fixed, so every key's session was folded twice an interval
// (two writes of its state, not one).
func TestCarriedPointsTakeLessThanHalfTheirWholeSize(t *testing.T) {
	// Sequence numbers shaped as a Kinesis shard's: 56 digits, a minute's
	// records sharing the first 27 of them.
	const base = "49657312345678901234567890"
	var pts []carriedPoint
	for i := range 60 {
		seq := fmt.Sprintf("%s%030d", base, 123_456_789_012_345+int64(i)*987_654_321_987)
		pts = append(pts, carriedPoint{point: point{T: 1_764_410_400_000 + int64(i)*997, V: float64(100 + i*7), Th: noThreshold, Seq: seq}})
	}
	pts[7].V, pts[9].Th, pts[11].D = 0.125, pts[9].T+60_000, []byte{1, 2, 3, 4, 5, 6}
	var whole []byte
	for i := range pts {
		whole = appendCarriedPointV1(whole, &pts[i])
	}
	compact := appendCarriedPoints(nil, pts, "", 0)
	t.Logf("%d points: %d bytes, whole %d", len(pts), len(compact), len(whole))
	if len(compact)*2 > len(whole) {
		t.Errorf("%d points take %d bytes, whole %d: want less than half", len(pts), len(compact), len(whole))
	}
	got, err := decodeCarriedPoints(compact)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pts) {
		t.Errorf("decoded %+v\nwant %+v", got, pts)
	}
}

// Bytes appendCarriedPoints could not have written are refused, naming
// what is wrong, never decoded into points made up.
func TestCarriedPointsRefuseWhatWasNotWritten(t *testing.T) {
	good := appendCarriedPoints(nil, []carriedPoint{
		{point: point{T: 10, V: 1, Th: noThreshold, Seq: "4960"}},
		{point: point{T: 11, V: 2, Th: noThreshold, Seq: "4961"}},
	}, "", 0)
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"unknown flags", append([]byte{0xe0}, good[1:]...)},
		{"shares more than the previous has", []byte{carriedIntValue, 5, 0, 2, 2}},
		{"a sequence number too long", append([]byte{0, 0}, binary.AppendUvarint(nil, maxCarriedSeq+1)...)},
		{"a digit over 9", []byte{carriedSeqDigits | carriedIntValue, 0, 2, 0xa1, 2, 2}},
		{"a distinct hash too long", []byte{carriedDistinct | carriedIntValue, 0, 0, 2, 2, 7, 1, 2, 3, 4, 5, 6, 7}},
		{"cut short", good[:len(good)-1]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if pts, err := decodeCarriedPoints(tt.b); err == nil {
				t.Errorf("decoded %+v", pts)
			}
		})
	}
}

// The one entry of every key's points is refused by the reader of the
// entries before it (decodeCarriedPoints after padded base64), whatever
// its length: code from before it fails the invocation rather than read a
// state without its points.
func TestCarriedAllIsRefusedByTheEntryReaderBeforeIt(t *testing.T) {
	for n := 1; n <= 12; n++ {
		c := carried{}
		for i := range n {
			c[keyedKey{key: fmt.Sprintf("user-%d", i), kind: "session:30s"}] = []carriedPoint{{point: point{T: int64(i), V: 1, Th: noThreshold, Seq: fmt.Sprint(100 + i)}}}
		}
		st := map[string]string{}
		c.encode(st, "120")
		b, err := base64.StdEncoding.DecodeString(st[stateCarriedAll])
		if err == nil {
			var pts []carriedPoint
			if pts, err = decodeCarriedPoints(b); err == nil {
				t.Fatalf("%d keys: the entry reader before it decoded %d points", n, len(pts))
			}
		}
	}
}

// Bytes encode could not have written in the one entry are refused, never
// decoded into points made up, and no prefix of a well-formed entry
// decodes.
func TestCarriedAllRefusesWhatWasNotWritten(t *testing.T) {
	c := carried{}
	for i := range 5 {
		c[keyedKey{key: fmt.Sprintf("user-%d", i), kind: "session:30s"}] = []carriedPoint{
			{point: point{T: 1_764_410_400_000 + int64(i), V: 1, Th: noThreshold, Seq: fmt.Sprintf("4960%04d", 10*i)}},
			{point: point{T: 1_764_410_400_900 + int64(i), V: 2.5, Th: noThreshold, Seq: fmt.Sprintf("4960%04d", 10*i+1)}},
		}
	}
	st := map[string]string{}
	c.encode(st, "49600099")
	good, err := base64.RawStdEncoding.DecodeString(st[stateCarriedAll])
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeCarriedAll(good, "49600099", carried{}); err != nil {
		t.Fatalf("the entry itself: %v", err)
	}
	for i := range len(good) {
		if err := decodeCarriedAll(good[:i], "49600099", carried{}); err == nil {
			t.Fatalf("%d of %d bytes decoded", i, len(good))
		}
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"another version", append([]byte{7}, good[1:]...), "version 7"},
		{"no kinds", []byte{carriedAllVersion, 0}, "0 window kinds"},
		{"a kind not listed", []byte{carriedAllVersion, 1, 1, 's', 0, 1, 1, 'k', 4, 1}, "window kind 4 of 1"},
		{"no points", []byte{carriedAllVersion, 1, 1, 's', 0, 1, 1, 'k', 0, 0}, "0 points"},
		{"more keys than bytes", []byte{carriedAllVersion, 1, 1, 's', 0, 90, 1, 'k', 0, 0}, "90 keys"},
		{"trailing bytes", append(append([]byte{}, good...), 0), "1 bytes after the last key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := decodeCarriedAll(tt.b, "49600099", carried{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// Entries of the format before the one entry (c|<kind>|<key>, each key's
// points against "" and 0) still decode: an interval that began before an
// update flushes after it.
func TestCarriedEntriesOfThePreviousFormatDecode(t *testing.T) {
	pts := []carriedPoint{
		{point: point{T: 1_764_410_400_000, V: 12.5, Th: noThreshold, Seq: "49601189658422359378836298521827638475320189012309704722"}},
		{point: point{T: 1_764_410_400_450, V: 3, Th: 1_764_410_460_000, Seq: "49601189658422359378836298521827638475320189012309704738"}, Counted: true},
	}
	st := map[string]string{stateCarried + "session:30s|a|b": base64.StdEncoding.EncodeToString(appendCarriedPoints(nil, pts, "", 0))}
	got, _, err := decodeCarried(st)
	if err != nil {
		t.Fatal(err)
	}
	if want := (carried{{key: "a|b", kind: "session:30s"}: pts}); !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v\nwant %+v", got, want)
	}
}

// FuzzDecodeCarriedAll: the one entry, whatever it holds, decodes or is
// refused; it never panics, and what decodes encodes to an entry that
// decodes to the same points.
func FuzzDecodeCarriedAll(f *testing.F) {
	st := map[string]string{}
	carried{{key: "k", kind: "session:30s"}: {{point: point{T: 5, V: 1.5, Th: noThreshold, Seq: "4960"}}, {point: point{T: 9, V: 2, Th: 70, Seq: "4961"}, Counted: true}}}.encode(st, "4961")
	good, _ := base64.RawStdEncoding.DecodeString(st[stateCarriedAll])
	f.Add(good, "4961")
	f.Fuzz(func(t *testing.T, b []byte, ref string) {
		got := carried{}
		if err := decodeCarriedAll(b, ref, got); err != nil || len(got) == 0 {
			return
		}
		top := ref
		for _, pts := range got {
			for _, p := range pts {
				top = max(top, p.Seq)
			}
		}
		again := map[string]string{}
		got.encode(again, top)
		back, _, err := decodeCarried(map[string]string{stateCarriedAll: again[stateCarriedAll], stateSeq: top})
		if err != nil {
			t.Fatalf("re-encoding decoded points: %v", err)
		}
		if len(back) != len(got) {
			t.Fatalf("re-encoded: %d keys, want %d", len(back), len(got))
		}
		for k, pts := range got {
			if len(back[k]) != len(pts) {
				t.Fatalf("%+v: %d points, want %d", k, len(back[k]), len(pts))
			}
			for i := range pts {
				p, q := pts[i], back[k][i]
				if q.T != p.T || q.Th != p.Th || q.Seq != p.Seq || q.Counted != p.Counted || string(q.D) != string(p.D) || (q.V != p.V && !(math.IsNaN(q.V) && math.IsNaN(p.V))) {
					t.Fatalf("%+v point %d: %+v re-encoded as %+v", k, i, p, q)
				}
			}
		}
	})
}
