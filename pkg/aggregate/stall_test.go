package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A function that fails, is throttled or is being redeployed for longer
// than idleTimeout stops moving its shard's watermark, although records
// wait on the stream. The ticker took the shard for idle and closed the
// windows those records belong to by the clock: when the function came
// back they were late, dropped (or, under correct, corrections of results
// that had left them out). The ticker now asks the events stream
// (package backlog) and advances no further than the first unprocessed
// record's arrival allows; a shard that has nothing left still advances.
func TestTickerWaitsForRecordsAStalledFunctionHasNotProcessed(t *testing.T) {
	for _, path := range []string{perBatch, perInterval} {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			name := fmt.Sprintf("stall-%d", tableSeq.Add(1))
			keyedtest.CreateStream(t, kin, name, 1)
			// Event times are the records' real arrival, as a live
			// producer's are: the ticker compares them with the stream's.
			base := time.Now().UTC().Truncate(time.Minute)
			now := base
			clock := func() time.Time { return now }
			p, out := pipelineOn(t, `{"name":"stall","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
			  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
				viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(backlog.New(kin, name)))
			first := keyedtest.PutEnvelope(t, kin, name, envelopeAt(1, "a", time.Now(), 1))
			second := keyedtest.PutEnvelope(t, kin, name, envelopeAt(2, "a", time.Now(), 2))
			deliver := func(r events.KinesisEventRecord) {
				t.Helper()
				ev := events.KinesisEvent{Records: []events.KinesisEventRecord{r}}
				if path == perBatch {
					if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
						t.Fatalf("batch: %v %v", resp, err)
					}
					return
				}
				tw := events.KinesisTimeWindowEvent{KinesisEvent: ev, TimeWindowProperties: events.TimeWindowProperties{ShardID: "shardId-000000000000"}}
				resp, err := p.HandleInterval(ctx, tw)
				if err != nil {
					t.Fatal(err)
				}
				flush := events.KinesisTimeWindowEvent{TimeWindowProperties: events.TimeWindowProperties{ShardID: "shardId-000000000000", State: resp.State, IsFinalInvokeForWindow: true}}
				if _, err := p.HandleInterval(ctx, flush); err != nil {
					t.Fatal(err)
				}
			}
			tick := func(at time.Duration) {
				t.Helper()
				now = base.Add(at)
				if _, err := p.Tick(ctx, now); err != nil {
					t.Fatal(err)
				}
			}
			deliver(first)
			// The function is stuck on the second record for minutes.
			for _, at := range []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute} {
				tick(at)
				if got := out.of("a", base); len(got) > 0 {
					t.Fatalf("tick at %v with a record not processed: the window closed without it\n%s", at, strings.Join(got, "\n"))
				}
			}
			deliver(second)
			tick(5 * time.Minute)
			tick(6 * time.Minute)
			if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 2 sum 3"; got != want {
				t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// A stream the ticker cannot read (throttled, or a permission missing)
// does not make a shard idle: its watermark stays, the tick fails naming
// the shard (the ticker's alarm), and the windows close once it can read.
func TestTickerThatCannotReadTheStreamDoesNotAdvance(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { return now }
	unread := &unreadable{err: fmt.Errorf("ProvisionedThroughputExceededException: rate exceeded")}
	p, out := pipelineOn(t, `{"name":"unread","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
		viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(unread))
	f := &feed{t: t, p: p, base: base, clock: &now}
	f.batch(at{"a", 1, 1})
	for _, at := range []time.Duration{2 * time.Minute, 3 * time.Minute} {
		now = base.Add(at)
		_, err := p.Tick(ctx, now)
		if at == 2*time.Minute {
			continue // the first tick starts the idle clock
		}
		if err == nil || !strings.Contains(err.Error(), feedShard) || !strings.Contains(err.Error(), "rate exceeded") {
			t.Fatalf("tick at %v: error %v; want one naming the shard and the cause", at, err)
		}
	}
	if got := out.of("a", base); len(got) > 0 {
		t.Fatalf("the window closed although the stream could not be read:\n%s", strings.Join(got, "\n"))
	}
	unread.err = nil
	for _, at := range []time.Duration{4 * time.Minute, 5 * time.Minute} {
		now = base.Add(at)
		if _, err := p.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 1 sum 1"; got != want {
		t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
	}
}

// A shard whose first batch applied nothing (a record no pipeline can
// read) has a position but a watermark still at zero; a tick that cannot
// read the stream must not take zero for "no bound" and advance it by the
// clock, making the records that wait late.
func TestTickerThatCannotReadTheStreamLeavesAFreshWatermark(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { return now }
	unread := &unreadable{err: fmt.Errorf("rate exceeded")}
	var views *state.Views
	var cfg *pipeline.Config
	ticker, out := pipelineOn(t, `{"name":"fresh","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
		func(c *pipeline.Config, table string) *state.Views {
			cfg, views = c, state.NewViews(db, table, c.Aggregates, state.WithClock(clock))
			return views
		}, aggregate.WithClock(clock), aggregate.WithBacklog(unread))
	// The aggregate function: a process of its own, as in Lambda, which
	// reads the watermark the ticker stored.
	quarantine := fmt.Sprintf("quarantine-%d", tableSeq.Add(1))
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	p := aggregate.New(cfg, views, out, "results", aggregate.WithLogger(quiet), aggregate.WithClock(clock),
		aggregate.WithSetAside(setaside.New(db, quarantine, setaside.WithFunction("aggregate"))))
	poison := kinesisEvent([]record{{shard: feedShard, seq: 1, env: stream.Envelope{ID: "1", Type: "v", Key: "a", OccurredAt: base, SentAt: base, ReceivedAt: base}}})
	poison.Records[0].Kinesis.Data = []byte("not an envelope")
	if resp, err := p.HandleBatch(ctx, poison); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("the record no pipeline can read was not set aside: %v %v", resp, err)
	}
	if sh, err := views.Shards(ctx, "fresh", now); err != nil || sh.Positions[feedShard] != "1" {
		t.Fatalf("position %v (%v) after the set-aside record, want 1", sh.Positions, err)
	}
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		now = base.Add(at)
		_, _ = ticker.Tick(ctx, now) // fails from the second on: the stream cannot be read
	}
	// The record that waited, from the first second, is on time, also
	// for an instance that starts now and reads the stored watermark.
	p = aggregate.New(cfg, views, out, "results", aggregate.WithLogger(quiet), aggregate.WithClock(clock),
		aggregate.WithSetAside(setaside.New(db, quarantine, setaside.WithFunction("aggregate"))))
	f := &feed{t: t, p: p, base: base, seq: 1}
	f.batch(at{"a", 1, 1})
	unread.err = nil
	for _, at := range []time.Duration{4 * time.Minute, 5 * time.Minute} {
		now = base.Add(at)
		if _, err := ticker.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 1 sum 1"; got != want {
		t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
	}
}

// unreadable is a Backlog whose reads fail with err (nil: nothing unread).
type unreadable struct{ err error }

func (u *unreadable) FirstAfter(context.Context, string, string) (backlog.Next, error) {
	return backlog.Next{}, u.err
}

// After a reshard a key's records go to a child shard, which Lambda reads
// only once the parent is done. The parent, closed and read to its end,
// had nothing left, so the ticker advanced it by the clock and closed its
// windows while a child still catching up (a consumer behind when the
// stream was resharded, as it is when a team reshards for more capacity)
// held records of them: late when applied. The parent's advance now waits
// for its children's records too.
func TestTickerWaitsForTheChildrenOfAClosedShard(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { return now }
	const parent, child = "shardId-000000000000", "shardId-000000000002"
	shards := &resharded{next: map[string]backlog.Next{
		parent: {Children: []string{"shardId-000000000001", child}},
		child:  {Found: true, Arrived: base.Add(2 * time.Second)},
	}}
	p, out := pipelineOn(t, `{"name":"reshard","key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
		viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(shards))
	deliver := func(shard string, seq int, seconds int) {
		t.Helper()
		when := base.Add(time.Duration(seconds) * time.Second)
		ev := kinesisEvent([]record{{shard: shard, seq: seq, env: envelopeAt(seq, "a", when, 1)}})
		if resp, err := p.HandleBatch(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch on %s: %v %v", shard, resp, err)
		}
	}
	deliver(parent, 1, 1)
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		now = base.Add(at)
		if _, err := p.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
		if got := out.of("a", base); len(got) > 0 {
			t.Fatalf("tick at %v, the child's record not processed: the window closed without it\n%s", at, strings.Join(got, "\n"))
		}
	}
	deliver(child, 2, 2)
	shards.next[child] = backlog.Next{}
	for _, at := range []time.Duration{4 * time.Minute, 5 * time.Minute} {
		now = base.Add(at)
		if _, err := p.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 2 sum 2"; got != want {
		t.Errorf("results of key a:\n%s\nwant:\n%s", got, want)
	}
}

// resharded is a Backlog that answers per shard (Kinesis' ChildShards,
// which moto does not return, for a closed one).
type resharded struct{ next map[string]backlog.Next }

func (r *resharded) FirstAfter(_ context.Context, shard, _ string) (backlog.Next, error) {
	return r.next[shard], nil
}

func envelopeAt(id int, key string, when time.Time, v int) stream.Envelope {
	return stream.Envelope{ID: fmt.Sprint(id), Type: "v", Key: key, OccurredAt: when, SentAt: when, ReceivedAt: when,
		Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))}
}

