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

func TestCutMiddle(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 4, "ab…ij"},
		// é is two bytes: a cut inside it keeps neither byte, at either end.
		{"éabcdé", 6, "éa…dé"},
		{"aébcdéf", 4, "a…f"},
		{"abc", 0, "…"},
	} {
		if got := CutMiddle(tc.s, tc.n); got != tc.want {
			t.Errorf("CutMiddle(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestWholeNumberQuotesTheFieldsRange(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		n      int64
		reason string
	}{
		{"26", 26, ""},
		{"1", 1, ""},
		{"0", 0, "must be a whole number from 1 to 26, not 0"},
		{"27", 0, "must be a whole number from 1 to 26, not 27"},
		{"2.5", 0, "must be a whole number from 1 to 26, not 2.5"},
		{"1.0", 0, "must be a whole number from 1 to 26, not 1.0"},
		{"1e400", 0, "must be a whole number from 1 to 26, not 1e400"},
		{"99999999999999999999", 0, "must be a whole number from 1 to 26, not 99999999999999999999"},
		{"1111111111111111111111111111111111111111111", 0, "must be a whole number from 1 to 26, not 1111111111111111111111111111111111111111…"},
		{`"3"`, 0, "must be a whole number from 1 to 26, not a string"},
		{"null", 0, "must be a whole number from 1 to 26, not null"},
	} {
		n, reason := WholeNumber([]byte(tc.raw), 1, 26)
		if n != tc.n || reason != tc.reason {
			t.Errorf("WholeNumber(%s) = %d, %q; want %d, %q", tc.raw, n, reason, tc.n, tc.reason)
		}
	}
}

// TestWholeNumberTakesOneSpelling: in a range that holds 0, -0 is refused
// as 1.0 is, not read as 0: a whole number is digits, without a sign on 0.
func TestWholeNumberTakesOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		n      int64
		reason string
	}{
		{"0", 0, ""},
		{"-3", -3, ""},
		{"-0", 0, "must be a whole number from -5 to 5, not -0"},
		{"0.0", 0, "must be a whole number from -5 to 5, not 0.0"},
		{"-0e0", 0, "must be a whole number from -5 to 5, not -0e0"},
	} {
		n, reason := WholeNumber([]byte(tc.raw), -5, 5)
		if n != tc.n || reason != tc.reason {
			t.Errorf("WholeNumber(%s) = %d, %q; want %d, %q", tc.raw, n, reason, tc.n, tc.reason)
		}
	}
}
