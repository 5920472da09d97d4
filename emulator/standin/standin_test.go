package standin_test

import (
	"context"
	"fmt"
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
