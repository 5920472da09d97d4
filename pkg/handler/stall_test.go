package handler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/backlog"
	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A handler that fails, is throttled or is being redeployed for longer
// than its idle timeout stops moving its shard's watermark although
// records wait on the stream. Its tick took the shard for idle and closed
// the windows those records belong to by the clock: when the function
// came back they were late, dropped (or corrections of results that had
// left them out). The tick now reads the stream after the last record the
// handler committed and advances no further than the first waiting
// record's arrival allows. A shard with nothing left, even when its last
// batch moved no watermark (another type's record), still closes.
func TestTickWaitsForRecordsAStalledHandlerHasNotProcessed(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	input, start := stalledStream(t, &cfg)
	now := start
	h := idleClockHandler(t, cfg, &now)
	at := func(id string, sec int, data string) stream.Envelope { return requestAt(start, id, sec, data) }
	first := keyedtest.PutEnvelope(t, kin, input, at("r1", 10, `{"ms":10}`))
	second := keyedtest.PutEnvelope(t, kin, input, at("r2", 20, `{"ms":20}`))
	click := at("c1", 25, `{}`)
	click.Type = "click" // not the handler's: it moves no watermark
	other := keyedtest.PutEnvelope(t, kin, input, click)
	tick := func(after time.Duration) {
		t.Helper()
		now = start.Add(after)
		if _, err := h.Tick(ctx, now); err != nil {
			t.Fatalf("tick at +%v: %v", after, err)
		}
	}

	mustBatch(t, h, []events.KinesisEventRecord{first})
	// The handler is stuck on the second record for minutes.
	for _, after := range []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute} {
		tick(after)
		if byID, _ := results(t, cfg.OutputStream); len(byID) > 0 {
			t.Fatalf("tick at +%v with a record not processed: the window closed without it: %v", after, describe(byID))
		}
	}
	mustBatch(t, h, []events.KinesisEventRecord{second})
	mustBatch(t, h, []events.KinesisEventRecord{other})
	tick(5 * time.Minute)
	tick(6 * time.Minute)
	byID, n := results(t, cfg.OutputStream)
	got := strings.Join(describe(byID), "\n")
	if want := `/a ` + start.Format("15:04:05") + ` 2 {"N":2,"Sum":30,"Max":20,"Distinct":2}`; got != want || n != 1 {
		t.Errorf("results (%d records):\n%s\nwant, once:\n%s", n, got, want)
	}
}

// A stream the tick cannot read (throttled, a permission missing) does not
// make a shard idle: its watermark stays, the tick fails naming the shard
// and the cause (the tick's alarm), and the window closes once it can read.
func TestTickThatCannotReadTheStreamDoesNotAdvance(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	unread := &unreadable{err: errors.New("ProvisionedThroughputExceededException: rate exceeded")}
	cfg.Backlog = unread
	now := base
	h := idleClockHandler(t, cfg, &now)
	mustBatch(t, h, kinesisRecords([]rec{{1, request("r1", "/a", 10, `{"ms":10}`)}}))
	for _, after := range []time.Duration{2 * time.Minute, 3 * time.Minute} {
		now = base.Add(after)
		_, err := h.Tick(ctx, now)
		if after == 2*time.Minute {
			continue // the first tick starts the idle clock
		}
		if err == nil || !strings.Contains(err.Error(), "shardId-000000000000") || !strings.Contains(err.Error(), "rate exceeded") {
			t.Fatalf("tick at +%v: error %v; want one naming the shard and the cause", after, err)
		}
	}
	if byID, _ := results(t, cfg.OutputStream); len(byID) > 0 {
		t.Fatalf("the window closed although the stream could not be read: %v", describe(byID))
	}
	unread.err = nil
	now = base.Add(4 * time.Minute)
	if _, err := h.Tick(ctx, now); err != nil {
		t.Fatal(err)
	}
	if byID, _ := results(t, cfg.OutputStream); len(byID) != 1 {
		t.Errorf("results once the stream reads: %v; want the window's", describe(byID))
	}
}

// unreadable is a backlog.Reader whose reads fail with err (nil: nothing
// waits).
type unreadable struct{ err error }

func (u *unreadable) FirstAfter(context.Context, string, string) (backlog.Next, error) {
	return backlog.Next{}, u.err
}

