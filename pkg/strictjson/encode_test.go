package strictjson

import "testing"

func TestMarshalKeepsMarkup(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]string{"error": "after: not <showId>#<reservationId> & co"}, `{"error":"after: not <showId>#<reservationId> & co"}`},
		{[]int{1, 2}, `[1,2]`},
		{"line\nbreak\u2028", `"line\nbreak\u2028"`},
	} {
		got, err := Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.v, got, err, tc.want)
		}
	}
	if _, err := Marshal(make(chan int)); err == nil {
		t.Error("Marshal of a channel: no error")
	}
}
