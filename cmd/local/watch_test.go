package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
)

// A second make local-up deploys onto the first's stand-in; when the first
// stopped, the second went on printing "connection refused" about ten
// times a second with nothing saying why. It now notices that nothing
// accepts connections there, drops the lines those failures print, and
// ends with one error naming the address and whose stand-in it was.
func TestUpNoticesItsStandInStopped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var out strings.Builder
	gate := newHeldWriter(&out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := watchStandin(ctx, srv.URL, 50*time.Millisecond, 6, gate)

	_, _ = gate.Write([]byte("while it answers\n"))
	select {
	case <-gone:
		t.Fatal("taken as gone while it answers")
	case <-time.After(200 * time.Millisecond):
	}
	srv.Close()
	// A probe or two refused: not yet gone (six in a row), but what the
	// stack prints is held from the first.
	time.Sleep(120 * time.Millisecond)
	deadline := time.After(5 * time.Second)
	for written := false; ; {
		select {
		case <-gone:
		case <-deadline:
			t.Fatal("not taken as gone 5s after it stopped")
		case <-time.After(5 * time.Millisecond):
			_, _ = gate.Write([]byte("cloudwatch: dial tcp: connection refused\n"))
			written = true
			continue
		}
		if !written {
			t.Fatal("gone before any failure was printed")
		}
		break
	}
	_, _ = gate.Write([]byte("cloudwatch: dial tcp: connection refused\n"))
	if got := out.String(); got != "while it answers\n" {
		t.Errorf("printed %q, want only what came while it answered", got)
	}

	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name   string
		reused bool
		found  standin.Found
		exit   string
		want   []string
	}{
		{"another make local-up's", true, standin.Found{Kind: "moto", Owner: &standin.Owner{Command: "make local-up", PID: 4243}}, "",
			[]string{addr, "stopped answering", "make local-up (pid 4243)", "did not start", "cannot go on", "TRIBUTARY_STANDIN_ADDR="}},
		{"LocalStack", true, standin.Found{Kind: "LocalStack 2026.3.0 (community)"}, "",
			[]string{addr, "LocalStack 2026.3.0 (community), which this make local-up did not start", "cannot go on"}},
		{"its own", false, standin.Found{}, "", []string{addr, "the stand-in this make local-up started", "cannot go on"}},
		{"its own, ended", false, standin.Found{}, "moto (pid 77) ended: signal: killed; its last output: \"MemoryError\"",
			[]string{addr, "the stand-in this make local-up started: moto (pid 77) ended: signal: killed", "MemoryError", "cannot go on"}},
	} {
		msg := standinGone(addr, tc.reused, tc.found, tc.exit).Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, w)
			}
		}
	}
	// The address it offers for a stand-in of its own is not the one that
	// went: it offered 127.0.0.1:4567 to a make local-up on 127.0.0.1:4567.
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:4566", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:4567 make local-up"},
		{"127.0.0.1:4567", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:4568 make local-up"},
	} {
		if msg := standinGone(tc.addr, true, standin.Found{Kind: "moto"}, "").Error(); !strings.Contains(msg, tc.want) {
			t.Errorf("the stand-in at %s gone: %q, want it to offer %q", tc.addr, msg, tc.want)
		}
	}
}

// A stand-in slow for a moment (moto on busy cores) loses nothing: the
// lines held while a probe failed come out once it answers again.
func TestHeldLinesComeOutWhenTheStandInAnswersAgain(t *testing.T) {
	var out strings.Builder
	gate := newHeldWriter(&out)
	_, _ = gate.Write([]byte("a\n"))
	gate.hold()
	_, _ = gate.Write([]byte("b\n"))
	if out.String() != "a\n" {
		t.Fatalf("printed %q while held", out.String())
	}
	gate.release()
	_, _ = gate.Write([]byte("c\n"))
	if out.String() != "a\nb\nc\n" {
		t.Errorf("printed %q, want a, b, c", out.String())
	}
}
