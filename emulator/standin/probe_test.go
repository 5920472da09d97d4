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
