package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/bench/internal/deployed"
	"github.com/tributary-dev/tributary/bench/internal/sdkcost"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/stream/streamtest"
)

// Paths, as the BENCH lines name them.
const (
	pathBatch    = "per-batch"
	pathInterval = "per-interval"
)

// stack is the deployed shape of the pageviews pipeline, as infra/tributary
// declares it (NewEventsStream, Pipelines.newPipeline, stack.go).
type stack struct {
	shards         int           // the events stream's shards (NewEventsStream: 2)
	batchSize      int           // the aggregate mapping's BatchSize (500)
	batchingWindow time.Duration // its MaximumBatchingWindowInSeconds (5 s)
	tickRate       time.Duration // the ticker's schedule (TickerRate: 1 minute)
	memoryMB       int           // the aggregate function's memory (aggregateMemoryMB: 1,024); the ticker's few invocations are priced at it too
	concurrency    int           // the handler's concurrent DynamoDB requests (aggregate.DefaultConcurrency)
	// flush is the aggregate mapping's TumblingWindowInSeconds, the
	// per-interval path's flush interval (infra/cdk.json's
	// tributary:flushIntervalSeconds: 120 s).
	flush time.Duration
}

var deployedStack = stack{shards: 2, batchSize: 500, batchingWindow: 5 * time.Second, tickRate: time.Minute, memoryMB: 1024, concurrency: aggregate.DefaultConcurrency, flush: 2 * time.Minute}

// vcpu is the share of a vCPU Lambda gives a function of the stack's memory.
func (s stack) vcpu() float64 { return min(1, float64(s.memoryMB)/lambdaMBPerVCPU) }

// load is one measured load.
type load struct {
	rate  int           // events a second
	keys  int           // distinct keys, each event's drawn uniformly
	path  string        // pathBatch or pathInterval
	flush time.Duration // the mapping's TumblingWindowInSeconds on the per-interval path
	span  time.Duration // event time generated
	tail  time.Duration // ticks after the last event, so every window it opened closes
	// waitPerRequest is the time an invocation waits for the store per
	// request it makes (from keepup: the store's latency over the
	// handler's concurrency); billed duration adds it to the CPU time.
	waitPerRequest time.Duration
	// sdk is the AWS SDK's CPU per request (sdkcost), added to each
	// invocation's; nil adds none (the calibration run).
	sdk sdkcost.CPU
}

// tally is what a run of a load consumed.
type tally struct {
	events      int
	aggInvokes  int
	tickInvokes int
	aggCPU      time.Duration
	tickCPU     time.Duration
	billedMs    int64 // every invocation's billed duration, summed
	db          usage
	logBytes    int64 // log events' bytes as CloudWatch bills them (each line plus its overhead), platform lines included
	// Of logBytes: the window-result lines (and how many), the EMF metric
	// documents and Lambda's platform lines, each with its overhead.
	resultLines, resultLogBytes, emfBytes, platformBytes int64
	metrics                                              map[string]bool
	storedBytes                                          int
	resultsUnits                                         int // PUT payload units on the WindowResults stream
	simulated                                            time.Duration
	// retention is how long the pipeline keeps window items (its
	// retention field): what the stored bytes are priced for.
	retention time.Duration
	// earlyFinals counts the windows Lambda ended early: the state an
	// invocation answered with was past lambdaMaxWindowState.
	earlyFinals int
	// memdbRequests is memdb's own count of the requests it answered.
	memdbRequests map[string]int
	// samples are requests the run made, for sdkcost.Measure.
	samples map[string][]sdkcost.Sample
	// sdkCPU is the SDK's CPU added to aggCPU and tickCPU.
	sdkCPU time.Duration
	// demand is what each invocation asked of the views table, in the
	// order made: for provisioned capacity, which serves it at a rate.
	demand []demand
	// began is the run's first event time.
	began time.Time
}

