package durationtext

import (
	"errors"
	"testing"
	"time"
)

func TestParseTellsTooLongFromNoDuration(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		tooLong bool
		invalid bool
	}{
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "-5h", want: -5 * time.Hour},
		{in: "2562047h", want: 2562047 * time.Hour},
		{in: "9999999999h", tooLong: true},
		{in: "-9999999999h", tooLong: true},
		{in: "99999999999999999999ns", tooLong: true},
		{in: "5x", invalid: true},
		{in: "", invalid: true},
		{in: "10", invalid: true},
		{in: "h", invalid: true},
	} {
		d, err := Parse(tc.in)
		switch {
		case tc.tooLong:
			if !errors.Is(err, ErrTooLong) {
				t.Errorf("Parse(%q) = %v, %v; want ErrTooLong", tc.in, d, err)
			}
		case tc.invalid:
			if err == nil || errors.Is(err, ErrTooLong) {
				t.Errorf("Parse(%q) = %v, %v; want time's invalid duration", tc.in, d, err)
			}
		case err != nil || d != tc.want:
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, d, err, tc.want)
		}
	}
}
