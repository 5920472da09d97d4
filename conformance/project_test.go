package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

const (
	shard          = "shardId-000000000000"
	viewsTable     = "views"
	quarantine     = "quarantine"
	resultsStream  = "window-results"
	eventSourceArn = "arn:aws:kinesis:us-east-1:123456789012:stream/events"
)

// pipelineConfig is the pipeline of a history: its one window, count, sum,
// min and max of data.v per key, and its late policy.
func pipelineConfig(t *testing.T, h *history) *pipeline.Config {
	t.Helper()
	late := `"latePolicy":"drop"`
	if h.policy == "correct" {
		late = fmt.Sprintf(`"latePolicy":"correct","allowedLateness":%q`, allowedLateness.String())
	}
	doc := fmt.Sprintf(`{"name":"conformance","key":"key","value":"data.v","windows":[%s],
	  "aggregates":["count","sum","min","max"],"outOfOrderness":%q,"idleTimeout":%q,%s,
	  "partitionKeyIsGroupingKey":true}`, h.kind.json, outOfOrderness.String(), idleTimeout.String(), late)
	cfg, err := pipeline.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("pipeline: %v\n%s", err, doc)
	}
	if err := aggregate.CheckSupported(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// deployment is the aggregate function and the ticker function as
// aggregate.FromEnv builds them (the views table routed as the stack routes
// it, the dedupe ledger, the set-aside sink, metrics), each its own
// processor as each is its own Lambda function, over one in-process
// DynamoDB and an in-process output stream.
type deployment struct {
	handler, ticker *aggregate.Processor
	out             *outputStream
	emf             bytes.Buffer // the handler's EMF metrics of the current invocation
	// coldStart replaces the handler with a new process of the aggregate
	// function, as Lambda's next execution environment.
	coldStart func()
	// views is the ticker's, to read the shard's stored watermark.
	views *state.Views
}

func deploy(cfg *pipeline.Config) *deployment {
	ctx := context.Background()
	db := memdb.New(map[string]memdb.Schema{viewsTable: memdb.ViewsTable, quarantine: memdb.QuarantineTable})
	table := aggregate.FixedViewsTable(viewsTable)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	d := &deployment{out: &outputStream{ids: map[string][]byte{}}}
	function := func(name string, m *metrics.Logger) (*aggregate.Processor, *state.Views) {
		views := state.NewViews(aggregate.RoutedStore(db, table), table.Current(ctx), cfg.Aggregates, state.WithRetention(cfg.Retention))
		sink := setaside.New(db, quarantine, setaside.WithFunction(name), setaside.WithMetrics(m), setaside.WithLogger(log))
		opts := []aggregate.Option{
			aggregate.WithMetrics(m),
			aggregate.WithLogger(log),
			aggregate.WithDedupe(aggregate.NewLedger(aggregate.RoutedLedgerStore(db, table), table.Current(ctx), cfg)),
			aggregate.WithSetAside(sink),
			// The shard's parents known (none), as deployed: carried
			// flushes write result pages.
			aggregate.WithShardLister(oneShard{}, "events"),
		}
		if foldEvery {
			opts = append(opts, aggregate.WithSessionFoldBytes(0))
		}
		if carriedBudget > 0 {
			opts = append(opts, aggregate.WithCarriedBudget(carriedBudget))
		}
		return aggregate.New(cfg, views, d.out, resultsStream, opts...), views
	}
	d.coldStart = func() { d.handler, _ = function("aggregate", metrics.New(&d.emf, "aggregate")) }
	d.coldStart()
	d.ticker, d.views = function("ticker", metrics.New(io.Discard, "ticker"))
	return d
}

// outputStream is the output stream as a consumer reads it: each result
// once by its id (emission is at least once), in the order first put. A
// second emission of an id with other bytes is a conflict.
type outputStream struct {
	mu        sync.Mutex
	seq       int
	ids       map[string][]byte
	results   []aggregate.Output
	conflicts []string
}

var _ aggregate.RecordPutter = (*outputStream)(nil)

func (s *outputStream) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &kinesis.PutRecordsOutput{Records: make([]ktypes.PutRecordsResultEntry, len(in.Records))}
	for i, e := range in.Records {
		var o aggregate.Output
		if err := json.Unmarshal(e.Data, &o); err != nil {
			return nil, fmt.Errorf("output record %d is not an aggregate.Output: %w", i, err)
		}
		if prev, ok := s.ids[o.ID]; ok {
			if !bytes.Equal(prev, e.Data) {
				s.conflicts = append(s.conflicts, fmt.Sprintf("%s emitted as %s and as %s", o.ID, prev, e.Data))
			}
		} else {
			s.ids[o.ID] = bytes.Clone(e.Data)
			s.results = append(s.results, o)
		}
		s.seq++
		seq, sh := fmt.Sprintf("49%054d", s.seq), shard
		out.Records[i] = ktypes.PutRecordsResultEntry{SequenceNumber: &seq, ShardId: &sh}
	}
	zero := int32(0)
	out.FailedRecordCount = &zero
	return out, nil
}

