package cep

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var (
	db             *dynamodb.Client
	kin            *kinesis.Client
	seeds          = flag.Int("fault.seeds", 4, "CEP fault-injection scenarios on the in-process DynamoDB (internal/memdb); make soak runs many more")
	faultMotoSeeds = flag.Int("fault.moto", 1, "of those scenarios, how many (the first) also run on moto, so that memdb cannot drift from it")
	faultFirstSeed = flag.Int("fault.seed", 1, "the first scenario's seed: a failing scenario prints the command that runs it alone")
	names          atomic.Int64
	quiet          = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		db, kin = dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	}))
}

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

type shardRecord struct {
	shard  string
	seq    int
	env    stream.Envelope
	copyOf bool
}

// staticRules is a RuleSource of rules active from the start that never
// change.
type staticRules []*StoredRule

func newStaticRules(rules []*Rule) staticRules {
	stored := make(staticRules, len(rules))
	for i, r := range rules {
		stored[i] = &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}}
	}
	return stored
}

func (s staticRules) Version(context.Context) (int64, error)      { return 1, nil }
func (s staticRules) List(context.Context) ([]*StoredRule, error) { return s, nil }

// faultBackend is where a scenario's state and quarantine tables and its
// matches stream live: moto (emulator/standin, the package's shared one)
// or the in-process DynamoDB (internal/memdb) with a stream in memory,
// which answers CEP's requests as moto does, so that thousands of
// scenarios run in minutes.
type faultBackend struct {
	name string
	// open returns the DynamoDB holding a new state table and a new
	// quarantine table, their names, the matches stream's client and name,
	// a reader of the stream and a reader of the sequence numbers set aside.
	open func(t *testing.T) (store memdb.Client, table, quarantine string, out emit.Putter, outName string,
		read func() [][]byte, aside func() []string)
}

