package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// The Flink CEP oracle: a Maven project in flinkcep/ whose jar reads
// histories with their rules as JSON lines on stdin and writes the matches
// Flink CEP makes of each as one JSON line on stdout (see
// flinkcep/src/.../CepOracle.java).
const (
	flinkDir = "flinkcep"
	flinkJar = "flinkcep/target/flinkcep-oracle.jar"
	// flinkVersion is the Flink of flinkcep/pom.xml, for messages.
	flinkVersion = "Flink CEP 2.2.0"
)

// The detection's timing in the CEP histories. Event times lie on a grid
// of cepGridMs, and the rules' within times are multiples of it, so that
// events exactly within apart, exactly outOfOrderness behind the newest and
// at the same millisecond happen often.
const (
	cepGridMs         = 1000
	cepOutOfOrderness = 5 * time.Second
	cepKeys           = 3
	cepEventsPerKey   = 50
)

// cepForm is one pattern form the test compares: rules of the form (the
// project's JSON rule format) and the event types its histories draw from,
// one of them read by no rule.
type cepForm struct {
	name  string
	rules []string
	types []string
	// latePercent of the events arrive later than outOfOrderness behind
	// their time, many of them late.
	latePercent int
}

// The forms with a Flink CEP equivalent. Not compared, having none: sum
// and atLeast (Flink has no summing quantifier), keys and keyPrefix (a
// Flink job filters its input itself) and when a rule added or disabled at
// runtime starts or stops applying (Flink's patterns are fixed when the job
// starts).
var cepForms = []cepForm{
	{name: "filter", types: []string{"payment", "refund"}, latePercent: 10, rules: []string{
		`{"id":"big-payment","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.country in ('NZ', 'AU')"}]}`,
		`{"id":"odd-payment","pattern":[{"begin":"p","type":"payment","where":"not exists(data.amount) or (data.country == 'US' and data.amount <= 50) or data.country not in ('NZ', 'US')"}]}`,
	}},
	{name: "followedBy", types: []string{"payment_failed", "payment", "login", "page_view"}, latePercent: 10, rules: []string{
		`{"id":"fail-then-big","pattern":[{"begin":"fail","type":"payment_failed"},{"followedBy":"big","type":"payment","where":"data.amount > 100"}],"within":"20s"}`,
		`{"id":"login-fail-pay","pattern":[{"begin":"login","type":"login"},{"followedBy":"fail","type":"payment_failed"},{"followedBy":"pay","type":"payment","where":"data.amount >= 50"}],"within":"30s"}`,
	}},
	{name: "next", types: []string{"add_to_cart", "checkout", "page_view"}, latePercent: 10, rules: []string{
		`{"id":"cart-checkout","pattern":[{"begin":"cart","type":"add_to_cart"},{"next":"buy","type":"checkout"}],"within":"20s"}`,
		`{"id":"big-cart-checkout","pattern":[{"begin":"cart","type":"add_to_cart","where":"data.amount >= 100"},{"next":"buy","type":"checkout","where":"data.country != 'US'"}],"within":"15s"}`,
	}},
	{name: "notFollowedBy", types: []string{"order_placed", "payment", "shipped", "page_view"}, latePercent: 10, rules: []string{
		`{"id":"unpaid","pattern":[{"begin":"order","type":"order_placed"},{"notFollowedBy":"paid","type":"payment"}],"within":"20s"}`,
		`{"id":"shipped-unpaid","pattern":[{"begin":"order","type":"order_placed","where":"data.amount > 50"},{"followedBy":"ship","type":"shipped"},{"notFollowedBy":"paid","type":"payment","where":"data.amount > 0"}],"within":"30s"}`,
	}},
	{name: "timesOrMore", types: []string{"login_failed", "payment", "page_view"}, latePercent: 10, rules: []string{
		`{"id":"brute-force","pattern":[{"begin":"fail","type":"login_failed","timesOrMore":3}],"within":"15s"}`,
		`{"id":"big-twice","pattern":[{"begin":"p","type":"payment","where":"data.amount >= 100","timesOrMore":2}],"within":"10s"}`,
	}},
	{name: "skipPastLastEvent", types: []string{"payment", "payment_failed", "page_view"}, latePercent: 10, rules: []string{
		// Steps of one type, so that one event can begin a partial match
		// and complete another: what the skip strategy prunes.
		`{"id":"pay-then-big","pattern":[{"begin":"a","type":"payment"},{"followedBy":"b","type":"payment","where":"data.amount > 100"}],"within":"20s","afterMatch":"skipPastLastEvent"}`,
		`{"id":"pay-pay","pattern":[{"begin":"a","type":"payment"},{"next":"b","type":"payment","where":"data.amount >= 100"}],"within":"15s","afterMatch":"skipPastLastEvent"}`,
		`{"id":"fail-unretried","pattern":[{"begin":"a","type":"payment_failed"},{"notFollowedBy":"b","type":"payment_failed"}],"within":"10s","afterMatch":"skipPastLastEvent"}`,
	}},
	{name: "noSkip", types: []string{"payment", "payment_failed", "page_view"}, latePercent: 10, rules: []string{
		`{"id":"pay-then-big","pattern":[{"begin":"a","type":"payment"},{"followedBy":"b","type":"payment","where":"data.amount > 100"}],"within":"20s","afterMatch":"noSkip"}`,
		`{"id":"fail-then-big","pattern":[{"begin":"fail","type":"payment_failed"},{"followedBy":"big","type":"payment","where":"data.amount > 100"}],"within":"20s","afterMatch":"noSkip"}`,
		`{"id":"pay-pay","pattern":[{"begin":"a","type":"payment"},{"next":"b","type":"payment","where":"data.amount >= 100"}],"within":"15s","afterMatch":"noSkip"}`,
		`{"id":"fail-unretried","pattern":[{"begin":"a","type":"payment_failed"},{"notFollowedBy":"b","type":"payment_failed"}],"within":"10s","afterMatch":"noSkip"}`,
	}},
	{name: "late", types: []string{"payment_failed", "payment", "order_placed", "page_view"}, latePercent: 35, rules: []string{
		`{"id":"big-payment","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`,
		`{"id":"fail-then-big","pattern":[{"begin":"fail","type":"payment_failed"},{"followedBy":"big","type":"payment","where":"data.amount > 100"}],"within":"20s"}`,
		`{"id":"fail-pay","pattern":[{"begin":"fail","type":"payment_failed"},{"next":"pay","type":"payment"}],"within":"20s"}`,
		`{"id":"unpaid","pattern":[{"begin":"order","type":"order_placed"},{"notFollowedBy":"paid","type":"payment"}],"within":"20s"}`,
		`{"id":"many-fails","pattern":[{"begin":"fail","type":"payment_failed","timesOrMore":2}],"within":"15s"}`,
	}},
}

