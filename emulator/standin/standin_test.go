package standin_test

import (
	"context"
	"testing"

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