var (
	onMemdb = faultBackend{name: "memdb", open: func(t *testing.T) (memdb.Client, string, string, emit.Putter, string, func() [][]byte, func() []string) {
		mem := memdb.New(map[string]memdb.Schema{"cep-state": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
		out := &keyedtest.Stream{}
		return mem, "cep-state", "quarantine", out, "matches", out.Records, func() []string { return setAsideSeqs(mem.Items("quarantine")) }
	}}
	onMoto = faultBackend{name: "moto", open: func(t *testing.T) (memdb.Client, string, string, emit.Putter, string, func() [][]byte, func() []string) {
		ctx := context.Background()
		table, out, quarantine := name("cep-state"), name("matches"), name("quarantine")
		if err := state.CreateTable(ctx, db, table); err != nil {
			t.Fatal(err)
		}
		if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
			t.Fatal(err)
		}
		keyedtest.CreateStream(t, kin, out, 1)
		return db, table, quarantine, kin, out, func() [][]byte { return keyedtest.ReadAll(t, kin, out) }, func() []string {
			scan, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
			if err != nil {
				t.Fatal(err)
			}
			return setAsideSeqs(scan.Items)
		}
	}}
)

// setAsideSeqs returns the sequence numbers of a quarantine table's items, sorted.
func setAsideSeqs(items []map[string]ddbtypes.AttributeValue) []string {
	var out []string
	for _, it := range items {
		if s, ok := it["sequenceNumber"].(*ddbtypes.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	sort.Strings(out)
	return out
}

// seededScenarios runs run for n seeds from -fault.seed on memdb and the
// first -fault.moto of them on moto too, each a parallel subtest named by
// its backend and seed; a failing one prints the command that runs it alone.
func seededScenarios(t *testing.T, test string, n int, run func(t *testing.T, backend faultBackend, seed int)) {
	keyedtest.Seeds{Test: test, Package: "./pkg/cep", First: *faultFirstSeed, N: n, Moto: *faultMotoSeeds}.Run(t,
		func(t *testing.T, backend string, seed int) {
			b := onMemdb
			if backend == onMoto.name {
				b = onMoto
			}
			run(t, b, seed)
		})
}

// TestFaultInjectionMatchesEqualReference plays seeded histories (out of
// order, late events, producer copies) through the CEP handler under
// Lambda's retry patterns, with a rule of every form, and compares the
// distinct match records on the matches stream with the reference: zero
// mismatches, and every match id always with one content. The scenarios
// run on memdb, the first -fault.moto on moto too.
func TestFaultInjectionMatchesEqualReference(t *testing.T) {
	var rules []*Rule
	for _, doc := range randomRules {
		rules = append(rules, rule(t, doc))
	}
	seededScenarios(t, "TestFaultInjectionMatchesEqualReference", *seeds, func(t *testing.T, backend faultBackend, seed int) {
		cepScenario(t, rules, backend, seed)
	})
}

// TestFaultsFoundBySoak replays scenarios make soak found failing, on
// memdb, so that make test keeps them fixed: seed 2340 has a producer's
// copy in a batch whose key's ledger write failed; the copy moved the
// watermark (it would not once judged a copy on the retry), and a record
// after it was folded as late.
func TestFaultsFoundBySoak(t *testing.T) {
	var rules []*Rule
	for _, doc := range randomRules {
		rules = append(rules, rule(t, doc))
	}
	for _, seed := range []int{2340} {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			cepScenario(t, rules, onMemdb, seed)
		})
	}
}

// cepScenario plays one seeded scenario on backend.
func cepScenario(t *testing.T, rules []*Rule, backend faultBackend, seed int) {
	rs := NewRuleSet(newStaticRules(rules), base)
	cfg := &Config{Name: "faults", OutOfOrderness: 3 * time.Second, IdleTimeout: 10 * time.Second, DedupeHorizon: time.Hour}
	ctx := context.Background()
	store, table, quarantine, kout, out, read, asideSeqs := backend.open(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 17))
	shards := map[string][]shardRecord{}
	var refused []string // the sequence numbers of records with such a value
	for s := 0; s < 2; s++ {
		shard := fmt.Sprintf("shardId-00000000000%d", s)
		seq := 1 + rng.IntN(5)
		evs := randomHistory(rng, 50+rng.IntN(50))
		var history []stream.Envelope
		for i, e := range evs {
			e.ID = fmt.Sprintf("%d-%s", s, e.ID)
			e.Key = fmt.Sprintf("s%d-%s", s, e.Key)
			if e.Type == "B" && rng.IntN(8) == 0 {
				// A value the sum rule cannot add: it skips the event, the
				// other rules reading B still match it, and it is set
				// aside once, whatever the retries.
				e.Data = json.RawMessage(`{"v":1e300}`)
				refused = append(refused, strconv.Itoa(seq))
			}
			shards[shard] = append(shards[shard], shardRecord{shard: shard, seq: seq, env: e})
			history = append(history, e)
			seq += 1 + rng.IntN(3)
			if rng.IntN(6) == 0 {
				// A producer resends an earlier event (same bytes, new arrival).
				cp := history[rng.IntN(len(history))]
				cp.ReceivedAt = evs[i].ReceivedAt
				shards[shard] = append(shards[shard], shardRecord{shard: shard, seq: seq, env: cp, copyOf: true})
				seq += 1 + rng.IntN(3)
			}
		}
	}
	sink := setaside.New(store, quarantine)
	var wg sync.WaitGroup
	var mappings []*keyedtest.Mapping
	for shard, recs := range shards {
		bd, bk := keyedtest.NewBudget(6), keyedtest.NewBudget(2)
		fdb, fkin := &keyedtest.DB{Client: store, B: bd, ThrottleEvery: 40, LoseEvery: 20, Rng: rand.New(rand.NewPCG(uint64(seed), 7+uint64(len(recs))))}, &keyedtest.Kinesis{Putter: kout, B: bk}
		m := &keyedtest.Mapping{T: t, Rng: rand.New(rand.NewPCG(uint64(seed), uint64(len(shard)+len(recs)))), Budgets: []*keyedtest.Budget{bd, bk}, MaxBatch: 8,
			New: func() keyedtest.Handler {
				return NewHandler(cfg, state.NewViews(fdb, table, nil), fkin, out, newStaticRules(rules), func() time.Time { return base },
					keyed.WithLogger(quiet), keyed.WithSetAside(sink), keyed.WithBackoff(func(int) time.Duration { return time.Millisecond }),
					keyed.WithDedupe(keyed.NewLedger(fdb, table, cfg.Name, cfg.DedupeHorizon)))
			}}
		mappings = append(mappings, m)
		wg.Add(1)
		go func() { defer wg.Done(); m.Run(kinesisRecords(recs)) }()
	}
	wg.Wait()
	h := NewHandler(cfg, state.NewViews(store, table, nil), kout, out, newStaticRules(rules), func() time.Time { return base }, keyed.WithLogger(quiet))
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	got := describeMatches(t, read())
	want := referenceOfShards(rs, rules, shards, cfg.OutOfOrderness)
	if d := diff(got, want); d != "" {
		for _, m := range mappings {
			t.Logf("pattern: %v", m.Log)
		}
		t.Fatalf("matches differ from the reference (%d got, %d want):\n%s", len(got), len(want), d)
	}
	sort.Strings(refused)
	if aside := asideSeqs(); !slices.Equal(aside, refused) {
		t.Errorf("set aside the records at %v; want those whose value the sum rule cannot add, %v", aside, refused)
	}
	t.Logf("%d matches, %d records set aside for the sum rule", len(want), len(refused))
}

