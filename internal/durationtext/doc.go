// Package durationtext reads Go duration text (90s, 1h30m) and tells a
// duration too long for time.Duration (9999999999h, about 292 years and
// more) from text that is no duration at all: time.ParseDuration refuses
// both as "invalid duration", so a setting, rule or flag given an
// overlong value would otherwise answer "not a duration" to a value that
// plainly is one.
package durationtext
