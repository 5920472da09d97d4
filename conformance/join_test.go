package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The Kafka Streams join oracle: a second main class in the Kafka Streams
// oracle's jar (kstreams/src/.../JoinOracle.java), reading histories of two
// streams as JSON lines on stdin and writing what Kafka Streams'
// KStream–KStream join emitted for each as one JSON line on stdout.
const joinOracleClass = "dev.tributary.conformance.JoinOracle"

// The joins' timing in the join histories. Event times lie on a grid of
// joinGridMs, and the windows are multiples of it, so that records exactly
// within or before apart, and exactly allowedLateness behind the newest,
// happen often.
const (
	joinGridMs      = 1000
	joinKeys        = 3
	joinRecsPerKey  = 40
	joinLatePercent = 15
)

// joinWindow is one join window the test runs every join type with, and
// its name in test names.
type joinWindow struct {
	name                     string
	within, before, lateness time.Duration
}

var joinWindows = []joinWindow{
	// The shipped file's shape: clicks never before their search.
	{name: "before0", within: 10 * time.Second, lateness: 5 * time.Second},
	// No grace: every record behind the newest by more than its window is late.
	{name: "before4s-grace0", within: 10 * time.Second, before: 4 * time.Second},
	// A grace longer than the window.
	{name: "grace12s", within: 6 * time.Second, before: 3 * time.Second, lateness: 12 * time.Second},
}

var joinTypes = []string{"inner", "left", "outer"}

// joinRecord is one record a producer sends: a search (left) or a click
// (right) of a session.
type joinRecord struct {
	id   string
	left bool
	key  string
	t    int64 // event time, Unix ms
}

// joinHistory is one seeded run of a join type and window: the records,
// the order they reach the shard in (producer copies included) and how
// Lambda hands them to the join function, as history is for the
// aggregation.
type joinHistory struct {
	window      joinWindow
	joinType    string
	seed        uint64
	recs        []joinRecord
	arrive      []int64 // per record, when it reaches the stream (Unix ms)
	arrivals    []arrival
	invocations []invocation
}

func (h *joinHistory) id() string {
	return fmt.Sprintf("%s/%s/seed=%d", h.joinType, h.window.name, h.seed)
}

// newJoinHistory generates the history of one seed: joinKeys sessions,
// each with joinRecsPerKey searches and clicks on the grid (some at the
// same millisecond, most less than within apart, pauses longer than any
// window), arriving in bounded disorder (most less than allowedLateness
// behind their time, joinLatePercent of them later, up to two windows and
// two graces, many of them late), with producer copies, cut into batches of
// 1 to 25 records, some delivered twice, some retried from a few records
// back, and ticks between some.
func newJoinHistory(w joinWindow, joinType string, seed uint64) *joinHistory {
	h := &joinHistory{window: w, joinType: joinType, seed: seed}
	name := fnv.New64a()
	name.Write([]byte("join/" + joinType + "/" + w.name))
	rng := rand.New(rand.NewPCG(seed, name.Sum64()))
	grid := func(maxMs int64) int64 { return rng.Int64N(maxMs/joinGridMs+1) * joinGridMs }
	for k := range joinKeys {
		key := "sess-" + strconv.Itoa(k+1)
		t := base.UnixMilli() + grid(10_000)
		for range joinRecsPerKey {
			h.recs = append(h.recs, joinRecord{key: key, left: rng.IntN(2) == 0, t: t})
			if rng.IntN(100) < 10 {
				t += 20_000 + grid(40_000)
			} else {
				t += grid(4_000) // 0: the same millisecond
			}
		}
	}
	slices.SortStableFunc(h.recs, func(a, b joinRecord) int { return cmp.Compare(a.t, b.t) })
	for i := range h.recs {
		h.recs[i].id = "e" + strconv.Itoa(i)
	}
	order := make([]delayed, len(h.recs))
	h.arrive = make([]int64, len(h.recs))
	lateness := w.lateness.Milliseconds()
	for i, r := range h.recs {
		delay := grid(lateness)
		if rng.IntN(100) < joinLatePercent {
			delay = lateness + grid(2*(w.within+w.lateness).Milliseconds())
		}
		order[i] = delayed{i, r.t + delay}
		h.arrive[i] = r.t + delay
	}
	h.arrivals, h.invocations = deliver(rng, order)
	return h
}

