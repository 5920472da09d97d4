package standin_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

func TestStartAnswersAndStops(t *testing.T) {
	srv := standintest.Start(t)
	ctx := context.Background()
	if !standin.Answers(ctx, srv.Endpoint()) {
		t.Fatalf("stand-in at %s does not answer", srv.Endpoint())
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if standin.Answers(ctx, srv.Endpoint()) {
		t.Fatalf("stand-in at %s still answers after Stop", srv.Endpoint())
	}
}

func TestStartRefusesTakenPortUnlessReuse(t *testing.T) {
	srv := standintest.Start(t)
	addr := srv.Endpoint()[len("http://"):]
	if _, err := standin.Start(context.Background(), standin.Options{Addr: addr}); err == nil {
		t.Fatalf("Start on taken %s without Reuse: want error", addr)
	}
	again, err := standin.Start(context.Background(), standin.Options{Addr: addr, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused() || again.Endpoint() != srv.Endpoint() {
		t.Fatalf("Reuse: got %s reused=%v, want %s reused", again.Endpoint(), again.Reused(), srv.Endpoint())
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	if _, err := standin.Start(context.Background(), standin.Options{Addr: "0.0.0.0:4566"}); err == nil {
		t.Fatal("want error for non-loopback address")
	}
}

// TestAnswersWaitsForABusyStandIn: moto under a running topology on busy
// cores can take seconds to answer; one that accepts the connection and
// answers late still answers (make results and make logs said "nothing
// answers" of a live make local-up), and a port nothing listens on does
// not.
func TestAnswersWaitsForABusyStandIn(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(4 * time.Second) // longer than the probe used to wait
		if r.URL.Path != "/moto-api/" {
			http.NotFound(w, r)
		}
	}))
	defer slow.Close()
	if !standin.Answers(context.Background(), slow.URL) {
		t.Errorf("a stand-in answering after 4 s does not answer")
	}
	free, err := standin.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if standin.Answers(context.Background(), fmt.Sprintf("http://127.0.0.1:%d", free)) {
		t.Errorf("a port nothing listens on answers")
	}
}

// An address with no port, or a port past 65535, is refused as what it is:
// "127.0.0.1:" used to start moto on any free port, and 127.0.0.1:99999 was
// reported as in use.
func TestStartRefusesAnAddressThatIsNoPort(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:http", "bogus"} {
		_, err := standin.Start(context.Background(), standin.Options{Addr: addr})
		if err == nil || strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "1 to 65535") {
			t.Errorf("Start at %q: %v, want it refused as no address the stand-in can be on", addr, err)
		}
	}
}

// TestMotoThatEndsTakesItsEndpointDown: a moto that ends on its own (killed,
// crashed) leaves nothing listening at the stand-in's address, so a run
// watching it (make local-up) and clients see it gone rather than an error
// page for every request, and the Server says how moto ended.
func TestMotoThatEndsTakesItsEndpointDown(t *testing.T) {
	srv := standintest.Start(t)
	if srv.ExitReason() != "" {
		t.Fatalf("ExitReason of a running moto: %q, want empty", srv.ExitReason())
	}
	if err := standin.KillMoto(srv); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("Exited not closed 30 s after moto was killed")
	}
	if r := srv.ExitReason(); !strings.Contains(r, "moto (pid") || !strings.Contains(r, "killed") {
		t.Errorf("ExitReason %q, want moto's pid and how it ended", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 10 s after its moto ended", srv.Endpoint())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