// cepEvent is one event a producer sends.
type cepEvent struct {
	id, typ, key string
	t            int64 // event time, Unix ms
	data         map[string]any
}

// cepHistory is one seeded run of a form: the events, the order they reach
// the shard in (arrivals, producer copies included) and how Lambda hands
// them to the detect function (invocations), as history is for the
// aggregation.
type cepHistory struct {
	form        cepForm
	seed        uint64
	events      []cepEvent
	arrive      []int64 // per event, when it reaches the stream (Unix ms)
	arrivals    []arrival
	invocations []invocation
}

func (h *cepHistory) id() string { return fmt.Sprintf("%s/seed=%d", h.form.name, h.seed) }

// newCEPHistory generates the history of one seed: cepKeys keys, each with
// cepEventsPerKey events of the form's types on the grid, some at the same
// millisecond, with pauses longer than any rule's time; amounts from 0 to
// 200 (one in ten missing) and countries; arriving in bounded disorder
// (latePercent of them more than outOfOrderness behind, many of them late),
// with producer copies, cut into batches of 1 to 25 records, some delivered
// twice, some retried from a few records back, and ticks between some.
func newCEPHistory(form cepForm, seed uint64) *cepHistory {
	h := &cepHistory{form: form, seed: seed}
	name := fnv.New64a()
	name.Write([]byte("cep/" + form.name))
	rng := rand.New(rand.NewPCG(seed, name.Sum64()))
	grid := func(maxMs int64) int64 { return rng.Int64N(maxMs/cepGridMs+1) * cepGridMs }
	countries := []string{"NZ", "AU", "US", "FR"}
	for k := range cepKeys {
		key := "acct-" + strconv.Itoa(k+1)
		t := base.UnixMilli() + grid(10_000)
		for range cepEventsPerKey {
			data := map[string]any{"country": countries[rng.IntN(len(countries))]}
			if rng.IntN(10) > 0 {
				data["amount"] = rng.IntN(21) * 10
			}
			h.events = append(h.events, cepEvent{key: key, typ: form.types[rng.IntN(len(form.types))], t: t, data: data})
			if rng.IntN(100) < 10 {
				t += 20_000 + grid(40_000)
			} else {
				t += grid(6_000) // 0: the same millisecond
			}
		}
	}
	slices.SortStableFunc(h.events, func(a, b cepEvent) int { return cmp.Compare(a.t, b.t) })
	for i := range h.events {
		h.events[i].id = "e" + strconv.Itoa(i)
	}
	order := make([]delayed, len(h.events))
	h.arrive = make([]int64, len(h.events))
	ooo := cepOutOfOrderness.Milliseconds()
	for i, e := range h.events {
		delay := grid(ooo)
		if rng.IntN(100) < form.latePercent {
			delay = ooo + grid(3*ooo)
		}
		order[i] = delayed{i, e.t + delay}
		h.arrive[i] = e.t + delay
	}
	h.arrivals, h.invocations = deliver(rng, order)
	return h
}