// referenceOfShards is the reference over each shard: a copy of an event
// some rule reads has no effect; any other record only moves the
// watermark; events older than the watermark when they arrive are late.
func referenceOfShards(rs *RuleSet, rules []*Rule, shards map[string][]shardRecord, ooo time.Duration) []string {
	var want []string
	for _, recs := range shards {
		byKey := map[string][]refEvent{}
		var wm int64
		seen := false
		for _, r := range recs {
			hits, _ := rs.hits(nil, &r.env, r.env.Key, r.env.ReceivedAt)
			relevant := len(hits) > 0
			if r.copyOf && relevant {
				continue
			}
			et := r.env.EventTime().UnixMilli()
			if !r.copyOf && (!seen || et >= wm) {
				byKey[r.env.Key] = append(byKey[r.env.Key], refEvent{env: r.env, t: et})
			}
			if w := et - ooo.Milliseconds(); !seen || w > wm {
				wm, seen = w, true
			}
		}
		for key, list := range byKey {
			sort.SliceStable(list, func(i, j int) bool { return list[i].t < list[j].t })
			for _, r := range rules {
				want = append(want, reference(r, key, list)...)
			}
		}
	}
	sort.Strings(want)
	return want
}

func kinesisRecords(recs []shardRecord) []events.KinesisEventRecord {
	out := make([]events.KinesisEventRecord, len(recs))
	for i, r := range recs {
		out[i] = keyedtest.EventRecord(r.shard, r.seq, r.env)
	}
	return out
}

// describeMatches names the distinct matches on the stream "rule:key:ids",
// failing the test if one id comes with two contents.
func describeMatches(t *testing.T, recs [][]byte) []string {
	t.Helper()
	return keyedtest.Distinct(t, recs, func(env *stream.Envelope, _ []byte) string {
		var d MatchData
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range d.Events {
			ids = append(ids, e.ID)
		}
		return fmt.Sprintf("%s:%s:%s", d.Rule, env.Key, strings.Join(ids, ","))
	})
}

func diff(got, want []string) string {
	count := func(l []string) map[string]int {
		m := map[string]int{}
		for _, s := range l {
			m[s]++
		}
		return m
	}
	g, w := count(got), count(want)
	var b strings.Builder
	for s, n := range w {
		if g[s] != n {
			fmt.Fprintf(&b, "  %s: got %d, want %d\n", s, g[s], n)
		}
	}
	for s, n := range g {
		if _, ok := w[s]; !ok {
			fmt.Fprintf(&b, "  %s: got %d, want 0\n", s, n)
		}
	}
	return b.String()
}

// cutOutcome is what one way of cutting a shard's records into batches
// gave: the distinct matches, the sequence numbers set aside, the
// invocations it took (fold checkpoints make more) and the largest state
// blob written.
type cutOutcome struct {
	matches     []string
	aside       []string
	invocations int
	biggest     int
}

