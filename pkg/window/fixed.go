package window

import (
	"fmt"
	"time"
)

// Tumbling windows have a fixed Size and do not overlap: every event time is
// in exactly one. They are aligned to the Unix epoch shifted by Offset, so a
// 1-minute window starts on the minute ("round the timestamp down to the
// nearest minute", as the notes put it) and a 1-day window with Offset 5h
// starts at 05:00 UTC, midnight in UTC−5.
type Tumbling struct {
	Size   time.Duration
	Offset time.Duration // shifts the alignment; any value, normalised modulo Size
}

// Validate checks Size (positive, whole milliseconds) and Offset (whole
// milliseconds).
func (t Tumbling) Validate() error {
	if err := checkDuration("size", t.Size); err != nil {
		return err
	}
	if t.Offset%Resolution != 0 {
		return fmt.Errorf("offset %s is not a whole number of milliseconds", t.Offset)
	}
	return nil
}

// Assign returns the window containing ts. t must be valid.
func (t Tumbling) Assign(ts time.Time) Window {
	size, off := t.Size.Milliseconds(), t.Offset.Milliseconds()
	start := floorDiv(ts.UnixMilli()-off, size)*size + off
	return Of(start, start+size)
}

// AppendWindows appends the one window containing ts to dst.
func (t Tumbling) AppendWindows(dst []Window, ts time.Time) []Window {
	return append(dst, t.Assign(ts))
}

// Hopping windows have a fixed Size and start every Advance, so they overlap
// when Advance < Size and every event time is in Size/Advance of them.
//
// They are built from panes, as the notes suggest: the panes are the tumbling
// windows of size Advance (same Offset). A record is added to exactly one
// pane, Pane(ts); a hopping window's value is the merge of its Size/Advance
// panes, Panes(w). So state is written once per record, not Size/Advance
// times, and a pane's update touches the windows WindowsOfPane(pane).
//
// Size must be a multiple of Advance; Validate says so otherwise.
type Hopping struct {
	Size    time.Duration
	Advance time.Duration
	Offset  time.Duration
}

// Validate checks that Size and Advance are positive whole milliseconds,
// Advance ≤ Size and Advance divides Size.
func (h Hopping) Validate() error {
	if err := checkDuration("size", h.Size); err != nil {
		return err
	}
	if err := checkDuration("advance", h.Advance); err != nil {
		return err
	}
	if h.Offset%Resolution != 0 {
		return fmt.Errorf("offset %s is not a whole number of milliseconds", h.Offset)
	}
	if h.Advance > h.Size {
		return fmt.Errorf("advance %s is longer than size %s: records between windows would be in none", h.Advance, h.Size)
	}
	if h.Size%h.Advance != 0 {
		return fmt.Errorf("advance %s does not divide size %s", h.Advance, h.Size)
	}
	return nil
}

// PaneCount is Size/Advance: the number of panes in a window, and the number
// of windows containing an event time.
func (h Hopping) PaneCount() int { return int(h.Size / h.Advance) }

// Panes is the tumbling assigner of h's panes.
func (h Hopping) Panes() Tumbling { return Tumbling{Size: h.Advance, Offset: h.Offset} }

// Pane returns the one pane containing ts.
func (h Hopping) Pane(ts time.Time) Window { return h.Panes().Assign(ts) }

// AppendWindows appends the PaneCount windows containing ts to dst, oldest
// first.
func (h Hopping) AppendWindows(dst []Window, ts time.Time) []Window {
	return h.AppendWindowsOfPane(dst, h.Pane(ts))
}

// AppendWindowsOfPane appends the PaneCount windows that pane p is part of,
// oldest first: the windows whose value changes when p changes.
func (h Hopping) AppendWindowsOfPane(dst []Window, p Window) []Window {
	adv, size := h.Advance.Milliseconds(), h.Size.Milliseconds()
	first := p.Start.UnixMilli() - size + adv
	for s := first; s <= p.Start.UnixMilli(); s += adv {
		dst = append(dst, Of(s, s+size))
	}
	return dst
}

// AppendPanesOf appends the PaneCount panes that make up window w, oldest
// first. w must be one of h's windows.
func (h Hopping) AppendPanesOf(dst []Window, w Window) []Window {
	adv := h.Advance.Milliseconds()
	end := w.End.UnixMilli()
	for s := w.Start.UnixMilli(); s < end; s += adv {
		dst = append(dst, Of(s, s+adv))
	}
	return dst
}

// Assigner is implemented by the windows that depend on the event time alone
// (Tumbling, Hopping): it appends the windows containing t to dst.
type Assigner interface {
	AppendWindows(dst []Window, t time.Time) []Window
}

var (
	_ Assigner = Tumbling{}
	_ Assigner = Hopping{}
)
