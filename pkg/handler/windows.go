package handler

import (
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/window"
)

// The late policies (WithLatePolicy): what becomes of a record that arrives
// after its window is final.
type LatePolicy = window.LatePolicy

const (
	// Drop counts late records (LateDropped) and drops them: a final
	// window never changes. The default.
	Drop = window.Drop
	// Correct applies a record that arrives within the allowed lateness
	// (WithAllowedLateness) after its window is final: the window's result
	// is corrected (a CorrectionType result, revision one more, carrying
	// the result it retracts), and a final session such a record merges
	// into a larger one is retracted (a RetractionType result). Later
	// records are dropped and counted.
	Correct = window.Correct
)

// windows is a handler's window kind: tumbling, hopping (built from
// tumbling panes of the advance's size, as package window builds them),
// sliding or session (defined by the records, as package window defines
// them for the declared pipelines).
type windows struct {
	// option names the option that set the kind, for errors.
	option string
	tumble window.Tumbling
	hop    window.Hopping
	def    window.Defined
	kind   string // "tumbling", "hopping", "sliding" or "session"
}

// WithWindow sets tumbling windows of size d (the default, of
// DefaultWindow), a whole number of milliseconds: every record is in one
// window.
func WithWindow(d time.Duration) Option {
	return func(o *options) {
		o.setWindow(windows{option: "WithWindow", kind: "tumbling", tumble: window.Tumbling{Size: d}})
	}
}

// WithHopping sets hopping windows of size, starting every advance (which
// divides size): every record is in size/advance windows, at most
// MaxHoppingWindows. The key holds
// one aggregate per pane (a tumbling window of the advance's size), and a
// window's result is the merge of its panes.
func WithHopping(size, advance time.Duration) Option {
	return func(o *options) {
		o.setWindow(windows{option: "WithHopping", kind: "hopping", hop: window.Hopping{Size: size, Advance: advance}})
	}
}

// WithSliding sets sliding windows with Kafka Streams' semantics
// (SlidingWindows): a window holds the records within difference of each
// other, both ends inclusive, and one exists for each record's arrival in
// and departure from the sliding span (package window, type Sliding). The
// key holds its records, each's one-value aggregate, for difference (plus
// the allowed lateness).
func WithSliding(difference time.Duration) Option {
	return func(o *options) {
		o.setWindow(windows{option: "WithSliding", kind: "sliding", def: window.Defined{Difference: difference}})
	}
}

// WithSession sets session windows: a key's records less than gap apart
// are one session [first, last + gap) (records exactly gap apart start a
// new one), and a record between two sessions merges them. The key holds
// the records of its sessions not yet final past the allowed lateness.
func WithSession(gap time.Duration) Option {
	return func(o *options) {
		o.setWindow(windows{option: "WithSession", kind: "session", def: window.Defined{Gap: gap}})
	}
}

// setWindow sets the window kind, noting each option that set one: a
// handler has one kind, so two options of different kinds are an error.
func (o *options) setWindow(w windows) {
	if o.win.option != "" && o.win.option != w.option && o.otherKind == "" {
		o.otherKind = o.win.option
	}
	o.win = w
}

// WithLatePolicy sets what becomes of late records: Drop (the default) or
// Correct (with WithAllowedLateness).
func WithLatePolicy(p LatePolicy) Option { return func(o *options) { o.late.Policy = p } }

// WithAllowedLateness sets, under the Correct policy, how long after a
// window is final (the watermark past its end) a late record still
// corrects it.
func WithAllowedLateness(d time.Duration) Option {
	return func(o *options) { o.late.AllowedLateness = d }
}

// MaxHoppingWindows bounds a hopping window's size/advance: the windows
// each record is in, and the panes each window's result merges (the
// declared pipelines' bound too). A key's fold lists the windows of every
// pane it holds, so with size/advance in the thousands one batch of a busy
// key takes more time and memory than an invocation has (a day advancing
// by the minute: 14 s and 14 GB allocated for 300 records), on every retry.
const MaxHoppingWindows = 100