// demand is one invocation's table write and read units (its index's
// apart), at the time it ran.
type demand struct {
	at          time.Time
	wu, indexWU int
	ru          float64
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lambdaPlatformLine is the bytes of the START, END and REPORT lines
// Lambda writes for every invocation in text format (request id 36 bytes;
// REPORT with durations and memory, about 130 bytes), and how many log
// events they are.
const (
	lambdaPlatformBytes  = 71 + 52 + 131
	lambdaPlatformEvents = 3
)

// logSink counts the bytes and lines a function writes to its log, and
// keeps the EMF documents for their metric names.
type logSink struct {
	bytes, lines int64
	// results and resultBytes are the window-result lines among them
	// (aggregate.ResultLogMessage) and their bytes.
	results, resultBytes int64
	emf                  bool
	buf                  bytes.Buffer
}

// resultMsg marks a window-result line in the JSON log.
var resultMsg = []byte(`"msg":"` + aggregate.ResultLogMessage + `"`)

func (l *logSink) Write(p []byte) (int, error) {
	l.bytes += int64(len(p))
	l.lines += int64(bytes.Count(p, []byte{'\n'}))
	for line := range bytes.Lines(p) {
		if bytes.Contains(line, resultMsg) {
			l.results++
			l.resultBytes += int64(len(line))
		}
	}
	if l.emf {
		l.buf.Write(p)
	}
	return len(p), nil
}

// metricNames adds to seen every metric and dimension set of the EMF
// documents written since the last call: CloudWatch bills each distinct
// metric name, namespace and dimension values as one custom metric.
func (l *logSink) metricNames(seen map[string]bool) error {
	for _, line := range bytes.Split(l.buf.Bytes(), []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			return fmt.Errorf("an EMF line %.200q: %w", line, err)
		}
		var aws struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		}
		raw, _ := json.Marshal(doc["_aws"])
		if err := json.Unmarshal(raw, &aws); err != nil {
			return err
		}
		for _, d := range aws.CloudWatchMetrics {
			for _, set := range d.Dimensions {
				dims := ""
				for _, name := range set {
					dims += fmt.Sprintf("%s=%v,", name, doc[name])
				}
				for _, m := range d.Metrics {
					seen[d.Namespace+"|"+m.Name+"|"+dims] = true
				}
			}
		}
	}
	l.buf.Reset()
	return nil
}

// event is one generated page view.
type event struct {
	i     int
	key   string
	at    time.Time // occurredAt
	shard int
}

func (e *event) arrival() time.Time { return e.at.Add(157 * time.Millisecond) }

func (e *event) envelope() []byte {
	sent := e.at.Add(40 * time.Millisecond)
	env := stream.Envelope{ID: "evt-" + strconv.Itoa(e.i), Type: "page_view", Key: e.key, OccurredAt: e.at, SentAt: sent,
		ReceivedAt: sent.Add(112 * time.Millisecond),
		Data:       json.RawMessage(`{"path":"/p/` + strconv.Itoa(e.i%97) + `","ms":` + strconv.Itoa(100+(e.i*7919)%2900) + `}`)}
	b, _ := json.Marshal(&env)
	return b
}

// shardOf is the shard of n, evenly split over the hash key space as
// Kinesis splits a new stream's, that MD5 of partitionKey falls in.
func shardOf(partitionKey string, n int) int {
	sum := md5.Sum([]byte(partitionKey))
	hi, _ := bits.Mul64(binary.BigEndian.Uint64(sum[:8]), uint64(n))
	return int(hi)
}

func shardID(n int) string { return fmt.Sprintf("shardId-%012d", n) }

// generate returns rate events a second for span from start, each with a
// key drawn uniformly from keys, and its shard. The same arguments give
// the same events.
func generate(rate, keys int, span time.Duration, start time.Time, shards int) []event {
	rng := rand.New(rand.NewPCG(uint64(rate), uint64(keys)))
	n := int(int64(rate) * int64(span) / int64(time.Second))
	names := make([]string, keys)
	shardOfKey := make([]int, keys)
	for k := range names {
		names[k] = fmt.Sprintf("user-%05d", k)
		shardOfKey[k] = shardOf(names[k], shards)
	}
	evs := make([]event, n)
	step := time.Second / time.Duration(rate)
	for i := range evs {
		k := rng.IntN(keys)
		jitter := time.Duration(rng.Int64N(int64(step)))
		evs[i] = event{i: i, key: names[k], at: start.Add(time.Duration(i)*step + jitter), shard: shardOfKey[k]}
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].at.Before(evs[b].at) })
	return evs
}

