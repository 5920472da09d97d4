package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestArchiveRebuildCrossesTheSeam: on the whole topology, the archive
// function writes the events stream to the stack's bucket, and a rebuild
// from the start reads the archive up to a seam and the stream after it
// (copies of records from before the seam among them) into a new version
// whose page-view windows equal the live ones.
func TestArchiveRebuildCrossesTheSeam(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	w, err := stack.FindPipeline("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	pipelines, err := stack.FindPipelines()
	if err != nil {
		t.Fatal(err)
	}
	events, param := env(t, stack, "ingest", "EVENTS_STREAM_NAME"), env(t, stack, "aggregate", "VIEWS_PARAMETER_NAME")
	url := stack.URL("ingest")

	began := time.Now().Add(-time.Second)
	now := time.Now().UTC()
	evs, want := local.Traffic{Keys: 4, Minutes: 2, Max: 4, Seed: 7, Now: now}.Generate()
	if _, err := local.Send(ctx, url, evs, 50, io.Discard); err != nil {
		t.Fatal(err)
	}
	from, to := now.Truncate(time.Minute).Add(-3*time.Minute), now.Add(time.Hour)
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	seam := time.Now()
	var followers []stream.Envelope
	for i := range 5 {
		at := time.Now().UTC()
		followers = append(followers, stream.Envelope{ID: fmt.Sprintf("after-seam-%d", i), Type: "page_view", Key: "user-00",
			OccurredAt: at, SentAt: at, Data: json.RawMessage(`{"page":"/after","ms":100}`)})
	}
	for _, e := range followers {
		want[local.WindowKey{Key: e.Key, Window: e.OccurredAt.Truncate(time.Minute).Format(time.RFC3339)}]++
	}
	if _, err := local.Send(ctx, url, append(followers, evs[:10]...), 50, io.Discard); err != nil { // evs[:10]: a producer's copies
		t.Fatal(err)
	}
	if _, err := w.Wait(ctx, want, from, to, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if fan, err := stack.FanOut(ctx, events, time.Minute); err != nil || !fan.Complete() {
		t.Fatalf("fan-out (the archive function among the subscribers): %+v %v", fan, err)
	}

	var out bytes.Buffer
	err = local.ArchiveRebuild{Stream: events, Parameter: param, Pipelines: pipelines, Check: w, From: began, Seam: seam}.Run(ctx, stack, want, from, to, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, s := range []string{"records from the archive (arrived before the seam)", "rebuilt = live:"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}
