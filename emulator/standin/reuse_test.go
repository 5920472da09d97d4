package standin_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// slowFirstAnswer is how long the slow endpoint below holds its first
// request: longer than a quick probe waits, as LocalStack does while it
// builds its service catalog (about 15 s).
const slowFirstAnswer = 4 * time.Second

// slowFirstProxy serves backend on 127.0.0.1, holding the first request it
// gets for slowFirstAnswer, as LocalStack does with its first request.
func slowFirstProxy(t *testing.T, backend string) string {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { time.Sleep(slowFirstAnswer) })
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// notAWS is an HTTP server on 127.0.0.1 that answers every request with a
// web page, as a development server on the port would.
func notAWS(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html><body>Not Found</body></html>"))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestStartReusesAnEndpointWhoseFirstAnswerIsSlow: an AWS endpoint that
// takes seconds to answer its first request is found and reused, never
// taken for a free port.
func TestStartReusesAnEndpointWhoseFirstAnswerIsSlow(t *testing.T) {
	moto := standintest.Start(t)
	addr := slowFirstProxy(t, moto.Endpoint())
	srv, err := standin.Start(context.Background(), standin.Options{Addr: addr, Reuse: true})
	if err != nil {
		t.Fatalf("Start on %s, an AWS endpoint slow to answer first: %v", addr, err)
	}
	if !srv.Reused() || srv.Endpoint() != "http://"+addr {
		t.Fatalf("Start on %s: endpoint %s reused=%v, want it reused", addr, srv.Endpoint(), srv.Reused())
	}
	// Behind the proxy is another process's stand-in: it says who started
	// it and that it stops with that run (a second make local then starts
	// its own instead of deploying onto it).
	f := srv.Found()
	if f.Kind != "moto" || f.Owner == nil || f.Owner.Command != "go test" || f.Owner.PID != os.Getpid() || !f.StopsWithRun() {
		t.Fatalf("Found %+v owner %+v: want moto, owned by go test (pid %d), stopping with its run", f, f.Owner, os.Getpid())
	}
	if want := "the stand-in of go test (pid "; !strings.Contains(f.String(), want) {
		t.Fatalf("Found.String() = %q, want it to contain %q", f.String(), want)
	}
}

// TestStartOnABusyPortNamesIt: a port held by something that is not an AWS
// endpoint is refused with an error naming it and saying so; no moto is
// started there.
func TestStartOnABusyPortNamesIt(t *testing.T) {
	addr := notAWS(t)
	srv, err := standin.Start(context.Background(), standin.Options{Addr: addr, Reuse: true})
	if err == nil {
		_ = srv.Stop()
		t.Fatalf("Start on %s, held by a web server: want an error", addr)
	}
	for _, want := range []string{addr, "not an AWS endpoint"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start on %s: error %q does not say %q", addr, err, want)
		}
	}
}

// freeAddr is a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