// typeOf is a record's event type: the join's left or right type.
func (r joinRecord) typeOf() string {
	if r.left {
		return "search"
	}
	return "click"
}

// config is the join file of h.
func (h *joinHistory) config(t *testing.T) *join.Config {
	t.Helper()
	doc := fmt.Sprintf(`{"kind":"join","name":"conformance","left":"search","right":"click","within":%q,"before":%q,
	  "joinType":%q,"allowedLateness":%q,"idleTimeout":"20s","dedupeHorizon":"1h"}`,
		h.window.within, h.window.before, h.joinType, h.window.lateness)
	cfg, err := join.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("join: %v\n%s", err, doc)
	}
	return cfg
}

// kinesisEvent is the event Lambda hands the join function for arrivals
// first to last of h's shard, as the bytes the runtime receives: each
// record's envelope as ingest puts it on the events stream (sentAt and
// receivedAt its arrival, so its event time is its occurredAt).
func (h *joinHistory) kinesisEvent(first, last int) []byte {
	var ev events.KinesisEvent
	for i := first; i <= last; i++ {
		r := h.recs[h.arrivals[i].event]
		at := time.UnixMilli(h.arrive[h.arrivals[i].event]).UTC()
		data, err := json.Marshal(stream.Envelope{ID: r.id, Type: r.typeOf(), Key: r.key,
			OccurredAt: time.UnixMilli(r.t).UTC(), SentAt: at, ReceivedAt: at, Data: json.RawMessage(`{"n":` + r.id[1:] + `}`)})
		if err != nil {
			panic(err)
		}
		seq := fmt.Sprintf("49%054d", i+1)
		ev.Records = append(ev.Records, events.KinesisEventRecord{
			AwsRegion: "us-east-1", EventID: shard + ":" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: eventSourceArn, EventVersion: "1.0",
			InvokeIdentityArn: "arn:aws:iam::123456789012:role/join",
			Kinesis: events.KinesisRecord{KinesisSchemaVersion: "1.0", PartitionKey: r.key, SequenceNumber: seq,
				Data: data, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}},
		})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return raw
}

// joinOutcome is what one engine made of a history: its joined pairs
// ("left,right" by id), the records it emitted unmatched (by id, per side),
// and the records it dropped as late.
type joinOutcome struct {
	pairs               map[string]int
	leftOnly, rightOnly map[string]int
	late                int
	refused             []int // Kafka's: positions of the records its join stores refused
	problems            []string
	outputs             int
	// emittedBy is, for Kafka's unmatched records, the position (in the
	// order Kafka reads the records) of the record whose processing
	// emitted it.
	emittedBy map[string]int
}

func newJoinOutcome() joinOutcome {
	return joinOutcome{pairs: map[string]int{}, leftOnly: map[string]int{}, rightOnly: map[string]int{}, emittedBy: map[string]int{}}
}

// add counts one output: a pair, or one side unmatched ("" for the other).
func (o *joinOutcome) add(l, r string) {
	o.outputs++
	switch {
	case l != "" && r != "":
		o.pairs[l+","+r]++
	case l != "":
		o.leftOnly[l]++
	default:
		o.rightOnly[r]++
	}
}

