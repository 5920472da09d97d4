package replay

import (
	"fmt"
	"io"
	"sync"
)

// progress writes a replay's output: lines that stay (printf) and one
// status line. On a terminal (inPlace) the status line is rewritten in place
// and cleared before a lasting line; elsewhere (a log, a pipe) it is written
// as a line only when it changed, so a quiet handover does not repeat it.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	prefix   string
	inPlace  bool
	last     string
	onScreen bool
}

func newProgress(w io.Writer, prefix string, inPlace bool) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, prefix: prefix, inPlace: inPlace}
}

// clearLine moves to the start of the line and erases it (ANSI).
const clearLine = "\r\x1b[K"

// printf writes a lasting line.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onScreen {
		fmt.Fprint(p.w, clearLine)
		p.onScreen = false
	}
	fmt.Fprintf(p.w, p.prefix+format+"\n", args...)
}

// status shows the status line; suffix is shown only in place (a
// countdown), and does not count as a change.
func (p *progress) status(line, suffix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inPlace {
		fmt.Fprint(p.w, clearLine+p.prefix+line+suffix)
		p.onScreen = true
		return
	}
	if line == p.last {
		return
	}
	p.last = line
	fmt.Fprintln(p.w, p.prefix+line)
}

// end leaves the status line on screen and moves to the next line.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onScreen {
		fmt.Fprintln(p.w)
		p.onScreen = false
	}
}