// blobWatch is the state table's client noting the largest binary value
// any write sets: a key's state blob.
type blobWatch struct {
	memdb.Client
	mu      sync.Mutex
	biggest int
}

func (w *blobWatch) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	w.mu.Lock()
	for _, v := range in.ExpressionAttributeValues {
		if b, ok := v.(*ddbtypes.AttributeValueMemberB); ok {
			w.biggest = max(w.biggest, len(b.Value))
		}
	}
	w.mu.Unlock()
	return w.Client.UpdateItem(ctx, in, opts...)
}

// playCuts plays recs to a new CEP handler on backend in the batches next
// cuts (the size of the batch starting at pos), resuming where the handler
// reports its first failure as Lambda does, then ticks past every rule's
// time.
func playCuts(t *testing.T, backend faultBackend, rules []*Rule, budget int, recs []events.KinesisEventRecord, next func(pos int) int) cutOutcome {
	t.Helper()
	ctx := context.Background()
	// The matches go to a stream in memory on either backend: what is
	// compared is the state and the records set aside.
	store, table, quarantine, _, _, _, aside := backend.open(t)
	mem := &keyedtest.Stream{}
	out, outName, read := mem, "matches", mem.Records
	watch := &blobWatch{Client: store}
	cfg := &Config{Name: "cuts", OutOfOrderness: 3 * time.Second, IdleTimeout: 10 * time.Second}
	h := NewHandler(cfg, state.NewViews(watch, table, nil), out, outName, newStaticRules(rules), func() time.Time { return base },
		keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(store, quarantine)))
	if budget > 0 {
		h.Operator().maxBytes = budget
	}
	var res cutOutcome
	for pos, stuck := 0, 0; pos < len(recs); {
		b := recs[pos:min(pos+next(pos), len(recs))]
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: b})
		res.invocations++
		if err != nil {
			t.Fatalf("batch at %d (%d records): %v", pos, len(b), err)
		}
		done := len(b)
		if len(resp.BatchItemFailures) > 0 {
			for i, r := range b {
				if r.Kinesis.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
					done = i
				}
			}
		}
		if done == 0 {
			if stuck++; stuck > 20 {
				t.Fatalf("the batch at %d keeps failing", pos)
			}
		}
		pos += done
	}
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	res.matches = describeMatches(t, read())
	res.biggest = watch.biggest
	if res.biggest > keyed.DefaultMaxStateBytes {
		t.Fatalf("a state blob of %d bytes was written: past the %d bytes an item holds", res.biggest, keyed.DefaultMaxStateBytes)
	}
	res.aside = aside()
	return res
}

