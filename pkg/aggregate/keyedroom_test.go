package aggregate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// busySliding is a pipeline whose busy key makes more sliding windows,
// each with its distinct sketch, than one write of its keyed state holds:
// a finalize records what fits, leaves the rest (listed at them) and keeps
// the emitted values until they pass the allowed lateness.
const busySliding = `{"name":"busy","key":"key","value":"data.ms","distinct":"data.user",
	 "windows":[{"kind":"sliding","difference":"1m"}],
	 "aggregates":["count","max","distinct"],"outOfOrderness":"0s","idleTimeout":"30s",
	 "latePolicy":"correct","allowedLateness":"30m","partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`

// every is the ticker's schedule from from to to by step, after the last
// record.
func every(step, from, to time.Duration) []time.Duration {
	var out []time.Duration
	for d := from; d <= to; d += step {
		out = append(out, d)
	}
	return out
}

type busyRig struct {
	t     *testing.T
	h     *hardened
	start time.Time
	seq   int
}

func newBusyRig(t *testing.T) *busyRig {
	return &busyRig{t: t, h: newHardenedInProcess(t, busySliding), start: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
}

// send is one batch of n records of the busy key 100 ms apart after at; it
// returns the last one's time.
func (r *busyRig) send(n int, at time.Time) time.Time {
	r.t.Helper()
	var ev events.KinesisEvent
	for i := 0; i < n; i++ {
		r.seq++
		at = at.Add(100 * time.Millisecond)
		ev.Records = append(ev.Records, rawRecord(r.seq, "busy", view(fmt.Sprint("e", r.seq), "busy", at, fmt.Sprintf(`{"ms":1,"user":"u%d"}`, r.seq)), at))
	}
	resp, err := r.h.proc.HandleBatch(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		r.t.Fatalf("batch: %v %v", resp, err)
	}
	return at
}

func (r *busyRig) tick(now time.Time) {
	r.t.Helper()
	if _, err := r.h.proc.Tick(context.Background(), now); err != nil {
		r.t.Fatalf("tick: %v", err)
	}
}

func (r *busyRig) final(to time.Time) int {
	n := 0
	for _, v := range r.h.window(r.t, "busy", "sliding:1m0s", r.start.Add(-2*time.Hour), to.Add(2*time.Hour)) {
		if v.Final {
			n++
		}
	}
	return n
}

// TestTickerFinalizesWindowsLeftForWantOfRoomOnceTheirRoomIsPruned: the
// busy key's shard goes idle after its one batch: only the ticker
// finalizes. Once the windows it recorded pass the allowed lateness, a
// tick's prune frees their room, and the windows left must be recorded
// and published by the ticks after it (1,999 windows in all). Then the key
// sends again: none of its records may be set aside as over the state's
// budget, every window it had being past the lateness. A ticker that kept
// such a prune in memory only (a finalize with nothing recorded skips its
// save) found the state as full at every tick: 470 windows final after
// hours, and the key's next records all set aside.
func TestTickerFinalizesWindowsLeftForWantOfRoomOnceTheirRoomIsPruned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ticks []time.Duration // after the last record
	}{
		{"a tick every 10 minutes for 3h", every(10*time.Minute, time.Minute, 3*time.Hour)},
		{"ticks at 2m and 5m, then hourly", []time.Duration{2 * time.Minute, 5 * time.Minute, 2 * time.Hour, 3 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newBusyRig(t)
			at := r.send(1000, r.start)
			for _, d := range tc.ticks {
				r.tick(at.Add(d))
			}
			if n := r.final(at); n < 1999 {
				t.Errorf("%d sliding windows final after the shard stood idle %v, want all 1,999: those left for want of room are never recorded", n, tc.ticks[len(tc.ticks)-1])
			}
			stored := keyedStateBytes(t, r.h.mem, "busy")
			r.send(1000, at.Add(tc.ticks[len(tc.ticks)-1]+30*time.Second))
			if n := len(r.h.quarantined(t)); n > 0 {
				t.Errorf("%d of the busy key's 1,000 records set aside as over its state budget (%d bytes stored before they came, of %d), hours after every one of its windows passed the allowed lateness", n, stored, aggregate.MaxKeyedStateBytes)
			}
		})
	}
}