// runJoin runs h through the join function as functions/join builds it
// (join.New over an in-process DynamoDB, the dedupe ledger, the set-aside
// sink): each invocation's records as the raw Lambda event bytes, through
// Invoke (what lambda.Start calls), resumed from the record a fold
// checkpoint reports; the tick where h says (at a processing time of the
// newest event time, so it closes what is due without moving the
// watermark), then ticks a day later until every window has closed; and
// reads the joins stream, each output once by its id.
func runJoin(t *testing.T, h *joinHistory) joinOutcome {
	t.Helper()
	ctx := context.Background()
	cfg := h.config(t)
	db := memdb.New(map[string]memdb.Schema{"join-state": memdb.ViewsTable, quarantine: memdb.QuarantineTable})
	out := &keyedtest.Stream{}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	views := state.NewViews(db, "join-state", nil, state.WithKeyedExpiry(keyed.StateExpiry))
	fn := join.New(cfg, views, out, "joins", join.DefaultLimits, keyed.WithLogger(log),
		keyed.WithSetAside(setaside.New(db, quarantine, setaside.WithFunction("join"))),
		keyed.WithDedupe(keyed.NewLedger(db, "join-state", cfg.Name, cfg.DedupeHorizon)))

	var newest int64
	for n, inv := range h.invocations {
		for first, tries := inv.first, 0; first <= inv.last; tries++ {
			if tries > 20 {
				t.Fatalf("invocation %d (arrivals %d..%d) keeps failing", n, inv.first, inv.last)
			}
			raw, err := fn.Invoke(ctx, h.kinesisEvent(first, inv.last))
			if err != nil {
				t.Fatalf("invocation %d (arrivals %d..%d): %v", n, first, inv.last, err)
			}
			var resp events.KinesisEventResponse
			if err := json.Unmarshal(raw, &resp); err != nil {
				t.Fatalf("invocation %d answered %s: %v", n, raw, err)
			}
			done := inv.last - first + 1
			if len(resp.BatchItemFailures) > 0 {
				// A fold checkpoint: Lambda resumes from the record reported.
				seq := resp.BatchItemFailures[0].ItemIdentifier
				for i := first; i <= inv.last; i++ {
					if fmt.Sprintf("49%054d", i+1) == seq {
						done = i - first
					}
				}
			}
			first += done
		}
		for i := inv.first; i <= inv.last; i++ {
			newest = max(newest, h.recs[h.arrivals[i].event].t)
		}
		if inv.tick {
			if _, err := fn.Tick(ctx, time.UnixMilli(newest)); err != nil {
				t.Fatalf("tick after invocation %d: %v", n, err)
			}
		}
	}
	// The shard goes idle: the tick's watermark passes every window.
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := fn.Tick(ctx, at); err != nil {
			t.Fatalf("final tick at %s: %v", at, err)
		}
	}

	o := newJoinOutcome()
	outs, problems := distinctOutputs(t, out.Records(), "output")
	o.problems = append(o.problems, problems...)
	for _, env := range outs {
		var d join.Data
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatalf("output %s: %v", env.Data, err)
		}
		var l, r string
		if d.Left != nil {
			l = d.Left.ID
		}
		if d.Right != nil {
			r = d.Right.ID
		}
		o.add(l, r)
	}
	st := fn.Stats()
	o.late = int(st.Late)
	if st.SetAside > 0 {
		o.problems = append(o.problems, fmt.Sprintf("%d records set aside: no record of these histories can be", st.SetAside))
	}
	return o
}

// kafkaJoinHistory is a history in the oracle's terms (JoinOracle.java).
type kafkaJoinHistory struct {
	ID       string            `json:"id"`
	JoinType string            `json:"joinType"`
	WithinMs int64             `json:"withinMs"`
	BeforeMs int64             `json:"beforeMs"`
	GraceMs  int64             `json:"graceMs"`
	Records  []kafkaJoinRecord `json:"records"`
}

type kafkaJoinRecord struct {
	ID   string `json:"id"`
	Side string `json:"side"`
	Key  string `json:"key"`
	T    int64  `json:"t"`
}

type kafkaJoinResult struct {
	ID      string `json:"id"`
	Outputs []struct {
		I     int    `json:"i"`
		Left  string `json:"left"`
		Right string `json:"right"`
	} `json:"outputs"`
	Dropped []int  `json:"dropped"`
	Error   string `json:"error"`
}

// kafkaOrder lists the records Kafka reads, in order (indexes into recs):
// each record's first arrival. Kafka reads each record once; Lambda's
// redeliveries and producers' copies reach only the join function, which
// must ignore them.
func (h *joinHistory) kafkaOrder() []int {
	var out []int
	for _, a := range h.arrivals {
		if !a.copy {
			out = append(out, a.event)
		}
	}
	return out
}

// kafka is h in the oracle's terms: JoinWindows.ofTimeDifferenceAndGrace
// with after = within, before = before and grace = allowedLateness, so
// that a click joins a search when its time is in [search − before,
// search + within], and Kafka's stream time (the newest event time of
// both sides, one partition each here) minus the grace is the shard's
// watermark.
func (h *joinHistory) kafka() kafkaJoinHistory {
	k := kafkaJoinHistory{ID: h.id(), JoinType: h.joinType, WithinMs: h.window.within.Milliseconds(),
		BeforeMs: h.window.before.Milliseconds(), GraceMs: h.window.lateness.Milliseconds()}
	for _, i := range h.kafkaOrder() {
		r := h.recs[i]
		side := "right"
		if r.left {
			side = "left"
		}
		k.Records = append(k.Records, kafkaJoinRecord{ID: r.id, Side: side, Key: r.key, T: r.t})
	}
	return k
}