// projectResult is what this project did with a history: the output
// stream's results, the final views, and LateDropped against the records
// it counts over.
type projectResult struct {
	outputs []aggregate.Output
	// views are the final windows the views table answers with, per key.
	views []state.View
	// lateDropped is the LateDropped metric summed over every invocation.
	lateDropped int
	conflicts   []string
	// noViews: the engine keeps no views (a handler of package handler
	// puts its results on the output stream only).
	noViews bool
}

// The write paths a history is played on: plain Kinesis batches, and
// batches of a mapping with TumblingWindowInSeconds (the stack's default),
// whose invocations carry their partials in Lambda's window state to the
// interval's final invocation.
const (
	perBatch    = "per-batch"
	perInterval = "per-interval"
)

// runProject plays h against the aggregate function: each invocation's
// records as the raw Lambda event bytes, through Processor.Invoke (what
// lambda.Start calls), by one warm process or (h.cold) each by a new one,
// the ticker's Tick where h says (at a processing time equal to the newest
// event time, so the tick finalizes what is due without moving the
// watermark; or at h.idleTicks' times, noting in h.advances where they
// moved it), then ticks an hour after the last record until every window
// is final; then reads every key's windows from the views.
//
// On the per-interval path h's invocations are cut into intervals of one to
// three (by the seed) or more, each then flushed by a final invocation with
// the state the last returned (one in five sent twice, its response lost). A batch h sends again is sent in the same
// interval: twice, with the state the first delivery was sent with (its
// response lost); from a few records back, with the state the last
// invocation returned (whose records it skips).
func runProject(t *testing.T, h *history, path string) projectResult {
	t.Helper()
	ctx := context.Background()
	cfg := pipelineConfig(t, h)
	d := deploy(cfg)
	var res projectResult
	var newest int64
	rng := rand.New(rand.NewPCG(h.seed, 0x1e7))
	// clock is the latest processing time of h.idleTicks so far;
	// streamTime is Kafka's stream time, its records' and h.advances'.
	var clock, streamTime int64
	var state, sentState map[string]string // the interval's state; the one the last invocation was sent with
	inInterval := 0                        // invocations of the open interval
	invoke := func(payload []byte) ([]byte, error) {
		if h.cold {
			d.coldStart()
		}
		return d.handler.Invoke(ctx, payload)
	}
	flush := func(n int) {
		// One final invocation in five is sent again (its response lost).
		for range 1 + min(1, rng.IntN(5)/4) {
			d.emf.Reset()
			raw, err := invoke(windowEvent(h, 0, -1, state, true, newest))
			if err != nil {
				t.Fatalf("the final invocation of the interval ending with invocation %d: %v", n, err)
			}
			var resp events.KinesisTimeWindowEventResponse
			if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) > 0 || len(resp.State) > 0 {
				t.Fatalf("the final invocation of the interval ending with invocation %d answered %s (%v): want no failure, no state", n, raw, err)
			}
			res.lateDropped += int(emfSum(t, &d.emf, "LateDropped"))
		}
		state, inInterval = nil, 0
	}
	for n, inv := range h.invocations {
		d.emf.Reset()
		var raw []byte
		var err error
		if path == perInterval {
			again := n > 0 && inInterval > 0 && inv == (invocation{first: h.invocations[n-1].first, last: h.invocations[n-1].last})
			if !again {
				sentState = state
			}
			raw, err = invoke(windowEvent(h, inv.first, inv.last, sentState, false, newest))
		} else {
			raw, err = invoke(kinesisEvent(h, inv.first, inv.last))
		}
		if err != nil {
			t.Fatalf("invocation %d (arrivals %d..%d): %v", n, inv.first, inv.last, err)
		}
		var resp events.KinesisTimeWindowEventResponse // a plain batch's answer has no state
		if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("invocation %d (arrivals %d..%d) answered %s (%v): no write fails here", n, inv.first, inv.last, raw, err)
		}
		for i := inv.first; i <= inv.last; i++ {
			newest = max(newest, h.events[h.arrivals[i].event].t)
		}
		res.lateDropped += int(emfSum(t, &d.emf, "LateDropped"))
		if path == perInterval {
			state = resp.State
			inInterval++
			// A batch Lambda sends again (twice, or from a few records
			// back) is sent in this interval: once its final invocation
			// succeeds, Lambda never sends the interval's records again.
			again := n+1 < len(h.invocations) && h.invocations[n+1].first <= inv.last
			last := n == len(h.invocations)-1
			if h.flushAfter != nil {
				if h.flushAfter[n] || last {
					flush(n)
				}
			} else if !again && (last || inInterval >= 3 || rng.IntN(2) == 0) {
				flush(n)
			}
		}
		switch {
		case h.idleTicks != nil:
			for _, at := range h.idleTicks[n] {
				if _, err := d.ticker.Tick(ctx, time.UnixMilli(at)); err != nil {
					t.Fatalf("tick at %s after invocation %d: %v", time.UnixMilli(at).UTC().Format(time.TimeOnly), n, err)
				}
				clock = max(clock, at)
			}
			if len(h.idleTicks[n]) > 0 {
				streamTime = max(streamTime, newest)
				if moved := idleAdvance(t, d, cfg.Name); moved > streamTime {
					if h.advances == nil {
						h.advances = map[int]int64{}
					}
					h.advances[n], streamTime = moved, moved
				}
			}
		case inv.tick:
			if _, err := d.ticker.Tick(ctx, time.UnixMilli(newest)); err != nil {
				t.Fatalf("tick after invocation %d: %v", n, err)
			}
		}
	}
	// The first tick starts the idle clock; the next, idleTimeout later,
	// moves the watermark an hour past every record.
	for i := range 3 {
		if _, err := d.ticker.Tick(ctx, time.UnixMilli(max(newest, clock)).Add(time.Hour+time.Duration(i)*idleTimeout)); err != nil {
			t.Fatalf("final tick %d: %v", i, err)
		}
	}
	for k := range keysPerHistory {
		key := string(rune('a' + k))
		views, err := d.handler.Windows(ctx, key, cfg.Windows[0].ID(), base.Add(-time.Hour), base.Add(3*time.Hour))
		if err != nil {
			t.Fatalf("views of key %s: %v", key, err)
		}
		res.views = append(res.views, views...)
	}
	res.outputs, res.conflicts = d.out.results, d.out.conflicts
	return res
}