// envelope is event i as ingest puts it on the events stream: sentAt and
// receivedAt are its arrival, so its event time is its occurredAt.
func (h *cepHistory) envelope(i int) []byte {
	e := h.events[i]
	data, _ := json.Marshal(e.data)
	at := time.UnixMilli(h.arrive[i]).UTC()
	env := stream.Envelope{ID: e.id, Type: e.typ, Key: e.key, OccurredAt: time.UnixMilli(e.t).UTC(), SentAt: at, ReceivedAt: at, Data: data}
	b, err := json.Marshal(&env)
	if err != nil {
		panic(err)
	}
	return b
}

// cepOutcome is what one engine made of a history: its matches, each
// "rule key id,id,...", sorted, and the events it dropped as late.
type cepOutcome struct {
	matches []string
	late    int
	// problems are what no match list shows: an evicted partial match, a
	// match id emitted with two contents.
	problems []string
}

func matchLine(rule, key string, ids []string) string {
	return rule + " " + key + " " + strings.Join(ids, ",")
}

// runDetect runs h through the detect function as functions/detect builds
// it (cep.NewHandler over an in-process DynamoDB, the dedupe ledger, the
// set-aside sink), its batches as Lambda invokes it (redeliveries, retries
// from a few records back, ticks), then ticks until every absence has
// fired, and reads the matches stream.
func runDetect(t *testing.T, h *cepHistory, rules []*cep.Rule) cepOutcome {
	t.Helper()
	ctx := context.Background()
	cfg, err := cep.ParseConfig(fmt.Appendf(nil, `{"kind":"cep","name":"conformance","outOfOrderness":%q,"idleTimeout":"20s","dedupeHorizon":"1h"}`, cepOutOfOrderness))
	if err != nil {
		t.Fatal(err)
	}
	db := memdb.New(map[string]memdb.Schema{"cep-state": memdb.ViewsTable, quarantine: memdb.QuarantineTable})
	out := &keyedtest.Stream{}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	stored := make(staticCEPRules, len(rules))
	for i, r := range rules {
		stored[i] = &cep.StoredRule{Rule: r, Status: cep.StatusActive, Intervals: []cep.Interval{{From: time.Unix(0, 0)}}}
	}
	clock := func() time.Time { return base }
	d := cep.NewHandler(cfg, state.NewViews(db, "cep-state", nil, state.WithKeyedExpiry(keyed.StateExpiry)), out, "matches", stored, clock,
		keyed.WithLogger(log), keyed.WithSetAside(setaside.New(db, quarantine)),
		keyed.WithDedupe(keyed.NewLedger(db, "cep-state", cfg.Name, cfg.DedupeHorizon)))

	recs := make([]events.KinesisEventRecord, len(h.arrivals))
	for i, a := range h.arrivals {
		seq := strconv.Itoa(1000 + 2*i)
		recs[i] = events.KinesisEventRecord{EventID: shard + ":" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: eventSourceArn,
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: h.events[a.event].key, Data: h.envelope(a.event),
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: time.UnixMilli(h.arrive[a.event])}}}
	}
	for _, inv := range h.invocations {
		// Lambda resumes a batch from the first record the function
		// reports failed (a fold checkpoint).
		for first, tries := inv.first, 0; first <= inv.last; tries++ {
			if tries > 20 {
				t.Fatalf("the batch of records %d to %d keeps failing", inv.first, inv.last)
			}
			batch := recs[first : inv.last+1]
			resp, err := d.HandleBatch(ctx, events.KinesisEvent{Records: batch})
			if err != nil {
				t.Fatalf("batch of records %d to %d: %v", first, inv.last, err)
			}
			done := len(batch)
			if len(resp.BatchItemFailures) > 0 {
				for i, r := range batch {
					if r.Kinesis.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
						done = i
					}
				}
			}
			first += done
		}
		if inv.tick {
			if _, err := d.Tick(ctx, base); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The shard goes idle: the ticker's watermark passes every absence's time.
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := d.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	var o cepOutcome
	outs, problems := distinctOutputs(t, out.Records(), "match")
	o.problems = append(o.problems, problems...)
	for _, env := range outs {
		var m cep.MatchData
		if err := json.Unmarshal(env.Data, &m); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(m.Events))
		for i, e := range m.Events {
			ids[i] = e.ID
		}
		if m.Kind == "evicted" {
			o.problems = append(o.problems, "a partial match was evicted (past 64 per rule and key, which Flink does not bound): "+matchLine(m.Rule, env.Key, ids))
			continue
		}
		o.matches = append(o.matches, matchLine(m.Rule, env.Key, ids))
	}
	slices.Sort(o.matches)
	o.late = int(d.Stats().Late)
	return o
}

