package strictjson

import "testing"

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s        string
		n        int
		cut, quo string
	}{
		{"short", 10, "short", `"short"`},
		{"exactly", 7, "exactly", `"exactly"`},
		{"abcdefgh", 3, "abc…", `"abc"…`},
		// é is two bytes: a cut inside it keeps neither byte.
		{"aéb", 2, "a…", `"a"…`},
		{"\n\x1b[2J", 2, "\n\x1b…", `"\n\x1b"…`},
		{"abc", -1, "…", `""…`},
	} {
		if got := Cut(tc.s, tc.n); got != tc.cut {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.cut)
		}
		if got := QuoteCut(tc.s, tc.n); got != tc.quo {
			t.Errorf("QuoteCut(%q, %d) = %s, want %s", tc.s, tc.n, got, tc.quo)
		}
	}
}