// invocation is one call of a function at a simulated time.
type invocation struct {
	at     time.Time
	tick   bool
	shard  int
	events []event
	// The per-interval path: the mapping's window, and whether this is its
	// final invocation (no records, the state to flush), made early because
	// the state outgrew what Lambda carries (terminatedEarly).
	window          *[2]time.Time
	final           bool
	terminatedEarly bool
	windowIndex     int
}

// endsEarly is the final invocation Lambda makes after inv when the state
// inv answered with is past limits.LambdaWindowStateBytes (as
// emulator/eventsource plays it), else nil.
func (inv *invocation) endsEarly(state map[string]string) *invocation {
	if inv.window == nil || inv.final || limits.WindowStateSize(state) <= limits.LambdaWindowStateBytes {
		return nil
	}
	return &invocation{at: inv.at, shard: inv.shard, window: inv.window, final: true, terminatedEarly: true, windowIndex: inv.windowIndex}
}

// cut splits each shard's events into the invocations the deployed mapping
// makes: a batch closes when it holds batchSize records or batchingWindow
// after its first record arrived (and, with flush, at the end of the
// mapping's tumbling window, whose final invocation follows); the ticker
// runs every tickRate from start until until.
func cut(evs []event, st stack, flush time.Duration, start, until time.Time) []invocation {
	var out []invocation
	byShard := make([][]event, st.shards)
	for _, e := range evs {
		byShard[e.shard] = append(byShard[e.shard], e)
	}
	for shard, es := range byShard {
		var cur []event
		var closeAt time.Time
		var win [2]time.Time
		wi := 0
		emit := func(at time.Time) {
			if len(cur) == 0 {
				return
			}
			inv := invocation{at: at, shard: shard, events: cur}
			if flush > 0 {
				w := win
				inv.window, inv.windowIndex = &w, wi
			}
			out = append(out, inv)
			cur = nil
		}
		for _, e := range es {
			a := e.arrival()
			if flush > 0 && (win[1].IsZero() || !a.Before(win[1])) {
				if !win[1].IsZero() {
					emit(closeAt)
					w := win
					out = append(out, invocation{at: win[1], shard: shard, window: &w, final: true, windowIndex: wi})
					wi++
				}
				ws := a.Truncate(flush)
				win = [2]time.Time{ws, ws.Add(flush)}
			}
			if len(cur) > 0 && !a.Before(closeAt) {
				emit(closeAt)
			}
			if len(cur) == 0 {
				closeAt = a.Add(st.batchingWindow)
				if flush > 0 && closeAt.After(win[1]) {
					closeAt = win[1]
				}
			}
			cur = append(cur, e)
			if len(cur) == st.batchSize {
				emit(a)
			}
		}
		emit(closeAt)
		if flush > 0 && !win[1].IsZero() {
			w := win
			out = append(out, invocation{at: win[1], shard: shard, window: &w, final: true, windowIndex: wi})
		}
	}
	for t := start.Add(st.tickRate); !t.After(until); t = t.Add(st.tickRate) {
		out = append(out, invocation{at: t, tick: true})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].at.Before(out[b].at) })
	return out
}

// payload is the invocation's event as Lambda hands it to the runtime.
func (inv *invocation) payload(seq []int, st map[string]string) []byte {
	recs := make([]events.KinesisEventRecord, len(inv.events))
	for i := range inv.events {
		e := &inv.events[i]
		s := streamtest.Sequence(seq[inv.shard])
		seq[inv.shard]++
		recs[i] = events.KinesisEventRecord{
			AwsRegion: streamtest.Region, EventID: shardID(inv.shard) + ":" + s, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: streamtest.StreamARN, EventVersion: "1.0", InvokeIdentityArn: streamtest.RoleARN,
			Kinesis: events.KinesisRecord{KinesisSchemaVersion: "1.0", PartitionKey: e.key, SequenceNumber: s, Data: e.envelope(),
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: e.arrival().Truncate(time.Millisecond)}},
		}
	}
	var v any = events.KinesisEvent{Records: recs}
	if inv.window != nil {
		if st == nil {
			st = map[string]string{}
		}
		v = events.KinesisTimeWindowEvent{KinesisEvent: events.KinesisEvent{Records: recs}, TimeWindowProperties: events.TimeWindowProperties{
			Window:                  events.Window{Start: events.RFC3339EpochTime{Time: inv.window[0]}, End: events.RFC3339EpochTime{Time: inv.window[1]}},
			State:                   st,
			ShardID:                 shardID(inv.shard),
			EventSourceARN:          streamtest.StreamARN,
			IsFinalInvokeForWindow:  inv.final,
			IsWindowTerminatedEarly: inv.terminatedEarly,
		}}
	}
	b, _ := json.Marshal(v)
	return b
}