// staticCEPRules is a cep.RuleSource of rules active from the start.
type staticCEPRules []*cep.StoredRule

func (s staticCEPRules) Version(context.Context) (int64, error)          { return 1, nil }
func (s staticCEPRules) List(context.Context) ([]*cep.StoredRule, error) { return s, nil }

// flinkHistory is a history in the oracle's terms: the rules and every
// event once, in the order of its first arrival on the shard.
type flinkHistory struct {
	ID               string            `json:"id"`
	OutOfOrdernessMs int64             `json:"outOfOrdernessMs"`
	Rules            []json.RawMessage `json:"rules"`
	Events           []flinkEvent      `json:"events"`
}

type flinkEvent struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Key  string         `json:"key"`
	T    int64          `json:"t"`
	Data map[string]any `json:"data"`
}

type flinkResult struct {
	ID      string `json:"id"`
	Matches []struct {
		Rule   string   `json:"rule"`
		Key    string   `json:"key"`
		Events []string `json:"events"`
	} `json:"matches"`
	Late  []string `json:"late"`
	Error string   `json:"error"`
}

// flink is h in the oracle's terms. The alignments between the two engines
// (docs/cep.md lists them under "Conformance with Flink CEP"):
//
//   - Time. pkg/cep's watermark is the newest event time of the shard minus
//     outOfOrderness, moved by every record, those no rule reads too; an
//     event is matched once the watermark is past it (t < watermark) and is
//     late if it is not newer on arrival. Flink's watermark W promises no
//     event at or before W, so the oracle gives Flink W = watermark - 1
//     after each event (as Flink's BoundedOutOfOrdernessWatermarks do):
//     Flink then drops as late, and matches, exactly the same events. The
//     end of input is Flink's final watermark, the idle shard's ticks
//     pkg/cep's.
//   - Strict contiguity (next). pkg/cep's next is strict among the events
//     of the types the rule names (docs/cep.md): an event of another type
//     in between does not break it, as pkg/cep never reads it for the rule.
//     A Flink job gets the same by filtering its input to those types before
//     the pattern, so the oracle gives each rule's operator only the events
//     of its types (the watermark still comes from every event).
//   - Lateness is compared on the events pkg/cep reads for some rule: an
//     event no rule's step matches (and of no type of a rule with strict
//     contiguity) only moves pkg/cep's watermark and is never judged late,
//     while the oracle's filtered input still has it; the oracle reports
//     only the others.
//   - Flink reads each event once. Lambda's redeliveries and producers'
//     copies reach only pkg/cep, which must ignore them: the oracle gets each
//     event once, in the order of its first arrival.
//   - Flink has no bound on partial matches; pkg/cep evicts a rule's oldest
//     past 64 per key. The histories never hold that many (a few per rule
//     and key are open at once); an eviction fails the test.
func (h *cepHistory) flink() flinkHistory {
	f := flinkHistory{ID: h.id(), OutOfOrdernessMs: cepOutOfOrderness.Milliseconds()}
	for _, r := range h.form.rules {
		f.Rules = append(f.Rules, json.RawMessage(r))
	}
	for _, a := range h.arrivals {
		if a.copy {
			continue
		}
		e := h.events[a.event]
		f.Events = append(f.Events, flinkEvent{ID: e.id, Type: e.typ, Key: e.key, T: e.t, Data: e.data})
	}
	return f
}