// TestTickerAdvancesAShardWhileOtherTypesFlow: a pipeline reads one event
// type; records of others keep arriving on its shard, and each batch of
// them commits the function's position with its copy of the watermark.
// That copy had no idle clock, and storing it erased the ticker's, so the
// ticker started the clock again at every tick and the shard never
// advanced as idle while the other traffic lasted: the pipeline's windows
// stayed open. A batch that moves no event time stores its position alone.
func TestTickerAdvancesAShardWhileOtherTypesFlow(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("othertypes-%d", tableSeq.Add(1))
	keyedtest.CreateStream(t, kin, name, 1)
	base := time.Now().UTC().Truncate(time.Minute)
	now := base
	clock := func() time.Time { return now }
	p, out := pipelineOn(t, `{"name":"othertypes","eventTypes":["v"],"key":"key","value":"data.v","windows":[{"kind":"tumbling","size":"1m"}],
	  "aggregates":["count","sum"],"outOfOrderness":"5s","idleTimeout":"30s","latePolicy":"drop"}`,
		viewsAt(clock), aggregate.WithClock(clock), aggregate.WithBacklog(backlog.New(kin, name)))
	deliver := func(e stream.Envelope) {
		t.Helper()
		r := keyedtest.PutEnvelope(t, kin, name, e)
		if resp, err := p.HandleBatch(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{r}}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %v %v", resp, err)
		}
	}
	deliver(envelopeAt(1, "a", time.Now(), 1))
	for i, at := range []time.Duration{60 * time.Second, 80 * time.Second, 100 * time.Second, 120 * time.Second, 140 * time.Second} {
		now = base.Add(at)
		if _, err := p.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
		other := envelopeAt(100+i, "b", time.Now(), 1)
		other.Type = "other" // not the pipeline's: it moves no event time
		deliver(other)
	}
	// The clock started at the tick at 60 s; 30 s later the shard is idle,
	// and the tick at 140 s takes the watermark to 105 s, past the minute.
	if got, want := strings.Join(out.of("a", base), "\n"), "final [0s,1m0s) r1 count 1 sum 1"; got != want {
		t.Errorf("results of key a while other types flowed:\n%s\nwant:\n%s", got, want)
	}
}
