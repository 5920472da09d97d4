package join_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
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
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var (
	db             *dynamodb.Client
	kin            *kinesis.Client
	seeds          = flag.Int("fault.seeds", 4, "fault-injection scenarios per join kind on the in-process DynamoDB (internal/memdb); make soak runs many more")
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

// newResources creates, on the tests' stand-in, a join's state table, its
// output stream of one shard and a quarantine table, and returns their
// names.
func newResources(t *testing.T) (table, out, quarantine string) {
	t.Helper()
	ctx := context.Background()
	table, out, quarantine = name("join-state"), name("joins"), name("quarantine")
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, out, 1)
	return table, out, quarantine
}

// record is one generated input record of a shard.
type record struct {
	shard    string
	seq      int
	env      stream.Envelope
	copyOf   bool // a producer's copy: no effect
	conflict bool // the id reused with other content: set aside
}

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// scenario generates two shards of searches and clicks (and records of
// another type, which the join ignores): out of order within the allowed
// lateness, some late, clicks before and after their searches, producer
// copies (the same bytes, or re-sent with a new sentAt) and ids reused
// with other content.
func scenario(rng *rand.Rand) map[string][]record {
	out := map[string][]record{}
	for s := 0; s < 2; s++ {
		shard := fmt.Sprintf("shardId-00000000000%d", s)
		seq := 1 + rng.IntN(5)
		clock := base
		var history []record
		for i := 0; i < 50+rng.IntN(50); i++ {
			clock = clock.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			if len(history) > 0 && rng.IntN(6) == 0 {
				orig := history[rng.IntN(len(history))]
				cp := orig.env
				cp.ReceivedAt = clock
				if rng.IntN(2) == 0 {
					cp.SentAt = clock.Add(-orig.env.ReceivedAt.Sub(orig.env.SentAt))
					if cp.SentAt.Before(cp.OccurredAt) {
						cp.SentAt = cp.OccurredAt
					}
				}
				r := record{shard: shard, seq: seq, env: cp, copyOf: true}
				if rng.IntN(5) == 0 {
					r.conflict = true
					r.env.Data = json.RawMessage(`{"other":true}`)
				}
				out[shard] = append(out[shard], r)
				seq += 1 + rng.IntN(3)
				continue
			}
			et := clock.Add(-time.Duration(rng.IntN(6000)) * time.Millisecond)
			if rng.IntN(12) == 0 {
				et = clock.Add(-time.Duration(30+rng.IntN(60)) * time.Second) // late
			}
			typ := []string{"search", "search", "click", "click", "page_view"}[rng.IntN(5)]
			r := record{shard: shard, seq: seq, env: stream.Envelope{
				ID: fmt.Sprintf("%s-%d", shard[len(shard)-1:], seq), Type: typ, Key: fmt.Sprintf("sess-%d-%d", s, rng.IntN(4)),
				OccurredAt: et, SentAt: et, ReceivedAt: clock,
				Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			}}
			out[shard] = append(out[shard], r)
			history = append(history, r)
			seq += 1 + rng.IntN(3)
		}
	}
	return out
}

// reference is the join of the records that count (no copies, no reused
// ids), from each record's shard watermark at arrival: see the package
// doc. It returns one line per output.
func reference(c *join.Config, shards map[string][]record) []string {
	within, before, lateness := c.Within.Milliseconds(), c.Before.Milliseconds(), c.AllowedLateness.Milliseconds()
	type acc struct {
		key, id string
		left    bool
		t       int64
		matched bool
	}
	var out []string
	rates := map[string][2]int{}
	for _, recs := range shards {
		var accepted []*acc
		var maxT int64
		seen := false
		for _, r := range recs {
			if r.copyOf || (r.env.Type != c.Left && r.env.Type != c.Right) {
				continue
			}
			t := r.env.EventTime().UnixMilli()
			wm := int64(-1 << 62)
			if seen {
				wm = maxT - lateness
			}
			if !seen || t > maxT {
				maxT, seen = t, true
			}
			closeAt := func(a *acc) int64 {
				if a.left {
					return a.t + within + 1
				}
				return a.t + before + 1
			}
			a := &acc{key: r.env.Key, id: r.env.ID, left: r.env.Type == c.Left, t: t}
			if closeAt(a) <= wm {
				continue
			}
			for _, o := range accepted {
				if o.key != a.key || o.left == a.left || closeAt(o) <= wm {
					continue
				}
				l, rr := o, a
				if a.left {
					l, rr = a, o
				}
				if rr.t >= l.t-before && rr.t <= l.t+within {
					out = append(out, fmt.Sprintf("%s [%s, %s]", a.key, l.id, rr.id))
					l.matched, rr.matched = true, true
				}
			}
			accepted = append(accepted, a)
		}
		for _, a := range accepted {
			switch {
			case a.left:
				if !a.matched && c.Kind != join.Inner {
					out = append(out, fmt.Sprintf("%s [%s, null]", a.key, a.id))
				}
				size := c.RateWindow.Milliseconds()
				k := a.key + " " + strconv.FormatInt(a.t-a.t%size, 10)
				v := rates[k]
				v[0]++
				if a.matched {
					v[1]++
				}
				rates[k] = v
			case !a.matched && c.Kind == join.Outer:
				out = append(out, fmt.Sprintf("%s [null, %s]", a.key, a.id))
			}
		}
	}
	for k, v := range rates {
		key, start, _ := strings.Cut(k, " ")
		ms, _ := strconv.ParseInt(start, 10, 64)
		out = append(out, fmt.Sprintf("%s rate(%s %d/%d)", key, time.UnixMilli(ms).UTC().Format("15:04:05"), v[1], v[0]))
	}
	sort.Strings(out)
	return out
}

