package conformance

import (
	"cmp"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// The pipeline's timing, the same for every history. Most event times lie
// on a grid of gridMs so that records fall exactly on window bounds,
// exactly gap or difference apart and exactly outOfOrderness behind the
// newest record often enough to test every inclusive and exclusive edge
// (with a 250 ms grid, a grace period 1 ms too long went unnoticed in 5
// seeds); one in ten is off the grid by some milliseconds.
const (
	gridMs          = 1000
	outOfOrderness  = 10 * time.Second
	allowedLateness = time.Minute
	idleTimeout     = 30 * time.Second
	keysPerHistory  = 3
	eventsPerKey    = 100 // about 30 minutes of event time per key
)

// base is the first event time: far from the Unix epoch, so Kafka's
// sliding windows never take their path for records earlier than the
// time difference.
var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// windowKind is one window declaration of the pipeline, and its name in
// test names.
type windowKind struct {
	name string
	// json is the pipeline's windows entry.
	json string
	// sizeMs and advanceMs (tumbling, hopping), differenceMs (sliding),
	// gapMs (session): the pipeline's parameters.
	sizeMs, advanceMs, differenceMs, gapMs int64
}

var kinds = []windowKind{
	{name: "tumbling", json: `{"kind":"tumbling","size":"1m"}`, sizeMs: 60_000},
	{name: "hopping", json: `{"kind":"hopping","size":"2m","advance":"30s"}`, sizeMs: 120_000, advanceMs: 30_000},
	{name: "sliding", json: `{"kind":"sliding","difference":"30s"}`, differenceMs: 30_000},
	{name: "session", json: `{"kind":"session","gap":"20s"}`, gapMs: 20_000},
}

var policies = []string{"drop", "correct"}

// event is one event a producer sends.
type event struct {
	id  string
	key string
	t   int64 // event time, Unix ms
	v   int64 // the value aggregated
}

// arrival is one record on the Kinesis shard, in sequence order: an event,
// or a producer's second copy of one (same id and content, a new sequence
// number), which must have no effect.
type arrival struct {
	event int // index into history.events
	copy  bool
}

// history is one seeded run: the events, the order they reach the shard in,
// and how Lambda hands them to the function.
type history struct {
	kind   windowKind
	policy string
	seed   uint64
	// name is the id of a history written by hand ("": a seeded one's).
	name   string
	events []event
	// arrivals is the shard, in sequence order.
	arrivals []arrival
	// invocations are the batches Lambda invokes the function with, in
	// order: each a run of arrivals (first and last index, inclusive),
	// with a tick of the ticker after it when tick is set.
	invocations []invocation
	// idleTicks, when not nil, are per invocation the processing times
	// (Unix ms) of the ticks after it, in place of invocation.tick's tick
	// at the newest event time: ticks idleTimeout apart advance the idle
	// shard's watermark by the clock (TestKafkaStreamsConformanceAfterAnIdleAdvance).
	idleTicks [][]int64
	// advances are, per invocation, Kafka's stream time after the ticks
	// that follow it advanced the idle shard: the watermark they stored +
	// outOfOrderness, when past the stream time of the records read
	// (runProject fills it). Kafka's stream time moves only with records,
	// so it reads a record of key idleKey there (kafka).
	advances map[int]int64
	// flushAfter, when not nil, are the invocations after which the
	// per-interval path flushes its interval, in place of the seed's.
	flushAfter map[int]bool
	// cold has every invocation made by a new process of the function (a
	// cold start), where one warm process makes them all.
	cold bool
}

// idleKey is the key of the records that stand, for Kafka, for the
// ticker's idle advance (history.advances); no window of it is compared.
const idleKey = "~"

// delayed is an event (its index) and when it reaches the shard.
type delayed struct {
	event int
	at    int64
}

// deliver is how a history's events reach the function: in order of
// arrival (order, sorted here), a few producer copies a few records after
// their original, and Lambda's batches of 1–25 records — now and then a
// retry that starts a few records back (a batch of another size after a
// timeout the function survived), a batch delivered twice, a tick.
func deliver(rng *rand.Rand, order []delayed) (arrivals []arrival, invocations []invocation) {
	slices.SortStableFunc(order, func(a, b delayed) int { return cmp.Compare(a.at, b.at) })
	for _, d := range order {
		arrivals = append(arrivals, arrival{event: d.event})
	}
	for i := 0; i < len(arrivals); i++ {
		if a := arrivals[i]; !a.copy && rng.IntN(100) < 3 {
			at := min(len(arrivals), i+1+rng.IntN(10))
			arrivals = slices.Insert(arrivals, at, arrival{event: a.event, copy: true})
		}
	}
	for next := 0; next < len(arrivals); {
		first := next
		if len(invocations) > 0 && rng.IntN(10) == 0 {
			first = max(0, next-1-rng.IntN(5))
		}
		last := min(len(arrivals)-1, next+rng.IntN(25))
		invocations = append(invocations, invocation{first: first, last: last, tick: rng.IntN(10) == 0})
		if rng.IntN(10) == 0 {
			invocations = append(invocations, invocation{first: first, last: last})
		}
		next = last + 1
	}
	return arrivals, invocations
}

type invocation struct {
	first, last int
	tick        bool
}

// newHistory generates the history of one seed: keysPerHistory keys, each
// with eventsPerKey events in bursts (pauses longer than the session gap
// between some of them), values from -20 to 100, arriving in bounded
// disorder (most records at most outOfOrderness behind their event time,
// one in ten up to allowedLateness and more behind, some of them too late
// for either policy), with producer copies of some events, cut into
// batches of 1 to 25 records, some batches delivered twice and some
// retried from a few records back, and ticks between some batches.
func newHistory(kind windowKind, policy string, seed uint64) *history {
	h := &history{kind: kind, policy: policy, seed: seed}
	name := fnv.New64a()
	name.Write([]byte(kind.name + "/" + policy))
	rng := rand.New(rand.NewPCG(seed, name.Sum64()))
	grid := func(maxMs int64) int64 { return rng.Int64N(maxMs/gridMs+1) * gridMs }

	// Events, per key, in bursts.
	for k := range keysPerHistory {
		key := string(rune('a' + k))
		t := base.UnixMilli() + grid(60_000)
		for range eventsPerKey {
			e := event{key: key, t: t, v: rng.Int64N(121) - 20}
			if rng.IntN(10) == 0 {
				e.t += 1 + rng.Int64N(gridMs-1)
			}
			h.events = append(h.events, e)
			if rng.IntN(100) < 15 {
				t += 15_000 + grid(105_000) // a pause: often a new session
			} else {
				t += gridMs + grid(15_000)
			}
		}
	}
	slices.SortStableFunc(h.events, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	for i := range h.events {
		h.events[i].id = "e" + strconv.Itoa(i)
	}

	// Arrival order: event time plus a delay.
	order := make([]delayed, len(h.events))
	ooo := outOfOrderness.Milliseconds()
	for i, e := range h.events {
		delay := grid(ooo)
		if rng.IntN(10) == 0 {
			delay = ooo + grid(2*allowedLateness.Milliseconds())
		}
		order[i] = delayed{i, e.t + delay}
	}
	h.arrivals, h.invocations = deliver(rng, order)
	return h
}
