package window

import (
	"slices"
	"time"
)

// Session windows group one key's records that are close together in time; a
// session ends when the key has been inactive for Gap ("no events for 30
// minutes"). A session is [first record, last record + Gap): two records are
// in one session when less than Gap apart (exactly Gap apart starts a new
// session), and the session is final once the watermark reaches
// last + Gap, the earliest time a record could start a new one.
//
// Sessions are per key and need the key's current sessions: Assign takes
// them and returns the session the record belongs to and the sessions that
// session replaces. A record inside a session leaves its bounds alone; one
// just before or after extends it; one that bridges two sessions merges
// them. The final sessions do not depend on the order records arrive in.
// Event times are truncated to milliseconds.
type Session struct {
	Gap time.Duration
}

// Validate checks Gap (positive, whole milliseconds).
func (s Session) Validate() error { return checkDuration("gap", s.Gap) }

// Of returns the session of a single record at t: [t, t+Gap).
func (s Session) Of(t time.Time) Window {
	r := t.UnixMilli()
	return Of(r, r+s.Gap.Milliseconds())
}

// SessionUpdate is where one record goes.
type SessionUpdate struct {
	// Window is the record's session after adding it.
	Window Window
	// Replaces are the existing sessions the record touches, sorted by start
	// (0 for a new session, 1 when it joins or extends one, 2 or more when it
	// merges them). The caller merges their state and the record into
	// Window's state and deletes each replaced session that is not Window
	// itself (a session whose end moved has a new ID).
	Replaces []Window
}

// Assign places a record at t among the key's existing sessions (any order,
// not overlapping each other, as earlier Assign calls leave them).
func (s Session) Assign(t time.Time, existing []Window) SessionUpdate {
	u := SessionUpdate{Window: s.Of(t)}
	for _, w := range existing {
		if w.Overlaps(u.Window) {
			u.Replaces = append(u.Replaces, w)
		}
	}
	for _, w := range u.Replaces {
		if w.Start.Before(u.Window.Start) {
			u.Window.Start = w.Start
		}
		if w.End.After(u.Window.End) {
			u.Window.End = w.End
		}
	}
	slices.SortFunc(u.Replaces, compareWindows)
	return u
}

// Apply returns the key's sessions after u: existing without u.Replaces, plus
// u.Window, sorted by start. It is what a caller keeping sessions in memory
// does after Assign.
func (u SessionUpdate) Apply(existing []Window) []Window {
	out := make([]Window, 0, len(existing)+1)
	for _, w := range existing {
		if !slices.Contains(u.Replaces, w) {
			out = append(out, w)
		}
	}
	out = append(out, u.Window)
	slices.SortFunc(out, compareWindows)
	return out
}