// flinkOracle is one running JVM of the oracle for every history of the
// test: a history in, its result out.
type flinkOracle struct{ *lineOracle }

func startFlinkOracle(t *testing.T) *flinkOracle {
	t.Helper()
	return &flinkOracle{startLineOracle(t, "the Flink CEP oracle", flinkJar, "")}
}

// run sends h to Flink and returns what it matched.
func (o *flinkOracle) run(t *testing.T, h flinkHistory) cepOutcome {
	t.Helper()
	var r flinkResult
	o.ask(t, h.ID, &h, &r)
	if r.ID != h.ID {
		t.Fatalf("the Flink CEP oracle answered for %q, not %q", r.ID, h.ID)
	}
	if r.Error != "" {
		t.Fatalf("Flink CEP failed on history %s: %s", h.ID, r.Error)
	}
	var out cepOutcome
	for _, m := range r.Matches {
		out.matches = append(out.matches, matchLine(m.Rule, m.Key, m.Events))
	}
	slices.Sort(out.matches)
	out.late = len(r.Late)
	return out
}

// TestFlinkCEPConformance runs seeded histories of every pattern form with
// a Flink equivalent through the detect function (cep.NewHandler, as
// functions/detect builds it, under Lambda's batches, redeliveries and
// producer copies) and through Flink CEP (the oracle in flinkcep/), and
// compares the matches — rule, key and the matched events' ids in order —
// and how many events each dropped as late. The alignments between the two
// are flinkHistory's; anything else is a mismatch.
//
//	go test ./conformance -run FlinkCEP                        # 3 seeds per form
//	go test ./conformance -run FlinkCEP -args -conformance.seeds=100
func TestFlinkCEPConformance(t *testing.T) {
	testtools.Need(t, "the Flink CEP conformance oracle (conformance/flinkcep) runs on a JDK 17 or later (apt-get install openjdk-17-jdk-headless)", "java")
	if stale, why := jarStale(flinkDir, flinkJar); stale {
		testtools.Need(t, "the Flink CEP conformance test builds its oracle (conformance/flinkcep: "+why+") with Maven (apt-get install maven)", "mvn")
	}
	start := time.Now()
	buildJar(t, "Flink CEP", flinkDir, flinkJar)
	o := startFlinkOracle(t)
	for _, form := range cepForms {
		var rules []*cep.Rule
		for _, doc := range form.rules {
			r, err := cep.ParseRule([]byte(doc))
			if err != nil {
				t.Fatalf("form %s: %v", form.name, err)
			}
			rules = append(rules, r)
		}
		histories, compared, flinkLate, ourLate := 0, 0, 0, 0
		for s := 1; s <= *seeds; s++ {
			h := newCEPHistory(form, uint64(s))
			t.Run(h.id(), func(t *testing.T) {
				want := o.run(t, h.flink())
				got := runDetect(t, h, rules)
				histories++
				compared += len(want.matches)
				flinkLate += want.late
				ourLate += got.late
				reportCEP(t, h, got, want)
			})
		}
		t.Logf("%-18s %3d histories: %5d Flink matches compared; dropped as late: Flink %d, detect %d", form.name, histories, compared, flinkLate, ourLate)
	}
	t.Logf("%d forms in %s (the oracle's JVM included)", len(cepForms), time.Since(start).Round(time.Millisecond))
}