// joinOracle is the join oracle's JVM, for every history of the test.
type joinOracle struct{ *lineOracle }

// run sends h to Kafka Streams and returns what its join emitted.
func (o *joinOracle) run(t *testing.T, h *joinHistory) joinOutcome {
	t.Helper()
	in := h.kafka()
	var r kafkaJoinResult
	o.ask(t, in.ID, &in, &r)
	if r.ID != in.ID {
		t.Fatalf("the Kafka Streams join oracle answered for %q, not %q", r.ID, in.ID)
	}
	if r.Error != "" {
		t.Fatalf("Kafka Streams failed on history %s: %s", in.ID, r.Error)
	}
	out := newJoinOutcome()
	for _, x := range r.Outputs {
		out.add(x.Left, x.Right)
		if x.Left == "" || x.Right == "" {
			out.emittedBy[x.Left+x.Right] = x.I
		}
	}
	out.late, out.refused = len(r.Dropped), r.Dropped
	return out
}

// joinTimes is what each record of h meets, in the order the join reads
// them: by the docs' definition, the shard's watermark just before it (the
// newest event time of the records before it minus allowedLateness) and
// whether it was late (its own window closed by then); and, for Kafka, the
// newest event time of its side's records once it arrived (the stream
// time of its side's join store).
type joinTimes struct {
	pos      map[string]int   // arrival position of each record, by id
	wmBefore map[string]int64 // the watermark just before it
	newest   map[string]int64 // the newest event time once it arrived (Kafka's stream time)
	// sideNewest is, per position (and one past the last), the newest
	// event time of the left and of the right records read before it.
	sideNewest [][2]int64
	late       map[string]bool
	key        map[string]string
	left       map[string]bool
	t          map[string]int64
	closeAt    func(id string) int64
}

func (h *joinHistory) times() joinTimes {
	jt := joinTimes{pos: map[string]int{}, wmBefore: map[string]int64{}, newest: map[string]int64{}, late: map[string]bool{},
		key: map[string]string{}, left: map[string]bool{}, t: map[string]int64{}}
	within, before, lateness := h.window.within.Milliseconds(), h.window.before.Milliseconds(), h.window.lateness.Milliseconds()
	jt.closeAt = func(id string) int64 {
		if jt.left[id] {
			return jt.t[id] + within + 1
		}
		return jt.t[id] + before + 1
	}
	newest := int64(math.MinInt64)
	side := [2]int64{math.MinInt64, math.MinInt64}
	for n, i := range h.kafkaOrder() {
		r := h.recs[i]
		jt.key[r.id], jt.left[r.id], jt.t[r.id] = r.key, r.left, r.t
		wm := int64(math.MinInt64)
		if newest != math.MinInt64 {
			wm = newest - lateness
		}
		jt.pos[r.id], jt.wmBefore[r.id] = n, wm
		jt.late[r.id] = jt.closeAt(r.id) <= wm
		jt.sideNewest = append(jt.sideNewest, side)
		newest = max(newest, r.t)
		jt.newest[r.id] = newest
		if r.left {
			side[0] = max(side[0], r.t)
		} else {
			side[1] = max(side[1], r.t)
		}
	}
	jt.sideNewest = append(jt.sideNewest, side)
	return jt
}

// expiredForKafka reports whether record id is out of its side's join
// store when the record at position pos (after id's) reads it: Kafka's
// in-memory window store keeps before + within + grace behind the newest
// time put in it, and drops a record exactly that far behind
// (InMemoryWindowStore: start <= observedStreamTime - retentionPeriod). At
// pos = id's position + 1, whether the store refused id itself.
func (h *joinHistory) expiredForKafka(jt joinTimes, id string, pos int) bool {
	retention := (h.window.before + h.window.within + h.window.lateness).Milliseconds()
	side := 1
	if jt.left[id] {
		side = 0
	}
	return jt.t[id] <= jt.sideNewest[pos][side]-retention
}

// joinComparison is one history's outcome.
type joinComparison struct {
	agreed int // outputs both engines emitted
	// explained are the outputs one engine has and the other not for one of
	// the two differences docs/stream-joins.md names, and why.
	explained []string
	// kafkas are the outputs one engine has and the other not for Kafka
	// Streams 4.4.0's own defects (see compareJoin), and why.
	kafkas     []string
	mismatches []string
	keys       map[string]bool // the keys of the records the mismatches name
}