func kinesisRecords(recs []record) []events.KinesisEventRecord {
	out := make([]events.KinesisEventRecord, len(recs))
	for i, r := range recs {
		out[i] = keyedtest.EventRecord(r.shard, r.seq, r.env)
	}
	return out
}

// describe reads the output stream: one line per distinct output id, and
// fails the test if two records with one id differ.
func describe(t *testing.T, recs [][]byte) []string {
	t.Helper()
	return keyedtest.Distinct(t, recs, func(env *stream.Envelope, raw []byte) string {
		switch env.Type {
		case join.TypeJoined, join.TypeUnmatched:
			var d join.Data
			if err := json.Unmarshal(env.Data, &d); err != nil {
				t.Fatal(err)
			}
			l, r := "null", "null"
			if d.Left != nil {
				l = d.Left.ID
			}
			if d.Right != nil {
				r = d.Right.ID
			}
			return fmt.Sprintf("%s [%s, %s]", env.Key, l, r)
		case join.TypeRate:
			var d join.RateData
			if err := json.Unmarshal(env.Data, &d); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%s rate(%s %d/%d)", env.Key, d.Start.Format("15:04:05"), d.Matched, d.Left)
		}
		t.Errorf("output of type %q: %s", env.Type, raw)
		return "unexpected " + env.Type
	})
}

// faultBackend is where a scenario's state and quarantine tables and its
// output stream live: moto (emulator/standin, the package's shared one) or
// the in-process DynamoDB (internal/memdb) with a stream in memory, which
// answers the join's requests as moto does, so that thousands of scenarios
// run in minutes.
type faultBackend struct {
	name string
	// open returns the DynamoDB holding a new state table and a new
	// quarantine table, their names, the output stream's client and name,
	// a reader of the stream and a reader of the quarantine table's items.
	open func(t *testing.T) (store memdb.Client, table, quarantine string, out emit.Putter, outName string,
		read func() [][]byte, aside func() int)
}

var (
	onMemdb = faultBackend{name: "memdb", open: func(t *testing.T) (memdb.Client, string, string, emit.Putter, string, func() [][]byte, func() int) {
		mem := memdb.New(map[string]memdb.Schema{"join-state": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
		out := &keyedtest.Stream{}
		return mem, "join-state", "quarantine", out, "joins", out.Records, func() int { return len(mem.Items("quarantine")) }
	}}
	onMoto = faultBackend{name: "moto", open: func(t *testing.T) (memdb.Client, string, string, emit.Putter, string, func() [][]byte, func() int) {
		ctx := context.Background()
		table, out, quarantine := newResources(t)
		return db, table, quarantine, kin, out, func() [][]byte { return keyedtest.ReadAll(t, kin, out) }, func() int {
			items, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(quarantine)})
			if err != nil {
				t.Fatal(err)
			}
			return int(items.Count)
		}
	}}
)

