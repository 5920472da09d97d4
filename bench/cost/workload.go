package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tributary-dev/tributary/pkg/stream"
)

// workloadWindow is the minute every generated event falls in, by event time.
var workloadWindow = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// generate returns n page-view envelopes over keys keys whose event times
// (occurredAt + (receivedAt − sentAt)) all fall in the minute starting at
// window. Producers' clocks are off by up to ±2 s and events reach ingest
// within a second, so occurredAt alone would not always give the event time.
// The same n and keys give the same events.
func generate(n, keys int, window time.Time) []stream.Envelope {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	evs := make([]stream.Envelope, n)
	for i := range evs {
		key := fmt.Sprintf("user-%03d", i%keys)
		skew := time.Duration(rng.IntN(4001)-2000) * time.Millisecond // producer clock − server clock
		// When it happened by the server's clock, in [window+5s, window+55s);
		// the event time adds the transit (under 0.5 s): still inside the minute.
		happened := window.Add(5*time.Second + time.Duration(rng.Int64N(int64(50*time.Second))))
		occurred := happened.Add(skew)
		sent := occurred.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
		transit := time.Duration(rng.IntN(500)) * time.Millisecond
		received := sent.Add(-skew).Add(transit)
		data, _ := json.Marshal(map[string]any{"page": fmt.Sprintf("/p/%d", rng.IntN(100)), "ms": rng.IntN(3000)})
		evs[i] = stream.Envelope{
			ID:         fmt.Sprintf("evt-%d-%06d", n, i),
			Type:       "page_view",
			Key:        key,
			OccurredAt: occurred,
			SentAt:     sent,
			ReceivedAt: received,
			Data:       data,
		}
	}
	return evs
}

// withDuplicates returns evs with pct % of them sent again later by their
// producer, as a client does after a timeout or a 429: the same bytes
// (same id, content and sentAt) arriving a few to a few hundred records
// after the original, so the copy's receivedAt — and so its event time — is
// later. The same input gives the same output.
func withDuplicates(evs []stream.Envelope, pct int) []stream.Envelope {
	if pct <= 0 {
		return evs
	}
	rng := rand.New(rand.NewPCG(uint64(len(evs)), uint64(pct)))
	out := append([]stream.Envelope(nil), evs...)
	copies := len(evs) * pct / 100
	for c := 0; c < copies; c++ {
		i := rng.IntN(len(evs))
		cp := evs[i]
		cp.ReceivedAt = cp.ReceivedAt.Add(time.Duration(100+rng.IntN(2000)) * time.Millisecond)
		at := min(len(out), i+1+rng.IntN(300))
		out = append(out[:at], append([]stream.Envelope{cp}, out[at:]...)...)
	}
	return out
}

// windowOf is the start of the 1-minute window of an event, as RFC 3339 UTC.
func windowOf(e *stream.Envelope) string {
	return e.EventTime().UTC().Truncate(time.Minute).Format(time.RFC3339)
}

// countsWithCopies counts every record of evs, copies too: what a pipeline
// without suppression by event id ends with.
func countsWithCopies(evs []stream.Envelope) map[string]int {
	out := map[string]int{}
	for i := range evs {
		out[evs[i].Key+"|"+windowOf(&evs[i])]++
	}
	return out
}

// expectedCounts counts evs per "<key>|<window>", each distinct id once.
func expectedCounts(evs []stream.Envelope) map[string]int {
	seen := make(map[string]bool, len(evs))
	out := map[string]int{}
	for i := range evs {
		if seen[evs[i].ID] {
			continue
		}
		seen[evs[i].ID] = true
		out[evs[i].Key+"|"+windowOf(&evs[i])]++
	}
	return out
}
