package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/bench/internal/powertools"
	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// measurePeer runs the Powertools peer on n events over keys keys in
// batches of batch against a counting stand-in, and returns what it spent
// per event: its idempotency table's writes and units apart from its
// counts table's (one window update per event).
func measurePeer(ctx context.Context, n, keys, batch int, log io.Writer) (peerPerEvent, error) {
	root, err := standin.RepoRoot()
	if err != nil {
		return peerPerEvent{}, err
	}
	peer, err := powertools.Prepare(ctx, root, log)
	if err != nil {
		return peerPerEvent{}, err
	}
	srv, counter, err := standin.StartCounting(ctx, standin.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return peerPerEvent{}, err
	}
	defer srv.Stop()
	awsCfg, err := standin.Config(ctx, srv.Endpoint())
	if err != nil {
		return peerPerEvent{}, err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	dir, err := os.MkdirTemp("", "tributary-bench-load-")
	if err != nil {
		return peerPerEvent{}, err
	}
	defer os.RemoveAll(dir)

	start := time.Now().UTC().Truncate(time.Hour)
	gen := generate(n, keys, time.Second, start, 1)
	evs := make([]stream.Envelope, len(gen))
	want := map[string]int{}
	for i := range gen {
		sent := gen[i].at.Add(40 * time.Millisecond)
		evs[i] = stream.Envelope{ID: fmt.Sprintf("evt-%d", i), Type: "page_view", Key: gen[i].key, OccurredAt: gen[i].at,
			SentAt: sent, ReceivedAt: sent.Add(112 * time.Millisecond), Data: []byte(`{"path":"/p/1","ms":120}`)}
		want[gen[i].key+"|"+evs[i].EventTime().UTC().Truncate(time.Minute).Format(time.RFC3339)]++
	}
	file := filepath.Join(dir, "events.jsonl")
	if err := powertools.WriteJSONL(file, evs); err != nil {
		return peerPerEvent{}, err
	}
	r, err := powertools.Run(ctx, db, counter, srv.Endpoint(), peer, file, batch, want)
	if err != nil {
		return peerPerEvent{}, fmt.Errorf("powertools peer: %w", err)
	}
	e := float64(len(evs))
	return peerPerEvent{
		idemWCU: float64(r.WCUByTable[r.IdempotencyTable]) / e, idemWrites: float64(r.WriteRequestsByTable[r.IdempotencyTable]) / e,
		windowWCU: float64(r.WCUByTable[r.CountsTable]) / e, windowWrites: float64(r.WriteRequestsByTable[r.CountsTable]) / e,
		rcu: r.RCU / e, reads: float64(r.ReadRequests) / e,
	}, nil
}
