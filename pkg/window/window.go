package window

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Resolution is the finest time step of window bounds: sizes, advances,
// offsets, differences and gaps must be whole multiples of it, and sliding
// and session windows truncate event times to it (Kafka Streams uses
// milliseconds too).
const Resolution = time.Millisecond

// idLayout is RFC 3339 with a fixed three-digit fraction. The fraction is
// always written: with an optional fraction "10:41:00.5Z" would sort before
// "10:41:00Z" ('.' < 'Z'), and IDs must sort by start.
const idLayout = "2006-01-02T15:04:05.000Z07:00"

// IDLength is the length of every ID of a window between the years 1000 and
// 9999 (two 24-character times and a slash).
const IDLength = 2*24 + 1

// Window is the half-open interval [Start, End) of event time. Windows made
// by this package are in UTC, carry no monotonic clock reading and have
// millisecond bounds, so equal windows compare equal with == and can be map
// keys.
type Window struct {
	Start, End time.Time
}

// Of returns the window [start, end) from Unix milliseconds.
func Of(startMs, endMs int64) Window {
	return Window{Start: time.UnixMilli(startMs).UTC(), End: time.UnixMilli(endMs).UTC()}
}

// Contains reports whether t lies in [w.Start, w.End).
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.Start) && t.Before(w.End)
}

// Size is End − Start.
func (w Window) Size() time.Duration { return w.End.Sub(w.Start) }

// Overlaps reports whether w and o share any instant.
func (w Window) Overlaps(o Window) bool {
	return w.Start.Before(o.End) && o.Start.Before(w.End)
}

// ID is w's stable string form, "<start>/<end>" in UTC RFC 3339 with
// milliseconds, for example "2026-11-29T10:41:00.000Z/2026-11-29T10:42:00.000Z".
// IDs of windows in the years 1000–9999 have the same length and sort by
// start, then end, so they work as DynamoDB sort keys.
func (w Window) ID() string {
	var b [IDLength]byte
	return string(w.AppendID(b[:0]))
}

// AppendID appends w's ID to dst, without allocating when dst has room.
func (w Window) AppendID(dst []byte) []byte {
	dst = appendIDTime(dst, w.Start)
	dst = append(dst, '/')
	return appendIDTime(dst, w.End)
}

// appendIDTime is t.UTC().AppendFormat(dst, idLayout), several times faster
// for the years 0–9999.
func appendIDTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, idLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// String is the ID.
func (w Window) String() string { return w.ID() }

// MarshalText encodes w as its ID, so a Window is a string in JSON.
func (w Window) MarshalText() ([]byte, error) { return w.AppendID(make([]byte, 0, IDLength)), nil }

// UnmarshalText parses an ID; see ParseID.
func (w *Window) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// ErrBadID is wrapped by ParseID's errors.
var ErrBadID = errors.New("not a window id")

// ParseID parses a window ID ("<start>/<end>", RFC 3339 times). It accepts
// any RFC 3339 fraction, not only the three digits ID writes.
func ParseID(s string) (Window, error) {
	start, end, ok := strings.Cut(s, "/")
	if !ok {
		return Window{}, fmt.Errorf("%q: %w: want <start>/<end>", s, ErrBadID)
	}
	st, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return Window{}, fmt.Errorf("%q: %w: start: %v", s, ErrBadID, err)
	}
	en, err := time.Parse(time.RFC3339Nano, end)
	if err != nil {
		return Window{}, fmt.Errorf("%q: %w: end: %v", s, ErrBadID, err)
	}
	if !st.Before(en) {
		return Window{}, fmt.Errorf("%q: %w: start is not before end", s, ErrBadID)
	}
	return Window{Start: st.UTC(), End: en.UTC()}, nil
}

// Trunc returns t truncated to Resolution (towards the past, also before
// 1970), in UTC.
func Trunc(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// wholeMillis checks that d is a positive multiple of Resolution.
func checkDuration(name string, d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("%s must be positive, not %s", name, d)
	case d%Resolution != 0:
		return fmt.Errorf("%s %s is not a whole number of milliseconds", name, d)
	}
	return nil
}

// floorDiv is a/b rounded towards negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
