package local

import (
	"fmt"
	"io"
	"os"
)

// statusLine is one line of progress ("sent 300/528 events") rewritten in
// place on a terminal. Elsewhere (a log, CI, a pipe) only the line's last
// text is written, once, on Done, so a log holds one line per step and not
// every intermediate count run together.
type statusLine struct {
	w    io.Writer
	tty  bool
	last string
}

func newStatusLine(w io.Writer) *statusLine {
	return &statusLine{w: w, tty: isTerminal(w)}
}

// Set replaces the line's text.
func (s *statusLine) Set(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if text == s.last {
		return
	}
	s.last = text
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", text)
	}
}

// Done ends the line.
func (s *statusLine) Done() {
	if s.last == "" {
		return
	}
	if s.tty {
		fmt.Fprintln(s.w)
		return
	}
	fmt.Fprintln(s.w, s.last)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
