package aggregate

import (
	"math"
	"reflect"
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
			st := map[string]string{"p|tumbling:1m0s|w|k": "untouched"}
			size := tt.in.encode(st)
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
	carried{{key: "k", kind: "session:30s"}: {{point: point{T: 1, V: 2, Seq: "3"}}}}.encode(st)
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
