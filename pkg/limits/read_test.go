package limits

import (
	"strings"
	"testing"
)

func TestReadAtMost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
		over bool
	}{
		{"", 4, "", false},
		{"abcd", 4, "abcd", false},
		{"abcde", 4, "abcde", true},
		{strings.Repeat("x", 1<<20), 4, "xxxxx", true}, // reads max+1, not the rest
	} {
		b, over, err := ReadAtMost(strings.NewReader(tc.in), tc.max)
		if err != nil || string(b) != tc.want || over != tc.over {
			t.Errorf("ReadAtMost(%d bytes, %d) = %q, %v, %v; want %q, %v", len(tc.in), tc.max, b, over, err, tc.want, tc.over)
		}
	}
}