// response is what the aggregate function answers (both paths).
type response struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
	State map[string]string `json:"state"`
}

// runLoad runs l through the deployed aggregate and ticker functions of
// cfg and returns what it consumed.
func runLoad(ctx context.Context, cfg *pipeline.Config, st stack, l load) (tally, error) {
	start := time.Now().UTC().Truncate(time.Hour)
	evs := generate(l.rate, l.keys, l.span, start, st.shards)
	end := start.Add(l.span)
	flush := time.Duration(0)
	if l.path == pathInterval {
		flush = l.flush
	}
	invs := cut(evs, st, flush, start, end.Add(l.tail))

	db := memdb.New(map[string]memdb.Schema{deployed.ViewsTable: memdb.ViewsTable, deployed.QuarantineTable: memdb.QuarantineTable})
	if err := deployed.SettleLayout(ctx, db, cfg, start); err != nil {
		return tally{}, err
	}
	setup := maps.Clone(db.Requests) // the run's requests are those after
	s := newStore(db)
	out := &deployed.Putter{}
	now := start
	clock := func() time.Time { return now }
	aggLog, aggMet := &logSink{}, &logSink{emf: true}
	tickLog, tickMet := &logSink{}, &logSink{emf: true}
	agg := deployed.New(cfg, s, out, deployed.Function{Name: "aggregate", Log: aggLog, Metrics: aggMet, Now: clock, MemoryMB: st.memoryMB})
	tick := deployed.New(cfg, s, out, deployed.Function{Name: "ticker", Log: tickLog, Metrics: tickMet, Now: clock, MemoryMB: st.memoryMB})
	// functions/ticker logs one line per tick, with its own logger.
	tickLine := slog.New(slog.NewJSONHandler(tickLog, nil))
	rule := []string{"arn:aws:events:us-east-1:123456789012:rule/Tributary-PipelinesPageviewsTickerSchedule-1A2B3C4D5E6F"}

	t := tally{events: len(evs), metrics: map[string]bool{}, simulated: l.span, retention: cfg.Retention, db: newUsage(), began: start}
	seq := make([]int, st.shards)
	states := make([]map[string]string, st.shards)
	share := st.vcpu()
	for i := 0; i < len(invs); i++ { // an early final invocation may be added after invs[i]
		inv := &invs[i]
		now = inv.at
		var raw []byte
		if !inv.tick {
			raw = inv.payload(seq, states[inv.shard])
		}
		s.take()
		c0 := cpuTime()
		var answer []byte
		var err error
		if inv.tick {
			r, terr := tick.Tick(ctx, now)
			err = terr
			if err == nil {
				tickLine.Info("tick", "rule", rule, "shards", r.Shards, "advanced", r.Advanced, "finalized", r.Finalized)
			}
		} else {
			answer, err = agg.Invoke(ctx, raw)
		}
		u := s.take()
		// The store's own work (memdb, the billing) is DynamoDB's, not the handler's.
		cpu := max(0, cpuTime()-c0-u.Busy) + l.sdk.Of(u.Requests)
		t.sdkCPU += l.sdk.Of(u.Requests)
		if err != nil {
			return t, fmt.Errorf("%s, %d events/s over %d keys: invocation at %s: %w", l.path, l.rate, l.keys, now.Format(time.RFC3339), err)
		}
		t.db.add(u)
		t.demand = append(t.demand, demand{at: now, wu: u.WriteUnits, indexWU: u.IndexUnits, ru: u.ReadUnits()})
		ms := float64(cpu)/share + float64(u.TotalRequests())*float64(l.waitPerRequest)
		t.billedMs += int64(ms/float64(time.Millisecond)) + 1
		t.logBytes += lambdaPlatformBytes + lambdaPlatformEvents*logsEventOverhead
		t.platformBytes += lambdaPlatformBytes + lambdaPlatformEvents*logsEventOverhead
		if inv.tick {
			t.tickInvokes++
			t.tickCPU += cpu
			continue
		}
		t.aggInvokes++
		t.aggCPU += cpu
		var r response
		if err := json.Unmarshal(answer, &r); err != nil {
			return t, fmt.Errorf("%s: the answer %.200q: %w", l.path, answer, err)
		}
		if len(r.BatchItemFailures) > 0 {
			return t, fmt.Errorf("%s, %d events/s over %d keys: invocation at %s reported %d failures", l.path, l.rate, l.keys, now.Format(time.RFC3339), len(r.BatchItemFailures))
		}
		if inv.window != nil {
			states[inv.shard] = r.State
			if inv.final {
				states[inv.shard] = nil
			}
			if early := inv.endsEarly(r.State); early != nil {
				t.earlyFinals++
				invs = slices.Insert(invs, i+1, *early)
			}
		}
	}
	for _, sink := range []*logSink{aggLog, aggMet, tickLog, tickMet} {
		t.logBytes += sink.bytes + sink.lines*logsEventOverhead
		t.resultLines += sink.results
		t.resultLogBytes += sink.resultBytes + sink.results*logsEventOverhead
		if sink.emf {
			t.emfBytes += sink.bytes + sink.lines*logsEventOverhead
		}
	}
	for _, sink := range []*logSink{aggMet, tickMet} {
		if err := sink.metricNames(t.metrics); err != nil {
			return t, err
		}
	}
	t.storedBytes = s.storedBytes(deployed.ViewsTable, deployed.QuarantineTable)
	t.resultsUnits = out.Units
	t.memdbRequests = maps.Clone(db.Requests)
	for op, n := range setup {
		if t.memdbRequests[op] -= n; t.memdbRequests[op] == 0 {
			delete(t.memdbRequests, op)
		}
	}
	t.samples = s.sdk.Samples()
	return t, nil
}

