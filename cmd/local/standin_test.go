package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// fakeStandIn answers on 127.0.0.1 as another run's stand-in does when
// probed: STS GetCallerIdentity, moto's dashboard API and who started it
// (standin.OwnerPath). It serves nothing else: no run deploys onto it here.
func fakeStandIn(t *testing.T, owner standin.Owner) string {
	t.Helper()
	ownerJSON, err := json.Marshal(owner)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == standin.OwnerPath:
			_, _ = w.Write(ownerJSON)
		case r.Method == http.MethodGet && r.URL.Path == "/moto-api/":
			_, _ = w.Write([]byte("<html><title>Moto</title></html>"))
		case r.Method == http.MethodPost:
			w.Header().Set("Content-Type", "text/xml")
			_, _ = w.Write([]byte(`<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>` +
				`<Arn>arn:aws:sts::123456789012:user/moto</Arn><UserId>AKIAIOSFODNN7EXAMPLE</UserId><Account>123456789012</Account>` +
				`</GetCallerIdentityResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestSecondRunGetsAStandInOfItsOwn: a make local (or make local-up) that
// finds another make local's stand-in at its address starts one of its own
// on a free port (the other stops it when its run ends, with whatever this
// run deployed onto it); a make local-up's stand-in, which stays until
// Ctrl-C, is reused as before.
func TestSecondRunGetsAStandInOfItsOwn(t *testing.T) {
	testtools.Need(t, "the moto stand-in cannot be installed without it", "python3")
	ctx := context.Background()
	aRun := standin.Owner{Command: "make local", PID: 4242, StopsWithRun: true}
	cases := []struct {
		name      string
		first     standin.Owner
		secondCmd string
		reused    bool
	}{
		{"beside a make local", aRun, "run", false},
		{"local-up beside a make local", aRun, "up", false},
		{"beside a make local-up", standin.Owner{Command: "make local-up", PID: 4243}, "run", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := fakeStandIn(t, tc.first)
			var out strings.Builder
			second, err := standinFor(ctx, &options{cmd: tc.secondCmd, addr: addr}, time.Now(), &out)
			if err != nil {
				t.Fatalf("standinFor %s: %v", addr, err)
			}
			t.Cleanup(func() { _ = second.Stop() })
			if second.Reused() != tc.reused {
				t.Fatalf("%s on %s (the stand-in of %s): reused=%v, want %v; it printed:\n%s", tc.secondCmd, addr, tc.first, second.Reused(), tc.reused, out.String())
			}
			if tc.reused {
				// It says it lasts only as long as the run that owns it.
				if want := "It lasts as long as make local-up (pid 4243): stopping that one (Ctrl-C there) stops its stand-in, and this run with it."; !strings.Contains(out.String(), want) {
					t.Errorf("it did not say it stops with the run that owns the stand-in (%q); it printed:\n%s", want, out.String())
				}
				// The address it offers for a stand-in of its own is
				// not the one in use (it offered 127.0.0.1:4567 to a
				// run already on 127.0.0.1:4567): the next port.
				host, port, _ := net.SplitHostPort(addr)
				n, _ := strconv.Atoi(port)
				if want := "pick a free address: TRIBUTARY_STANDIN_ADDR=" + net.JoinHostPort(host, strconv.Itoa(n+1)) + " make local"; !strings.Contains(out.String(), want) {
					t.Errorf("on %s it did not offer the next port (%q); it printed:\n%s", addr, want, out.String())
				}
				return
			}
			if second.Endpoint() == "http://"+addr {
				t.Fatalf("the second run's endpoint %s is the first run's", second.Endpoint())
			}
			if !strings.Contains(out.String(), "the stand-in of make local (pid 4242), which stops it when its run ends") {
				t.Errorf("it did not say whose stand-in it found; it printed:\n%s", out.String())
			}
			// The new stand-in says whose it is, for a third run.
			found, err := standin.Probe(ctx, strings.TrimPrefix(second.Endpoint(), "http://"), 0, nil)
			if err != nil || found.Owner == nil || found.Owner.PID != os.Getpid() || found.StopsWithRun() != (tc.secondCmd == "run") {
				t.Fatalf("probe of the second stand-in: %+v (owner %+v), %v; want it owned by this process (%d), stopping with its run: %v",
					found, found.Owner, err, os.Getpid(), tc.secondCmd == "run")
			}
		})
	}
}
