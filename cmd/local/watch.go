package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// How make local-up tells that its stand-in stopped: a TCP connection to
// it refused standinMisses times in a row, standinProbeEvery apart (2s;
// often, so that few failure lines print before the first refusal holds
// them). Only
// a refused (or timed out) connection counts, not a slow answer: moto on
// busy cores can take seconds to answer a request, but a stand-in that is
// running always accepts the connection.
const (
	standinProbeEvery = 250 * time.Millisecond
	standinMisses     = 8
)

// watchStandin returns a channel closed once nothing accepts connections
// at endpoint misses probes in a row, every apart. A failed probe holds
// gate's output (the stack's mappings and metrics then print a
// "connection refused" line each, several a second) until a probe
// succeeds again, which lets the held lines through; once the stand-in is
// taken as gone they are dropped, and the caller says why in one line.
func watchStandin(ctx context.Context, endpoint string, every time.Duration, misses int, gate *heldWriter) <-chan struct{} {
	gone := make(chan struct{})
	host := strings.TrimPrefix(endpoint, "http://")
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		missed := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if listening(host, every) {
				missed = 0
				gate.release()
				continue
			}
			missed++
			gate.hold()
			if missed >= misses {
				gate.drop()
				close(gone)
				return
			}
		}
	}()
	return gone
}

// standinGone is the error up ends with when the stand-in at addr
// stopped answering: whose it was (with how its moto ended, exit, when
// this run started it), that what this run deployed went with it, and
// what to do.
func standinGone(addr string, reused bool, found standin.Found, exit string) error {
	var whose string
	switch {
	case !reused && exit != "":
		whose = "the stand-in this make local-up started: " + exit
	case !reused:
		whose = "the stand-in this make local-up started (its moto process ended)"
	case found.Owner != nil:
		whose = fmt.Sprintf("the stand-in of %s, another make local-up this one did not start and deployed onto as a stack of its own: that one has stopped, and its stand-in with it", found.Owner)
	default:
		whose = fmt.Sprintf("%s, which this make local-up did not start and deployed onto as a stack of its own", found.Kind)
	}
	return fmt.Errorf("the AWS stand-in at %s stopped answering: %s. The streams, tables and queues this run deployed were in it, so this run cannot go on and has stopped; "+
		"make local-up again deploys onto a stand-in that answers (TRIBUTARY_STANDIN_ADDR=%s make local-up gives it one of its own)", addr, whose, standin.OtherAddr(addr))
}

// heldWriter passes writes to w, except while held: then it keeps up to
// maxHeld bytes of them, written out on release, or dropped.
type heldWriter struct {
	mu      sync.Mutex
	w       io.Writer
	holding bool
	dropped bool
	held    bytes.Buffer
}

const maxHeld = 64 << 10

func newHeldWriter(w io.Writer) *heldWriter { return &heldWriter{w: w} }

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.dropped:
		return len(p), nil
	case h.holding:
		if h.held.Len()+len(p) <= maxHeld {
			h.held.Write(p)
		}
		return len(p), nil
	}
	return h.w.Write(p)
}

func (h *heldWriter) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holding = true
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding && !h.dropped {
		_, _ = h.w.Write(h.held.Bytes())
	}
	h.holding = false
	h.held.Reset()
}

// drop discards what is held and everything written after.
func (h *heldWriter) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropped = true
	h.held.Reset()
}
