package window

import (
	"fmt"
	"time"
)

// LatePolicy says what becomes of a record that arrives after its window is
// final (the notes' "straggler events").
type LatePolicy uint8

const (
	// Drop ignores late records; the caller counts them as a metric, to
	// alert when a significant amount of data is dropped.
	Drop LatePolicy = iota + 1
	// Correct applies a late record to its closed window, bumps the window's
	// revision and emits a correction that carries the previous value, so a
	// consumer can retract it. Corrections are accepted until the watermark
	// passes the window's end by the allowed lateness; later records are
	// dropped and counted.
	Correct
)

// ParseLatePolicy parses "drop" or "correct".
func ParseLatePolicy(s string) (LatePolicy, error) {
	switch s {
	case "drop":
		return Drop, nil
	case "correct":
		return Correct, nil
	}
	return 0, fmt.Errorf("%q is not a late policy: want \"drop\" or \"correct\"", s)
}

// String is "drop" or "correct".
func (p LatePolicy) String() string {
	switch p {
	case Drop:
		return "drop"
	case Correct:
		return "correct"
	}
	return fmt.Sprintf("LatePolicy(%d)", uint8(p))
}

// LateRule is a pipeline's late policy.
type LateRule struct {
	Policy LatePolicy
	// AllowedLateness is, under Correct, how far the watermark may be past a
	// window's end and a late record still correct it.
	AllowedLateness time.Duration
}

// Validate checks the policy, and that AllowedLateness is positive under
// Correct and unset under Drop.
func (r LateRule) Validate() error {
	switch r.Policy {
	case Drop:
		if r.AllowedLateness != 0 {
			return fmt.Errorf("allowed lateness %s only applies to the correct policy", r.AllowedLateness)
		}
	case Correct:
		if r.AllowedLateness <= 0 {
			return fmt.Errorf("allowed lateness must be positive under the correct policy, not %s", r.AllowedLateness)
		}
	default:
		return fmt.Errorf("unknown late policy %d", r.Policy)
	}
	return nil
}

// Decision sorts one record's windows by what the record may do to them.
// Reuse one across records with Decide (it resets it) to avoid allocating.
type Decision struct {
	// Open windows are not final: apply the record.
	Open []Window
	// Corrected windows are final but within the allowed lateness under
	// Correct: apply the record, bump the revision, emit a Correction.
	Corrected []Window
	// Dropped windows are final and the record may not change them: count
	// them (the late-records metric) and leave them alone.
	Dropped []Window
}

// Late reports whether the record was late for any of its windows.
func (d *Decision) Late() bool { return len(d.Corrected)+len(d.Dropped) > 0 }

// Apply reports whether the record changes any window (open or corrected);
// with hopping panes, whether to add the record to its pane.
func (d *Decision) Apply() bool { return len(d.Open)+len(d.Corrected) > 0 }

// Decide sorts windows (one record's windows: its tumbling window, the
// hopping windows of its pane, its sliding windows, its session) into d by
// the watermark, replacing what d held.
func (r LateRule) Decide(d *Decision, wm *Watermark, windows []Window) {
	d.Open, d.Corrected, d.Dropped = d.Open[:0], d.Corrected[:0], d.Dropped[:0]
	for _, w := range windows {
		switch {
		case !wm.Final(w):
			d.Open = append(d.Open, w)
		case r.Policy == Correct && wm.Current().Before(w.End.Add(r.AllowedLateness)):
			d.Corrected = append(d.Corrected, w)
		default:
			d.Dropped = append(d.Dropped, w)
		}
	}
}

// Correction is the message a corrected window emits: its new value and the
// value it retracts. Revision counts a window's emissions: the first
// (on-time) result has revision 1, each correction one more.
type Correction[V any] struct {
	Window   Window `json:"window"`
	Revision uint64 `json:"revision"`
	Previous V      `json:"previous"`
	Current  V      `json:"current"`
}

// NewCorrection returns the correction that follows the result emitted as revision
// prevRevision with value previous, now that the window's value is current.
func NewCorrection[V any](w Window, prevRevision uint64, previous, current V) Correction[V] {
	return Correction[V]{Window: w, Revision: prevRevision + 1, Previous: previous, Current: current}
}
