package clitest

import (
	"bytes"
	"context"
	"strings"
	"sync"
)

// CancelOn is a stderr that cancels its run, as Ctrl-C would, once a line
// holding Marker has been written to it; String is all that was written.
type CancelOn struct {
	Marker string
	Cancel context.CancelFunc

	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *CancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.Marker) {
		w.Cancel()
	}
	return n, err
}

// String is what was written.
func (w *CancelOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
