package durationtext

import (
	"errors"
	"regexp"
	"time"
)

// ErrTooLong is Parse's error for a duration written correctly but longer
// than time.Duration holds.
var ErrTooLong = errors.New("longer than a duration can be (2562047h47m16.854775807s, about 292 years)")

// syntax is time.ParseDuration's syntax, whatever the size.
var syntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// IsDuration reports whether s is written as a Go duration (90m, 1h30m),
// also one too large for time.Duration (99999999h).
func IsDuration(s string) bool { return syntax.MatchString(s) }

// Parse is time.ParseDuration, except that text written as a duration but
// too long for one is ErrTooLong, not time's "invalid duration".
func Parse(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil && IsDuration(s) {
		return 0, ErrTooLong
	}
	return d, err
}
