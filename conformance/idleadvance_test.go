package conformance

import (
	"testing"
	"time"
)

// TestKafkaStreamsConformanceAfterAnIdleAdvance plays histories in which
// the ticker advances the idle shard's watermark by the clock before a
// record arrives that the advanced watermark makes late, and compares them
// with Kafka Streams, whose stream time a record at the advance's
// watermark + outOfOrderness moves as far (history.advances). The record
// is judged against the stored watermark by a warm process, whose own copy
// of it is older, as by a cold one; on the per-interval path also when the
// advance comes during the interval, as far as its hold, where the
// watermark carried in Lambda's window state is older than the stored one.
// Each scenario is played on both write paths where it applies, for every
// window kind and late policy, with the record of the key that sent before
// it (a) and of a key with no window yet (b).
//
// Between batches: a@10:00:05, then ticks at 10:00:05 (the idle clock
// starts) and 10:03:00, which advance the watermark to 10:02:20 (Kafka's
// stream time 10:02:30), then the record at 10:00:30: late past any of its
// windows' allowed lateness (60s).
//
// During an interval: a@10:00:05, flushed (the watermark at 09:59:55);
// a@10:00:06, carried, its interval holding the ticker at the earliest
// window it adds to (tumbling: 10:00:00; sliding, session: 10:00:06), then
// ticks at 10:00:06 and 10:03:00, which advance the watermark to the hold
// (hopping: its hold, 09:58:30, is behind the watermark, which stays);
// then the record, after the carried watermark's windows (09:59:56) and
// before the stored one's.
func TestKafkaStreamsConformanceAfterAnIdleAdvance(t *testing.T) {
	buildOracle(t)
	o := startOracle(t)
	ms := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }
	scenarios := []struct {
		name  string
		paths []string
		// history fills h for the late record's key and time.
		history func(h *history, key string)
		// late is when the record is, per window kind.
		late map[string]time.Duration
	}{
		{
			name:  "between batches",
			paths: []string{perBatch, perInterval},
			history: func(h *history, key string) {
				h.events = []event{{id: "e0", key: "a", t: ms(5 * time.Second), v: 1}, {id: "e1", key: key, v: 2}}
				h.invocations = []invocation{{first: 0, last: 0}, {first: 1, last: 1}}
				h.idleTicks = [][]int64{{ms(5 * time.Second), ms(3 * time.Minute)}, nil}
			},
			late: map[string]time.Duration{"tumbling": 30 * time.Second, "hopping": 30 * time.Second, "sliding": 30 * time.Second, "session": 30 * time.Second},
		},
		{
			name:  "during an interval",
			paths: []string{perInterval},
			history: func(h *history, key string) {
				h.events = []event{{id: "e0", key: "a", t: ms(5 * time.Second), v: 1}, {id: "e1", key: "a", t: ms(6 * time.Second), v: 1}, {id: "e2", key: key, v: 2}}
				h.invocations = []invocation{{first: 0, last: 0}, {first: 1, last: 1}, {first: 2, last: 2}}
				h.idleTicks = [][]int64{nil, {ms(6 * time.Second), ms(3 * time.Minute)}, nil}
			},
			late: map[string]time.Duration{"tumbling": -30 * time.Second, "hopping": -30 * time.Second, "sliding": 0, "session": -20 * time.Second},
		},
	}
	for _, sc := range scenarios {
		for _, path := range sc.paths {
			for _, k := range kinds {
				for _, p := range policies {
					for _, process := range []string{"warm", "cold"} {
						for _, key := range []string{"a", "b"} {
							name := sc.name + "/" + path + "/" + k.name + "/" + p + "/" + process + "/key " + key
							h := &history{kind: k, policy: p, seed: 1, name: name, cold: process == "cold"}
							sc.history(h, key)
							h.events[len(h.events)-1].t = ms(sc.late[k.name])
							for i := range h.events {
								h.arrivals = append(h.arrivals, arrival{event: i})
							}
							h.flushAfter = map[int]bool{0: true} // the first invocation is an interval of its own
							t.Run(name, func(t *testing.T) {
								got := runProject(t, h, path)
								o.submit(h.kafka())
								compare(h, got, o.result(t, h.id())).report(t, h)
							})
						}
					}
				}
			}
		}
	}
}
