package aggregate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
)

// Lambda sends an interval's invocation again with the state it sent it
// with when the response was lost; the records it dropped as late are
// counted once, at the flush, not once per delivery (the state the lost
// response carried, with their dedupe claims, is gone). Kafka Streams,
// reading each record once, drops each once: the conformance test on the
// per-interval path compares the counts.
func TestIntervalCountsLateRecordsOnceWhenAnInvocationComesAgain(t *testing.T) {
	// Each record is in three windows: one tumbling, two hopping.
	p, emf := meteredPipelineWithLedger(t, strings.Replace(lateMetricConfig, "data.ms", "data.v", 1))
	ctx := context.Background()
	r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	r.carry(at{"k", 10, 1}, at{"z", 300, 1})
	r.flush() // k's windows of 10s are final
	emf.Reset()
	ev := events.KinesisTimeWindowEvent{KinesisEvent: r.records(at{"k", 20, 1}, at{"k", 30, 1}, at{"z", 310, 1}),
		TimeWindowProperties: events.TimeWindowProperties{ShardID: feedShard, State: map[string]string{}}}
	var resp events.KinesisTimeWindowEventResponse
	var err error
	for range 2 { // the first response lost
		if resp, err = p.HandleInterval(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("interval batch: %+v %v", resp, err)
		}
	}
	r.state = resp.State
	r.flush()
	if got := emfSum(t, emf, "LateDropped"); got != 2 {
		t.Errorf("LateDropped %v, want 2: two late records, each once, whatever the deliveries", got)
	}
}

// A record the interval's watermark finds late for a window the stored
// watermark has not closed yet holds the ticker off that window until the
// flush, as a record for an open window does: the window's first result
// includes the record, as a batch's would (and Kafka Streams' window has
// it once its stream time passes the window's end), rather than the ticker
// closing the window without it and the flush correcting it.
func TestIntervalHoldsTheWindowsItsLateRecordsCorrect(t *testing.T) {
	p, out := pipelineOn(t, `{"name":"ih","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"10s","idleTimeout":"30s","latePolicy":"correct","allowedLateness":"10m",
	  "partitionKeyIsGroupingKey":true}`, inProcessViews)
	r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	r.carry(at{"a", 4, 52})
	r.flush() // the watermark at -6s: [0s,1m) open, with one record
	// The next interval passes the window's end, then meets a record for it.
	r.carry(at{"z", 76, 1}, at{"a", 14, -16})
	// The ticker, the shard idle by its stored watermark, moves it as far
	// as the interval's hold lets it.
	for _, s := range []int{213, 250} {
		if _, err := p.Tick(context.Background(), r.base.Add(time.Duration(s)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	r.flush()
	if got, want := strings.Join(out.of("a", r.base), "\n"), "final [0s,1m0s) r1 count 2 sum 36"; got != want {
		t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
	}
}

// A final invocation Lambda sends again after it succeeded (its response
// lost) does not count the interval's late records again: not those its
// window writes would have carried (it finds them applied), not those of
// an interval that made no window write (FirstToCount), and not a session
// record dropped from every window (its key's state is written for the
// fence all the same).
func TestIntervalFinalSentAgainCountsLateRecordsOnce(t *testing.T) {
	for _, tt := range []struct {
		name, window string
		late         []at
		want         float64
	}{
		{"with window writes", `{"kind":"tumbling","size":"1m"}`, []at{{"k", 20, 1}, {"k", 130, 1}}, 1},
		{"without a window write", `{"kind":"tumbling","size":"1m"}`, []at{{"k", 20, 1}, {"k", 30, 1}}, 2},
		{"a session record dropped from every window", `{"kind":"session","gap":"5s"}`, []at{{"k", 20, 1}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var emf bytes.Buffer
			p, _ := pipelineOn(t, `{"name":"fa","key":"key","value":"data.v","windows":[`+tt.window+`],
			  "aggregates":["count","sum"],"outOfOrderness":"0s","idleTimeout":"30s","latePolicy":"drop","partitionKeyIsGroupingKey":true}`,
				inProcessViews, aggregate.WithMetrics(metrics.New(&emf, "aggregate")))
			r := &feed{t: t, p: p, base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
			r.carry(at{"k", 10, 1}, at{"z", 100, 1})
			r.flush() // k's windows of 10s are final
			emf.Reset()
			r.carry(tt.late...)
			final := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: feedShard, State: r.state, IsFinalInvokeForWindow: true}}
			for range 2 {
				if resp, err := p.HandleInterval(ctx, final); err != nil || len(resp.BatchItemFailures) > 0 {
					t.Fatalf("final invocation: %+v %v", resp, err)
				}
			}
			if got := emfSum(t, &emf, "LateDropped"); got != tt.want {
				t.Errorf("LateDropped %v, want %v: each late record once, however often the final invocation comes", got, tt.want)
			}
		})
	}
}
