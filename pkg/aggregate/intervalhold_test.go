package aggregate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/backlog"
)

// On the per-interval path a record waits in Lambda's tumbling window state
// until the interval's flush. The shard's stored watermark does not move
// meanwhile, so the ticker would take it for idle and close the record's
// window by processing time before the flush writes it: the record, on
// time, was then dropped as late. The ticker now stops at the window the
// carried records open until the flush has written them, and a flush that
// never comes holds the shard back for at most half an hour.
func TestTickerWaitsForRecordsTheIntervalCarries(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		window string
		flush  bool            // whether the interval's flush comes
		ticks  []time.Duration // ticks while the record is carried
		want   string          // key a's results at the end
	}{
		{"tumbling: the window waits for its flush", `{"kind":"tumbling","size":"10s"}`, true,
			[]time.Duration{15 * time.Second, 50 * time.Second, 59 * time.Second}, "final [0s,10s) r1 count 2 sum 2"},
		{"hopping: the window waits for its flush", `{"kind":"hopping","size":"10s","advance":"5s"}`, true,
			[]time.Duration{15 * time.Second, 50 * time.Second, 59 * time.Second},
			"final [-5s,5s) r1 count 1 sum 1\nfinal [0s,10s) r1 count 2 sum 2\nfinal [5s,15s) r1 count 1 sum 1"},
		{"a flush that never comes holds the shard for half an hour", `{"kind":"tumbling","size":"10s"}`, false,
			[]time.Duration{15 * time.Second, 50 * time.Second, 29 * time.Minute, 31 * time.Minute, 32 * time.Minute}, "final [0s,10s) r1 count 1 sum 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := base
			clock := func() time.Time { return now }
			p, out := pipelineOn(t, `{"name":"kh","key":"key","value":"data.v","windows":[`+tt.window+`],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
				viewsAt(clock), aggregate.WithClock(clock))
			f := &feed{t: t, p: p, base: base, clock: &now}
			tick := f.tick
			f.carry(at{"a", 0, 1}) // the first interval: a@0s written
			f.flush()
			f.carry(at{"a", 5, 1}) // the second: a@5s carried
			for _, at := range tt.ticks[:2] {
				tick(at)
				if got := out.of("a", base); tt.flush && len(got) > 0 {
					t.Fatalf("tick at %v, a@5s still carried: results already\n%s", at, strings.Join(got, "\n"))
				}
			}
			for _, at := range tt.ticks[2:] {
				tick(at)
			}
			if tt.flush {
				f.flush()
			}
			tick(time.Hour)
			tick(time.Hour + time.Minute)
			if got := strings.Join(out.of("a", base), "\n"); got != tt.want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// A flush that never comes (a mapping disabled mid-interval) holds the
// shard for half an hour by its hold alone; with the stream read, the
// record the interval carried is still on it, after the shard's position,
// so the shard waits for it as long as it is there (it is processed when
// the mapping comes back), and closes by the clock once it is not.
func TestTickerWaitsPastTheHoldWhileTheCarriedRecordIsOnTheStream(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { return now }
	waiting := &resharded{next: map[string]backlog.Next{}}
	p, out := pipelineOn(t, `{"name":"kh","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"10s"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
		viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(waiting))
	f := &feed{t: t, p: p, base: base, clock: &now}
	tick := f.tick
	f.carry(at{"a", 0, 1})
	f.flush()
	f.carry(at{"a", 5, 1}) // carried; its flush never comes
	waiting.next[feedShard] = backlog.Next{Found: true, Arrived: base.Add(5 * time.Second)}
	for _, at := range []time.Duration{15 * time.Second, 50 * time.Second, 31 * time.Minute, 2 * time.Hour, 2*time.Hour + time.Minute} {
		tick(at)
		if got := out.of("a", base); len(got) > 0 {
			t.Fatalf("tick at %v, a@5s still on the stream: results already\n%s", at, strings.Join(got, "\n"))
		}
	}
	waiting.next[feedShard] = backlog.Next{} // gone (past the stream's retention)
	tick(3 * time.Hour)
	tick(3*time.Hour + time.Minute)
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,10s) r1 count 1 sum 1"; got != want {
		t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
	}
}