// TestFaultInjectionOutputsEqualReference plays seeded histories through
// the join under Lambda's retry patterns, state writes whose answer is
// lost and producer copies, then compares the distinct records on the
// joins stream
// with the reference: zero mismatches, every id always with the same
// content, and every reused id set aside. The scenarios run on memdb, and
// the first -fault.moto of each kind on moto too, so that memdb cannot
// drift from it; a failing one prints the command that runs it alone.
func TestFaultInjectionOutputsEqualReference(t *testing.T) {
	first := *faultFirstSeed
	for _, kind := range []string{"inner", "left", "outer"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, b := range []struct {
				backend faultBackend
				n       int
			}{{onMoto, min(*faultMotoSeeds, *seeds)}, {onMemdb, *seeds}} {
				t.Run(b.backend.name, func(t *testing.T) {
					t.Parallel()
					for seed := first; seed < first+b.n; seed++ {
						t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
							t.Parallel()
							t.Cleanup(func() {
								if t.Failed() {
									t.Logf("run this scenario alone: go test -count=1 -run '^TestFaultInjectionOutputsEqualReference$/^%s$/^%s$/^seed-%d$' ./pkg/join -args -fault.seed=%d",
										kind, b.backend.name, seed, seed)
								}
							})
							joinScenario(t, kind, b.backend, seed)
						})
					}
				})
			}
		})
	}
}

// joinScenario plays one seeded scenario of a join kind on backend.
func joinScenario(t *testing.T, kind string, backend faultBackend, seed int) {
	cfg, err := join.Parse([]byte(fmt.Sprintf(`{"name":"faults","left":"search","right":"click","within":"20s","before":"5s","joinType":%q,"allowedLateness":"3s","rateWindow":"30s","idleTimeout":"10s"}`, kind)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, table, quarantine, kout, out, read, aside := backend.open(t)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(len(kind))))
	shards := scenario(rng)
	sink := setaside.New(store, quarantine)
	var wg sync.WaitGroup
	var crashes []*keyedtest.Budget
	var mappings []*keyedtest.Mapping
	for shard, recs := range shards {
		bd, bk := keyedtest.NewBudget(6), keyedtest.NewBudget(2)
		fdb, fkin := &keyedtest.DB{Client: store, B: bd, ThrottleEvery: 40, LoseEvery: 20, Rng: rand.New(rand.NewPCG(uint64(seed), 7+uint64(len(recs))))}, &keyedtest.Kinesis{Putter: kout, B: bk}
		crashes = append(crashes, bd, bk)
		m := &keyedtest.Mapping{T: t, Rng: rand.New(rand.NewPCG(uint64(seed), uint64(len(shard)+len(recs)))), Budgets: []*keyedtest.Budget{bd, bk}, MaxBatch: 8,
			New: func() keyedtest.Handler {
				views := state.NewViews(fdb, table, nil)
				return join.New(cfg, views, fkin, out, join.DefaultLimits, keyed.WithLogger(quiet), keyed.WithSetAside(sink),
					keyed.WithDedupe(keyed.NewLedger(fdb, table, cfg.Name, cfg.DedupeHorizon)), keyed.WithBackoff(func(int) time.Duration { return time.Millisecond }))
			}}
		mappings = append(mappings, m)
		wg.Add(1)
		go func() { defer wg.Done(); m.Run(kinesisRecords(recs)) }()
	}
	wg.Wait()
	// Close everything: ticks long after the last event.
	h := join.New(cfg, state.NewViews(store, table, nil), kout, out, join.DefaultLimits, keyed.WithLogger(quiet))
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	got := describe(t, read())
	want := reference(cfg, shards)
	if d := diff(got, want); d != "" {
		for _, m := range mappings {
			t.Logf("pattern: %v", m.Log)
		}
		t.Fatalf("outputs differ from the reference (%d got, %d want):\n%s", len(got), len(want), d)
	}
	conflicts := 0
	for _, recs := range shards {
		for _, r := range recs {
			if r.conflict && (r.env.Type == cfg.Left || r.env.Type == cfg.Right) {
				conflicts++ // the join reads no other type, so it sees no other reuse
			}
		}
	}
	if n := aside(); n != conflicts {
		t.Errorf("%d records set aside, want the %d reused ids", n, conflicts)
	}
	t.Logf("%d outputs, %d reused ids set aside; injected crashes: DynamoDB %d+%d, Kinesis %d+%d", len(want), conflicts,
		crashes[0].Crashes(), crashes[2].Crashes(), crashes[1].Crashes(), crashes[3].Crashes())
}

func diff(got, want []string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	for _, s := range want {
		w[s] = true
	}
	var b strings.Builder
	for _, s := range want {
		if !g[s] {
			fmt.Fprintf(&b, "  missing    %s\n", s)
		}
	}
	for _, s := range got {
		if !w[s] {
			fmt.Fprintf(&b, "  unexpected %s\n", s)
		}
	}
	return b.String()
}