// The samples `make invoke` sends a running local stack come from no
// stream (shard state.SampleShard): the tick has nothing to read for
// them, so their shard closes by the clock even when the stream cannot be
// read, rather than failing every tick.
func TestTickClosesTheSampleShardWithoutReadingTheStream(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	cfg.Backlog = &unreadable{err: errors.New("ResourceNotFoundException: no such shard")}
	now := base
	h := idleClockHandler(t, cfg, &now)
	sample := kinesisRecords([]rec{{1, request("r1", "/a", 10, `{"ms":10}`)}})
	sample[0].EventID = state.SampleShard + ":1"
	mustBatch(t, h, sample)
	for _, after := range []time.Duration{2 * time.Minute, 3 * time.Minute} {
		now = base.Add(after)
		if _, err := h.Tick(ctx, now); err != nil {
			t.Fatalf("tick at +%v: %v", after, err)
		}
	}
	if byID, _ := results(t, cfg.OutputStream); len(byID) != 1 {
		t.Errorf("results of the sample's window: %v; want it closed by the clock", describe(byID))
	}
}

// TestTickAdvancesWhileOtherTypesFlow: records of types the handler skips
// keep arriving on the shard after its last own record. Each batch of them
// stored the handler's copy of the watermark with its position, and that
// copy had no idle clock: the tick's was erased, started again at every
// tick, and the shard never advanced as idle while the other traffic
// lasted (a join's unmatched searches waited for it to stop). Such a batch
// stores its position alone.
func TestTickAdvancesWhileOtherTypesFlow(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	input, start := stalledStream(t, &cfg)
	now := start
	h := idleClockHandler(t, cfg, &now)
	at := func(id string, sec int) stream.Envelope { return requestAt(start, id, sec, `{"ms":10}`) }
	mustBatch(t, h, []events.KinesisEventRecord{keyedtest.PutEnvelope(t, kin, input, at("r1", 10))})
	for i, after := range []time.Duration{60 * time.Second, 80 * time.Second, 100 * time.Second, 120 * time.Second, 140 * time.Second} {
		now = start.Add(after)
		if _, err := h.Tick(ctx, now); err != nil {
			t.Fatalf("tick at +%v: %v", after, err)
		}
		click := at(fmt.Sprintf("c%d", i), 10)
		click.Type = "click" // not the handler's: it moves no watermark
		mustBatch(t, h, []events.KinesisEventRecord{keyedtest.PutEnvelope(t, kin, input, click)})
	}
	// The clock started at +60 s; from +90 s the shard is idle, and the
	// tick at +140 s takes the watermark to +105 s, past the minute.
	byID, n := results(t, cfg.OutputStream)
	if got, want := strings.Join(describe(byID), "\n"), `/a `+start.Format("15:04:05")+` 1 {"N":1,"Sum":10,"Max":10,"Distinct":1}`; got != want || n != 1 {
		t.Errorf("results while other types flowed (%d records):\n%s\nwant, once:\n%s", n, got, want)
	}
}

// idleClockHandler is the stall tests' handler: one-minute windows, 5 s
// out of order, idle after 30 s, on the clock *now.
func idleClockHandler(t *testing.T, cfg handler.Config, now *time.Time) *handler.Handler {
	t.Helper()
	h, err := handler.NewWindowed[Tally](cfg, selectLatency, handler.WithWindow(time.Minute), handler.WithOutOfOrderness(5*time.Second),
		handler.WithIdleTimeout(30*time.Second), handler.WithClock(func() time.Time { return *now }), handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// stalledStream gives cfg an input stream of one shard as its backlog and
// returns it with the start of the minute 20 s ago: records put on it
// arrive now (the stream stamps them), their event times (at most 25 s
// after that start, in requestAt) early in that minute's window and no
// more than stream.MaxReceivedLead after their arrival, whenever in the
// minute the test runs. The idle hold of a record put now (its arrival −
// idleTimeout − outOfOrderness, 35 s) is then still inside the window.
func stalledStream(t *testing.T, cfg *handler.Config) (string, time.Time) {
	t.Helper()
	input := name("events")
	keyedtest.CreateStream(t, kin, input, 1)
	cfg.Backlog = backlog.New(kin, input)
	return input, time.Now().UTC().Add(-20 * time.Second).Truncate(time.Minute)
}

// requestAt is a request to /a with data, sec seconds after start.
func requestAt(start time.Time, id string, sec int, data string) stream.Envelope {
	e := request(id, "/a", 0, data)
	e.OccurredAt = start.Add(time.Duration(sec) * time.Second)
	e.SentAt, e.ReceivedAt = e.OccurredAt, e.OccurredAt
	return e
}