// mismatch records a mismatch about the records ids.
func (c *joinComparison) mismatch(jt joinTimes, ids []string, format string, args ...any) {
	c.mismatches = append(c.mismatches, fmt.Sprintf(format, args...))
	for _, id := range ids {
		c.keys[jt.key[id]] = true
	}
}

// Why an output is one engine's only: a difference docs/stream-joins.md
// names (explained), or a defect of Kafka Streams' that it names (kafka).
const (
	explained = iota + 1
	kafkaDefect
)

// compareJoin compares the join function's outputs (got) with Kafka
// Streams' (want). The alignments, each a difference docs/stream-joins.md
// names under "Kafka Streams", are counted apart, never as agreement.
// The two differences kept on purpose ("Out of order, by more than
// allowedLateness, two differences are kept on purpose"), explained:
//
//   - A record whose window has closed is out of the join for good: a
//     pair Kafka joined whose first record's window had closed (by the
//     watermark) when the second arrived is not joined here.
//   - A record whose own window has closed when it arrives is late,
//     dropped: Kafka still joins it with what its stores keep, or emits it
//     unmatched at once. A pair or an unmatched record of Kafka's with a
//     late record is not emitted here.
//
// And two defects of Kafka Streams 4.4.0's that this join does not copy
// (the section's last paragraph), kafka:
//
//   - KAFKA-19536 (open): a record that finds nothing to join when it
//     arrives, and whose window end (its time + within for a left record,
//   - before for a right one) is already behind stream time, is emitted
//     unmatched at once, though the grace period keeps its window open;
//     Kafka then still joins it with records that arrive within the grace.
//     Here it is not late, joins those records, and is never unmatched.
//   - Kafka's join stores keep before + within + grace behind the newest
//     record of their side and drop a record exactly that old
//     (expiredForKafka), although its window is still open by the grace
//     (Kafka's own rule for emitting it unmatched keeps it open then). With
//     before 0, a search exactly within + grace behind the newest search
//     does not join a click at its window end that arrives in the grace;
//     here it does.
//
// A record one engine emits unmatched and the other does not is aligned
// when it joined nothing in the first and every pair the second made of
// it is aligned, with the pairs' reason. Everything else must agree: the
// same pairs, the same unmatched records, the join function's late records
// exactly those the docs' watermark makes late, and every record Kafka's
// stores refused late here or refused by their retention's edge.
func compareJoin(h *joinHistory, got, want joinOutcome) joinComparison {
	c := joinComparison{keys: map[string]bool{}}
	jt := h.times()
	note := func(kind int, format string, args ...any) {
		if kind == explained {
			c.explained = append(c.explained, fmt.Sprintf(format, args...))
		} else {
			c.kafkas = append(c.kafkas, fmt.Sprintf(format, args...))
		}
	}
	// pairWhy says why the pair l,r is Kafka's only (kafkaOnly) or the join
	// function's only, and of which kind, or 0.
	pairWhy := func(l, r string, kafkaOnly bool) (int, string) {
		first, second := l, r
		if jt.pos[r] < jt.pos[l] {
			first, second = r, l
		}
		if !kafkaOnly {
			if h.expiredForKafka(jt, first, jt.pos[second]) {
				return kafkaDefect, fmt.Sprintf("%s (t %s) out of Kafka's join store when %s arrived: its retention's edge", first, clockAt(jt.t[first]), second)
			}
			return 0, ""
		}
		switch {
		case jt.late[l] && jt.late[r]:
			return explained, "both records late"
		case jt.late[l]:
			return explained, "the left record late"
		case jt.late[r]:
			return explained, "the right record late"
		case jt.closeAt(first) <= jt.wmBefore[second]:
			return explained, fmt.Sprintf("%s's window closed (watermark %s) before %s arrived", first, clockAt(jt.wmBefore[second]), second)
		}
		return 0, ""
	}
	// aligned counts, per record and engine (0 Kafka, 1 the join
	// function), the pairs with it only that engine has, aligned, and
	// their kind (the worst); pairs all that engine's pairs with it.
	type tally struct{ aligned, pairs, kind int }
	per := [2]map[string]*tally{{}, {}}
	count := func(e int, id string) *tally {
		if per[e][id] == nil {
			per[e][id] = &tally{}
		}
		return per[e][id]
	}
	for _, pair := range slices.Sorted(mapKeys(want.pairs, got.pairs)) {
		l, r, _ := strings.Cut(pair, ",")
		w, g := want.pairs[pair], got.pairs[pair]
		for e, n := range [2]int{w, g} {
			if n > 0 {
				count(e, l).pairs++
				count(e, r).pairs++
			}
		}
		switch {
		case w > 1 || g > 1:
			c.mismatch(jt, []string{l, r}, "pair [%s, %s]: Kafka emitted it %d times, the join %d", l, r, w, g)
		case w == 1 && g == 1:
			c.agreed++
		default:
			e, who := 0, "Kafka"
			if g == 1 {
				e, who = 1, "the join"
			}
			kind, why := pairWhy(l, r, w == 1)
			if kind == 0 {
				c.mismatch(jt, []string{l, r}, "pair [%s, %s]: %s only", l, r, who)
				continue
			}
			for _, id := range []string{l, r} {
				t := count(e, id)
				t.aligned++
				t.kind = max(t.kind, kind)
			}
			note(kind, "pair [%s, %s] %s only: %s", l, r, who, why)
		}
	}
	unmatched := func(side string, w, g map[string]int) {
		for _, id := range slices.Sorted(mapKeys(w, g)) {
			end := jt.closeAt(id) - 1
			// onlyBy: the pairs of engine e with id are all aligned, and the
			// other engine made none.
			onlyBy := func(e int) int {
				t, other := count(e, id), count(1-e, id)
				if other.pairs == 0 && t.pairs > 0 && t.aligned == t.pairs {
					return t.kind
				}
				return 0
			}
			switch {
			case w[id] > 1 || g[id] > 1:
				c.mismatch(jt, []string{id}, "%s %s unmatched: Kafka emitted it %d times, the join %d", side, id, w[id], g[id])
			case w[id] == 1 && g[id] == 1:
				c.agreed++
			case w[id] == 1 && jt.late[id]:
				note(explained, "%s %s unmatched Kafka only: late, dropped here", side, id)
			case w[id] == 1 && want.emittedBy[id] == jt.pos[id] && end < jt.newest[id] && count(1, id).pairs > 0:
				note(kafkaDefect, "%s %s unmatched Kafka only: emitted on arrival, its window end %s behind stream time %s but within the grace; joined here (KAFKA-19536)",
					side, id, clockAt(end), clockAt(jt.newest[id]))
			case w[id] == 1 && onlyBy(1) != 0:
				note(onlyBy(1), "%s %s unmatched Kafka only: every pair the join made of it is the join's only", side, id)
			case g[id] == 1 && onlyBy(0) != 0:
				note(onlyBy(0), "%s %s unmatched here only: every pair Kafka made of it is Kafka's only", side, id)
			case w[id] == 1:
				c.mismatch(jt, []string{id}, "%s %s: Kafka emitted it unmatched (processing record %d), the join did not", side, id, want.emittedBy[id])
			default:
				c.mismatch(jt, []string{id}, "%s %s: the join emitted it unmatched, Kafka did not", side, id)
			}
		}
	}
	unmatched("left", want.leftOnly, got.leftOnly)
	unmatched("right", want.rightOnly, got.rightOnly)
	late := 0
	for _, l := range jt.late {
		if l {
			late++
		}
	}
	if got.late != late {
		c.mismatch(jt, nil, "the join dropped %d records as late; %d were late by the docs' watermark", got.late, late)
	}
	order := h.kafkaOrder()
	for _, pos := range want.refused {
		id := h.recs[order[pos]].id
		if !jt.late[id] && !h.expiredForKafka(jt, id, pos+1) {
			c.mismatch(jt, []string{id}, "%s: Kafka's join store refused it (dropped-records), yet it is not late here nor at the store's retention", id)
		}
	}
	c.mismatches = append(c.mismatches, got.problems...)
	return c
}