// span is the event time from the first to the last event of a match line.
func (h *cepHistory) span(line string) string {
	ids := strings.Split(strings.Fields(line)[2], ",")
	t := func(id string) int64 {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "e"))
		return h.events[i].t
	}
	return fmt.Sprintf("%d ms from first to last", t(ids[len(ids)-1])-t(ids[0]))
}

// reportCEP fails t with what differs between got (the detect function)
// and want (Flink CEP), the events of the keys concerned, and the command
// that runs this history alone.
func reportCEP(t *testing.T, h *cepHistory, got, want cepOutcome) {
	t.Helper()
	var lines []string
	count := func(l []string) map[string]int {
		m := map[string]int{}
		for _, s := range l {
			m[s]++
		}
		return m
	}
	g, w := count(got.matches), count(want.matches)
	keys := map[string]bool{}
	for _, s := range slices.Compact(slices.Sorted(func(yield func(string) bool) {
		for _, s := range append(slices.Clone(got.matches), want.matches...) {
			if !yield(s) {
				return
			}
		}
	})) {
		if g[s] != w[s] {
			lines = append(lines, fmt.Sprintf("  %s (%s): Flink %d, detect %d", s, h.span(s), w[s], g[s]))
			keys[strings.Fields(s)[1]] = true
		}
	}
	if got.late != want.late {
		lines = append(lines, fmt.Sprintf("  dropped as late: Flink %d events, detect %d", want.late, got.late))
	}
	for _, p := range got.problems {
		lines = append(lines, "  "+p)
	}
	if len(lines) == 0 {
		return
	}
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("  ... and %d more", len(lines)-40))
	}
	var evs []string
	for i, e := range h.events {
		if keys[e.key] {
			data, _ := json.Marshal(e.data)
			evs = append(evs, fmt.Sprintf("  %s %s %s t=+%dms arrives +%dms %s", e.id, e.key, e.typ, e.t-base.UnixMilli(), h.arrive[i]-base.UnixMilli(), data))
		}
	}
	if len(evs) > 200 {
		evs = append(evs[:200], "  ...")
	}
	t.Errorf("the detect function's matches differ from %s's (rule key event ids):\n%s\nrules:\n  %s\nevents of those keys (by event time):\n%s\nrepro: go test ./conformance -run '%s$' -v -args -conformance.seeds=%d",
		flinkVersion, strings.Join(lines, "\n"), strings.Join(h.form.rules, "\n  "), strings.Join(evs, "\n"), t.Name(), h.seed)
}
