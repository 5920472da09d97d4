package standin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// silent is a listener on 127.0.0.1 that accepts connections and never
// answers on them.
func silent(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestProbe(t *testing.T) {
	moto := standintest.Start(t)
	motoAddr := strings.TrimPrefix(moto.Endpoint(), "http://")
	cases := []struct {
		name      string
		addr      string
		patience  time.Duration
		kind      string // "" when nothing listens
		account   string
		busyCause string // part of the *BusyError's reason; "" for no error
	}{
		{name: "nothing listens", addr: freeAddr(t)},
		{name: "moto", addr: motoAddr, kind: "moto", account: "123456789012"},
		{name: "an AWS endpoint slow to answer first", addr: slowFirstProxy(t, moto.Endpoint()), patience: time.Minute, kind: "moto", account: "123456789012"},
		{name: "a web server", addr: notAWS(t), busyCause: "is not an AWS one"},
		{name: "a listener that never answers", addr: silent(t), patience: 500 * time.Millisecond, busyCause: "did not answer STS GetCallerIdentity within 500ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			found, err := standin.Probe(context.Background(), c.addr, c.patience, nil)
			if c.busyCause != "" {
				var busy *standin.BusyError
				if !errors.As(err, &busy) {
					t.Fatalf("Probe(%s) = %+v, %v; want a *BusyError", c.addr, found, err)
				}
				if busy.Addr != c.addr || !strings.Contains(err.Error(), c.addr) || !strings.Contains(busy.Reason, c.busyCause) {
					t.Fatalf("Probe(%s): %v; want it to name %s and say %q", c.addr, err, c.addr, c.busyCause)
				}
				return
			}
			if err != nil {
				t.Fatalf("Probe(%s): %v", c.addr, err)
			}
			if found.Listening() != (c.kind != "") || found.Kind != c.kind || found.Account != c.account {
				t.Fatalf("Probe(%s) = %+v, want kind %q account %q", c.addr, found, c.kind, c.account)
			}
		})
	}
}

// TestStartReusedSaysWhatItFound: a reused endpoint says what it is, for
// the runner's banner.
func TestStartReusedSaysWhatItFound(t *testing.T) {
	moto := standintest.Start(t)
	srv, err := standin.Start(context.Background(), standin.Options{Addr: strings.TrimPrefix(moto.Endpoint(), "http://"), Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("moto, the stand-in of go test (pid %d), which stops it when its run ends, account 123456789012, first answer after ", os.Getpid())
	if s := srv.Found().String(); !strings.HasPrefix(s, want) {
		t.Fatalf("Found() = %q, want %q… (moto, who started it, its account and wait)", s, want)
	}
}

// TestBusySuggestsAnotherAddress: the address a busy one's error offers
// is not the busy one: it offered TRIBUTARY_STANDIN_ADDR=127.0.0.1:4567
// also to a user who had picked 127.0.0.1:4567 already.
func TestBusySuggestsAnotherAddress(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:4566", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:4567,"},
		{"127.0.0.1:4567", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:4568,"},
		{"localhost:4567", "TRIBUTARY_STANDIN_ADDR=localhost:4568,"},
		{"127.0.0.1:65535", "TRIBUTARY_STANDIN_ADDR=127.0.0.1:0,"},
	} {
		msg := (&standin.BusyError{Addr: tc.addr, Reason: "its answer is not an AWS one"}).Error()
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "TRIBUTARY_STANDIN_ADDR="+tc.addr+",") {
			t.Errorf("%s busy: %q, want it to offer %q and not %s", tc.addr, msg, tc.want, tc.addr)
		}
	}
}

// TestOtherAddr: the address offered in place of one in use is never that
// one, and always one CheckAddr takes.
func TestOtherAddr(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{standin.DefaultAddr, "127.0.0.1:4567"},
		{"127.0.0.1:4567", "127.0.0.1:4568"},
		{"localhost:9", "localhost:10"},
		{"127.0.0.1:65535", "127.0.0.1:0"},
		{"127.0.0.1:0", "127.0.0.1:0"},
		{"bogus", "127.0.0.1:0"},
	} {
		got := standin.OtherAddr(tc.addr)
		if got != tc.want || standin.CheckAddr(got) != nil {
			t.Errorf("OtherAddr(%q) = %q, want %q (an address CheckAddr takes)", tc.addr, got, tc.want)
		}
	}
}