func clockAt(ms int64) string {
	if ms == math.MinInt64 {
		return "none"
	}
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

// mapKeys yields the keys of both maps (some twice).
func mapKeys(a, b map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []map[string]int{a, b} {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// TestKafkaStreamsJoinConformance runs seeded histories of every join type
// (inner, left, outer) and window (before 0 and above, allowedLateness 0
// and above, shorter and longer than the window) through the join function
// (join.New, as functions/join builds it, under Lambda's batches,
// redeliveries and producer copies) and through Kafka Streams'
// KStream–KStream join (the oracle JoinOracle in kstreams/), and compares
// the joined pairs, the unmatched records and the records dropped as late.
// The alignments between the two are compareJoin's; anything else is a
// mismatch.
//
//	go test ./conformance -run KafkaStreamsJoin                        # 3 seeds per type and window
//	go test ./conformance -run KafkaStreamsJoin -args -conformance.seeds=200
func TestKafkaStreamsJoinConformance(t *testing.T) {
	testtools.Need(t, "the Kafka Streams conformance oracle (conformance/kstreams) runs on a JDK 17 or later (apt-get install openjdk-17-jdk-headless)", "java")
	if stale, why := jarStale(oracleDir, oracleJar); stale {
		testtools.Need(t, "the Kafka Streams join conformance test builds its oracle (conformance/kstreams: "+why+") with Maven (apt-get install maven)", "mvn")
	}
	start := time.Now()
	buildJar(t, "Kafka Streams", oracleDir, oracleJar)
	o := &joinOracle{startLineOracle(t, "the Kafka Streams join oracle", oracleJar, joinOracleClass)}
	for _, jtype := range joinTypes {
		for _, w := range joinWindows {
			histories, agreed, explained, kafkas, mismatched, kafkaOut, ourOut, ourLate, kafkaDropped := 0, 0, 0, 0, 0, 0, 0, 0, 0
			for s := 1; s <= *seeds; s++ {
				h := newJoinHistory(w, jtype, uint64(s))
				t.Run(h.id(), func(t *testing.T) {
					want := o.run(t, h)
					got := runJoin(t, h)
					c := compareJoin(h, got, want)
					histories++
					agreed += c.agreed
					explained += len(c.explained)
					kafkas += len(c.kafkas)
					mismatched += len(c.mismatches)
					kafkaOut += want.outputs
					ourOut += got.outputs
					ourLate += got.late
					kafkaDropped += want.late
					reportJoin(t, h, c)
				})
			}
			t.Logf("%-6s %-16s %3d histories: outputs Kafka %5d, join %5d: %5d agree, %4d explained, %3d Kafka's own, %d mismatched; late: join dropped %d, Kafka's stores refused %d",
				jtype, w.name, histories, kafkaOut, ourOut, agreed, explained, kafkas, mismatched, ourLate, kafkaDropped)
		}
	}
	t.Logf("%d join types and windows in %s (the oracle's JVM included)", len(joinTypes)*len(joinWindows), time.Since(start).Round(time.Millisecond))
}

// reportJoin fails t with c's mismatches, the records of the keys
// concerned, and the command that runs this history alone.
func reportJoin(t *testing.T, h *joinHistory, c joinComparison) {
	t.Helper()
	if testing.Verbose() {
		for _, e := range c.explained {
			t.Logf("explained: %s", e)
		}
		for _, e := range c.kafkas {
			t.Logf("Kafka's own: %s", e)
		}
	}
	if len(c.mismatches) == 0 {
		return
	}
	lines := c.mismatches
	if len(lines) > 40 {
		lines = append(slices.Clone(lines[:40]), fmt.Sprintf("... and %d more", len(lines)-40))
	}
	jt := h.times()
	order := h.kafkaOrder()
	var recs []string
	for _, i := range order {
		r := h.recs[i]
		if len(c.keys) > 0 && !c.keys[r.key] {
			continue
		}
		mark := ""
		if jt.late[r.id] {
			mark = " late"
		}
		recs = append(recs, fmt.Sprintf("  %-4s %s %-6s t=+%dms arrives +%dms (watermark before it %s)%s",
			r.id, r.key, r.typeOf(), r.t-base.UnixMilli(), h.arrive[i]-base.UnixMilli(), clockAt(jt.wmBefore[r.id]), mark))
	}
	if len(recs) > 200 {
		recs = append(recs[:200], "  ...")
	}
	t.Errorf("the join function differs from Kafka Streams 4.4.0's KStream–KStream %s join (within %s, before %s, grace %s):\n  %s\nexplained: %d\nrecords of those keys in arrival order:\n%s\nrepro: go test ./conformance -run '%s$' -v -args -conformance.seeds=%d",
		h.joinType, h.window.within, h.window.before, h.window.lateness, strings.Join(lines, "\n  "), len(c.explained), strings.Join(recs, "\n"), t.Name(), h.seed)
}