// steadyLoad is l's steady state: a run of twice l.span less a run of
// l.span, both followed by l.tail. A run of one span over-counts what
// happens once per run, not per span — each key's windows opened at its
// start, the ones its tail closes with fewer records than a window of a
// steady stream (a 5-minute hopping window advancing by a minute: 14
// windows created, finalized and published per key in 10 minutes where a
// steady stream makes 10), the cold container's first reads — and the
// difference of the two runs is what one more span of steady load costs,
// closing writes included.
func steadyLoad(ctx context.Context, cfg *pipeline.Config, st stack, l load) (tally, error) {
	short, err := runLoad(ctx, cfg, st, l)
	if err != nil {
		return tally{}, err
	}
	l.span *= 2
	long, err := runLoad(ctx, cfg, st, l)
	if err != nil {
		return tally{}, err
	}
	return long.minus(short), nil
}

// minus is what t counted beyond o: each count less o's. The metrics are
// t's (the names a month of the load emits).
func (t tally) minus(o tally) tally {
	d := t
	d.events -= o.events
	d.aggInvokes -= o.aggInvokes
	d.tickInvokes -= o.tickInvokes
	d.aggCPU -= o.aggCPU
	d.tickCPU -= o.tickCPU
	d.sdkCPU -= o.sdkCPU
	d.billedMs -= o.billedMs
	d.logBytes -= o.logBytes
	d.resultLines -= o.resultLines
	d.resultLogBytes -= o.resultLogBytes
	d.emfBytes -= o.emfBytes
	d.platformBytes -= o.platformBytes
	d.storedBytes -= o.storedBytes
	d.resultsUnits -= o.resultsUnits
	d.simulated -= o.simulated
	d.earlyFinals -= o.earlyFinals
	d.db = newUsage()
	d.db.add(t.db)
	neg := newUsage()
	neg.add(o.db)
	d.db.subtract(neg)
	d.memdbRequests, d.samples = nil, nil
	// The demand of the steady part: what t made after o's span.
	if len(t.demand) > 0 {
		slices.SortStableFunc(t.demand, func(a, b demand) int { return a.at.Compare(b.at) })
		from := t.began.Add(o.simulated)
		i, _ := slices.BinarySearchFunc(t.demand, from, func(e demand, at time.Time) int { return e.at.Compare(at) })
		d.demand = t.demand[i:]
	}
	return d
}