// idleAdvance is where the ticks left the shard's stored watermark of
// pipeline name, as Kafka's stream time: the watermark + outOfOrderness
// (0 when none is stored).
func idleAdvance(t *testing.T, d *deployment, name string) int64 {
	t.Helper()
	wm, err := d.views.Watermark(context.Background(), name, shard)
	if err != nil {
		t.Fatalf("the shard's watermark: %v", err)
	}
	if wm == nil || wm.Current().IsZero() {
		return 0
	}
	return wm.Current().Add(outOfOrderness).UnixMilli()
}

// kinesisEvent is the event Lambda hands the function for arrivals first
// to last of h's shard, as the bytes the runtime receives.
func kinesisEvent(h *history, first, last int) []byte {
	var ev events.KinesisEvent
	for i := first; i <= last; i++ {
		e := h.events[h.arrivals[i].event]
		at := time.UnixMilli(e.t).UTC()
		data, _ := json.Marshal(stream.Envelope{ID: e.id, Type: "reading", Key: e.key,
			OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, e.v))})
		seq := fmt.Sprintf("49%054d", i+1)
		ev.Records = append(ev.Records, events.KinesisEventRecord{
			AwsRegion: "us-east-1", EventID: shard + ":" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: eventSourceArn, EventVersion: "1.0",
			InvokeIdentityArn: "arn:aws:iam::123456789012:role/aggregate",
			Kinesis: events.KinesisRecord{KinesisSchemaVersion: "1.0", PartitionKey: e.key, SequenceNumber: seq,
				Data: data, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}},
		})
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// windowEvent is the event of a mapping with TumblingWindowInSeconds for
// arrivals first to last (none when last < first) with the interval's
// state, as the bytes the runtime receives; final marks the interval's
// final invocation. The interval is the minute of now (Unix ms).
func windowEvent(h *history, first, last int, st map[string]string, final bool, now int64) []byte {
	var plain events.KinesisEvent
	if last >= first {
		if err := json.Unmarshal(kinesisEvent(h, first, last), &plain); err != nil {
			panic(err)
		}
	}
	if st == nil {
		st = map[string]string{}
	}
	start := time.UnixMilli(now).UTC().Truncate(time.Minute)
	ev := events.KinesisTimeWindowEvent{KinesisEvent: plain, TimeWindowProperties: events.TimeWindowProperties{
		Window: events.Window{Start: events.RFC3339EpochTime{Time: start}, End: events.RFC3339EpochTime{Time: start.Add(time.Minute)}}, State: st, ShardID: shard,
		EventSourceARN: eventSourceArn, IsFinalInvokeForWindow: final,
	}}
	if ev.Records == nil {
		ev.Records = []events.KinesisEventRecord{}
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// emfSum sums metric name over the EMF lines in buf.
func emfSum(t *testing.T, buf *bytes.Buffer, name string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("EMF line is not JSON: %q: %v", sc.Text(), err)
		}
		if v, ok := doc[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

// oneShard is ListShards of the one shard a history is on.
type oneShard struct{}

func (oneShard) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	id := shard
	return &kinesis.ListShardsOutput{Shards: []ktypes.Shard{{ShardId: &id}}}, nil
}