// check validates the kind's durations, naming the option.
func (w windows) check() error {
	var err error
	switch w.kind {
	case "tumbling":
		err = w.tumble.Validate()
	case "hopping":
		err = w.hop.Validate()
		if err == nil && w.hop.PaneCount() > MaxHoppingWindows {
			err = fmt.Errorf("size %s / advance %s puts every record in %d windows; at most %d", w.hop.Size, w.hop.Advance, w.hop.PaneCount(), MaxHoppingWindows)
		}
	case "sliding":
		err = (window.Sliding{Difference: w.def.Difference}).Validate()
	case "session":
		err = (window.Session{Gap: w.def.Gap}).Validate()
	default:
		err = errors.New("no window kind")
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"size", w.tumble.Size}, {"size", w.hop.Size}, {"advance", w.hop.Advance}, {"difference", w.def.Difference}, {"gap", w.def.Gap}} {
		if err == nil && d.d > MaxWindow {
			err = fmt.Errorf("%s %s is longer than %s, the longest a window may be", d.name, d.d, MaxWindow)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", w.option, err)
	}
	return nil
}

// span is the longest a window stays open after a record in it: a
// tumbling or hopping window's size, a sliding window's difference, a
// session's gap.
func (w windows) span() time.Duration {
	switch w.kind {
	case "tumbling":
		return w.tumble.Size
	case "hopping":
		return w.hop.Size
	case "sliding":
		return w.def.Difference
	}
	return w.def.Gap
}

// held reports whether the records define the windows (session, sliding):
// the key holds records, not panes.
func (w windows) held() bool { return w.kind == "sliding" || w.kind == "session" }

func (w windows) paneMs() int64 {
	if w.kind == "hopping" {
		return w.hop.Advance.Milliseconds()
	}
	return w.tumble.Size.Milliseconds()
}

// sizeMs is a tumbling or hopping window's size.
func (w windows) sizeMs() int64 {
	if w.kind == "hopping" {
		return w.hop.Size.Milliseconds()
	}
	return w.tumble.Size.Milliseconds()
}

// pane is the pane a record at t is added to, [start, end).
func (w windows) pane(t int64) (start, end int64) {
	var p window.Window
	if w.kind == "hopping" {
		p = w.hop.Pane(time.UnixMilli(t))
	} else {
		p = w.tumble.Assign(time.UnixMilli(t))
	}
	return p.Start.UnixMilli(), p.End.UnixMilli()
}

// paneWindowEnds are the ends of the first and the last window that the
// pane starting at start is part of.
func (w windows) paneWindowEnds(start int64) (first, last int64) {
	return start + w.paneMs(), start + w.sizeMs()
}

// appendPaneWindows appends the windows the pane starting at start is
// part of (package window's assignment: a tumbling window is its pane).
func (w windows) appendPaneWindows(dst []span, start int64) []span {
	if w.kind != "hopping" {
		return append(dst, span{start, start + w.sizeMs()})
	}
	var buf [8]window.Window
	for _, hw := range w.hop.AppendWindowsOfPane(buf[:0], window.Of(start, start+w.paneMs())) {
		dst = append(dst, span{hw.Start.UnixMilli(), hw.End.UnixMilli()})
	}
	return dst
}

// earliestEnd is the earliest end of a window a held record at t makes or
// changes: its left sliding window, or its own session.
func (w windows) earliestEnd(t int64) int64 {
	if w.kind == "sliding" {
		return t + 1
	}
	return t + w.def.Gap.Milliseconds()
}

// defined is a session or sliding kind as package window takes it.
func (w windows) defined() window.Defined { return w.def }

// paneNoun names what MaxOpenWindows counts, for errors.
func (w windows) paneNoun() string {
	if w.kind == "hopping" {
		return "panes"
	}
	return "windows"
}

func (w windows) paneNoun1() string {
	if w.kind == "hopping" {
		return "pane"
	}
	return "window"
}