// TestSetAsideDoesNotDependOnBatchCuts plays the same records of one key
// cut into batches in several ways — one at a time, tens, random sizes,
// one batch of everything — and expects the same matches and the same
// records set aside every way: a key's budget counts its state, never the
// matches of the batch not yet sent, and a fold checkpoint (the batch cut
// short, the rest coming again) changes nothing but the invocations.
func TestSetAsideDoesNotDependOnBatchCuts(t *testing.T) {
	filters := func(n int) []*Rule {
		var rules []*Rule
		for i := range n {
			rules = append(rules, rule(t, fmt.Sprintf(`{"id":"r%03d","pattern":[{"begin":"p","type":"payment"}]}`, i)))
		}
		return rules
	}
	payments := func(n int) []events.KinesisEventRecord {
		var recs []shardRecord
		for i := range n {
			recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + i,
				env: ev(fmt.Sprintf("pay-%03d", i), "payment", "acct-1", float64(i), `{"amount":10}`)})
		}
		return kinesisRecords(recs)
	}
	// burst is n payments 40 ms apart, all within outOfOrderness, with
	// 256-byte ids, then an event no rule reads, 10 s later, whose time
	// moves the watermark past all of them.
	burst := func(n int) []events.KinesisEventRecord {
		var recs []shardRecord
		for i := range n {
			id := fmt.Sprintf("pay-%03d-", i)
			recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + i,
				env: ev(id+strings.Repeat("x", stream.MaxIDLength-len(id)), "payment", "acct-1", float64(i)*0.04, `{"amount":10}`)})
		}
		recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + n, env: ev("later", "heartbeat", "acct-1", 10, "")})
		return kinesisRecords(recs)
	}
	for _, c := range []struct {
		name   string
		rules  []*Rule
		budget int // 0: DefaultMaxStateBytes
		recs   []events.KinesisEventRecord
	}{
		{"120 filters, 150 payments of one key", filters(120), 0, payments(150)},
		{"a count holding every payment past a small budget, and 20 filters", append(filters(20),
			rule(t, `{"id":"hold","pattern":[{"begin":"p","type":"payment","timesOrMore":1000}],"within":"1h"}`)), 6000, payments(120)},
		{"120 filters, a burst of 60 payments with 256-byte ids passed by the watermark at once", filters(120), 0, burst(60)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(7, uint64(len(c.recs))))
			// On memdb, and one cut on moto too, so that memdb cannot drift from it.
			cuts := []struct {
				name    string
				backend faultBackend
				next    func(pos int) int
			}{
				{"one at a time", onMemdb, func(int) int { return 1 }},
				{"batches of 10", onMemdb, func(int) int { return 10 }},
				{"random batches", onMemdb, func(int) int { return 1 + rng.IntN(60) }},
				{"one batch of everything", onMemdb, func(int) int { return len(c.recs) }},
				{"batches of 10 on moto", onMoto, func(int) int { return 10 }},
			}
			var first cutOutcome
			for i, cut := range cuts {
				got := playCuts(t, cut.backend, c.rules, c.budget, c.recs, cut.next)
				t.Logf("%s: %d matches, %d set aside, %d invocations, largest state %d bytes", cut.name, len(got.matches), len(got.aside), got.invocations, got.biggest)
				if i == 0 {
					first = got
					continue
				}
				if d := diff(got.matches, first.matches); d != "" || strings.Join(got.aside, " ") != strings.Join(first.aside, " ") {
					t.Errorf("%s: %d matches and %d set aside %v; %s gave %d and %d %v; matches differing:\n%s", cut.name,
						len(got.matches), len(got.aside), got.aside, cuts[0].name, len(first.matches), len(first.aside), first.aside, d)
				}
			}
		})
	}
}

// TestRandomBurstsNeverWedgeAKey is the budget's property through the
// runner, on memdb (the first -fault.moto seeds on moto too): random rule sets and bursts of one shard
// (randomBurstRules, randomBursts), played one record a batch, in random
// batches and in one batch. Every batch makes progress (none is retried
// for ever), every tick succeeds, no state blob written is past what an
// item holds, and every cut sets aside the same records and makes the same
// matches.
func TestRandomBurstsNeverWedgeAKey(t *testing.T) {
	seededScenarios(t, "TestRandomBurstsNeverWedgeAKey", *seeds, func(t *testing.T, backend faultBackend, seed int) {
		rng := rand.New(rand.NewPCG(uint64(seed), 29))
		rules := randomBurstRules(t, rng, 150)
		var recs []shardRecord
		for i, e := range randomBursts(rng, 160+rng.IntN(100)) {
			recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + i, env: e})
		}
		records := kinesisRecords(recs)
		cuts := []struct {
			name string
			next func(pos int) int
		}{
			{"one at a time", func(int) int { return 1 }},
			{"random batches", func(int) int { return 1 + rng.IntN(60) }},
			{"one batch of everything", func(int) int { return len(records) }},
		}
		var first cutOutcome
		for i, cut := range cuts {
			got := playCuts(t, backend, rules, 0, records, cut.next)
			t.Logf("%d rules, %d records, %s: %d matches, %d set aside, %d invocations, largest state %d bytes",
				len(rules), len(records), cut.name, len(got.matches), len(got.aside), got.invocations, got.biggest)
			if i == 0 {
				first = got
				continue
			}
			if d := diff(got.matches, first.matches); d != "" || strings.Join(got.aside, " ") != strings.Join(first.aside, " ") {
				t.Errorf("%s: %d matches and %d set aside; %s gave %d and %d; matches differing:\n%s", cut.name,
					len(got.matches), len(got.aside), cuts[0].name, len(first.matches), len(first.aside), d)
			}
		}
	})
}
