package handler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
)

// TestFaultInjectionResultsEqualReference plays seeded histories (three
// keys, producer copies, out-of-order and late records) through a windowed
// handler under Lambda's retry patterns — redelivered and concurrent
// duplicate batches, crashes between two writes (DynamoDB or Kinesis),
// bisected and checkpointed retries, cold starts — against the stand-in,
// and compares the distinct results on the output stream with a reference
// computed in memory: every window once, every distinct record counted once.
func TestFaultInjectionResultsEqualReference(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			cfg := setup(t)
			const ooo = 5 * time.Second
			// The history: 120 records over ~5 minutes of event time.
			var recs []rec
			var at float64
			for i := range 120 {
				at += rng.Float64() * 2.5
				t := at
				if rng.IntN(8) == 0 {
					t -= rng.Float64() * 12 // out of order, sometimes late
				}
				env := request(fmt.Sprint("e", i), fmt.Sprint("/k", rng.IntN(3)), t, fmt.Sprintf(`{"ms":%d}`, rng.IntN(50)))
				recs = append(recs, rec{seq: 100 + len(recs), env: env})
				if rng.IntN(10) == 0 { // the producer sends it again
					recs = append(recs, rec{seq: 100 + len(recs), env: env})
				}
			}
			// The reference: the watermark before each distinct record is the
			// newest event time before it minus the out-of-orderness.
			want := map[string]*Tally{}
			seen := map[string]bool{}
			var newest time.Time
			for _, r := range recs {
				if seen[r.env.ID] {
					continue
				}
				seen[r.env.ID] = true
				et := r.env.EventTime()
				start := et.Truncate(time.Minute)
				if newest.IsZero() || !start.Add(time.Minute).Before(newest.Add(-ooo).Add(time.Nanosecond)) {
					k := r.env.Key + " " + start.Format("15:04:05")
					if want[k] == nil {
						want[k] = &Tally{}
					}
					v, _ := strings.CutPrefix(string(r.env.Data), `{"ms":`)
					var ms int64
					fmt.Sscan(strings.TrimSuffix(v, "}"), &ms)
					want[k].Add(ms)
				}
				if et.After(newest) {
					newest = et
				}
			}

			dbBudget, kinBudget := keyedtest.NewBudget(6), keyedtest.NewBudget(2)
			fcfg := cfg
			fcfg.DynamoDB = &keyedtest.DB{Client: db, B: dbBudget}
			fcfg.Kinesis = &keyedtest.Kinesis{Putter: kin, B: kinBudget}
			var last *handler.Handler
			m := &keyedtest.Mapping{T: t, Rng: rng, Budgets: []*keyedtest.Budget{dbBudget, kinBudget}, MaxBatch: 20,
				New: func() keyedtest.Handler {
					h, err := handler.NewWindowed[Tally](fcfg, selectLatency, handler.WithOutOfOrderness(ooo), handler.WithLogger(quiet),
						handler.WithMetrics(nil), handler.WithDedupeHorizon(time.Hour))
					if err != nil {
						t.Fatal(err)
					}
					last = h
					return h
				}}
			m.Run(kinesisRecords(recs))
			// Close the rest: the idle shard's watermark moves by processing time.
			for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
				if _, err := last.Tick(context.Background(), at); err != nil {
					t.Fatal(err)
				}
			}

			byID, n := results(t, cfg.OutputStream)
			got := map[string]string{}
			for _, r := range byID {
				got[r.Key+" "+r.WindowStart.Format("15:04:05")] = fmt.Sprintf("%d %s", r.Records, r.Result)
			}
			for k, w := range want {
				res, _ := w.MarshalJSON()
				if g, exp := got[k], fmt.Sprintf("%d %s", w.N, res); g != exp {
					t.Errorf("%s: got %q, want %q", k, g, exp)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d windows, want %d", len(got), len(want))
			}
			if t.Failed() {
				t.Logf("played: %v", m.Log)
			}
			t.Logf("seed %d: %d records, %d windows, %d output records (%d resent copies), %d crashes", seed, len(recs), len(want), n, n-len(byID), dbBudget.Crashes()+kinBudget.Crashes())
		})
	}
}

// TestFaultInjectionEveryKindAndPolicy plays a seeded history through a
// handler of each window kind under each late policy, once under Lambda's
// retry patterns with crashes (as TestFaultInjectionResultsEqualReference)
// and once cleanly (each record delivered once, in batches of ten), and
// compares every window's last result: the same windows with the same
// values, whatever was redelivered or crashed; a window's revisions on the
// stream are 1, 2, … with one content per id (results fails otherwise).
// Which revisions a window has depends on how the batches were cut
// (corrections come at a batch's end), its last value does not.
func TestFaultInjectionEveryKindAndPolicy(t *testing.T) {
	correct := []handler.Option{handler.WithLatePolicy(handler.Correct), handler.WithAllowedLateness(10 * time.Second)}
	for _, c := range []struct {
		name string
		opts []handler.Option
	}{
		{"tumbling/drop", []handler.Option{handler.WithWindow(time.Minute)}},
		{"tumbling/correct", append([]handler.Option{handler.WithWindow(time.Minute)}, correct...)},
		{"hopping/drop", []handler.Option{handler.WithHopping(time.Minute, 20*time.Second)}},
		{"hopping/correct", append([]handler.Option{handler.WithHopping(time.Minute, 20*time.Second)}, correct...)},
		{"sliding/drop", []handler.Option{handler.WithSliding(10 * time.Second)}},
		{"sliding/correct", append([]handler.Option{handler.WithSliding(10 * time.Second)}, correct...)},
		{"session/drop", []handler.Option{handler.WithSession(3 * time.Second)}},
		{"session/correct", append([]handler.Option{handler.WithSession(3 * time.Second)}, correct...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(len(c.name)), 19))
			var recs []rec
			var at float64
			for i := range 120 {
				at += rng.Float64() * 4
				t := at
				if rng.IntN(6) == 0 {
					t -= rng.Float64() * 25 // out of order, some late, some too late to correct
				}
				env := request(fmt.Sprint("e", i), fmt.Sprint("/k", rng.IntN(3)), t, fmt.Sprintf(`{"ms":%d}`, rng.IntN(50)))
				recs = append(recs, rec{seq: 100 + len(recs), env: env})
				if rng.IntN(10) == 0 { // the producer sends it again
					recs = append(recs, rec{seq: 100 + len(recs), env: env})
				}
			}
			opts := append([]handler.Option{handler.WithOutOfOrderness(5 * time.Second), handler.WithLogger(quiet), handler.WithMetrics(nil)}, c.opts...)
			closeAll := func(h *handler.Handler) {
				for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
					if _, err := h.Tick(ctx, at); err != nil {
						t.Fatal(err)
					}
				}
			}

			// The reference: every record once. State lives in memdb (one
			// per run, in process: the eight cases run at once), results on
			// moto's Kinesis; TestFaultInjectionResultsEqualReference runs
			// the same harness with its state on moto.
			clean := setupOnMemdb(t)
			h, err := handler.NewWindowed[Tally](clean, selectLatency, opts...)
			if err != nil {
				t.Fatal(err)
			}
			all := kinesisRecords(recs)
			for i := 0; i < len(all); i += 10 {
				mustBatch(t, h, all[i:min(i+10, len(all))])
			}
			closeAll(h)
			wantByID, _ := results(t, clean.OutputStream)
			want := lastResults(t, wantByID)

			// Under faults.
			cfg := setupOnMemdb(t)
			dbBudget, kinBudget := keyedtest.NewBudget(6), keyedtest.NewBudget(2)
			fcfg := cfg
			fcfg.DynamoDB = &keyedtest.DB{Client: cfg.DynamoDB.(*memdb.DB), B: dbBudget}
			fcfg.Kinesis = &keyedtest.Kinesis{Putter: kin, B: kinBudget}
			var last *handler.Handler
			m := &keyedtest.Mapping{T: t, Rng: rng, Budgets: []*keyedtest.Budget{dbBudget, kinBudget}, MaxBatch: 20,
				New: func() keyedtest.Handler {
					h, err := handler.NewWindowed[Tally](fcfg, selectLatency, opts...)
					if err != nil {
						t.Fatal(err)
					}
					last = h
					return h
				}}
			m.Run(all)
			closeAll(last)
			gotByID, n := results(t, cfg.OutputStream)
			got := lastResults(t, gotByID)

			for w, v := range want {
				if got[w] != v {
					t.Errorf("%s: got %q, want %q", w, got[w], v)
				}
			}
			for w, v := range got {
				if _, ok := want[w]; !ok {
					t.Errorf("%s: got %q, a window the clean run does not have", w, v)
				}
			}
			if dbBudget.Crashes()+kinBudget.Crashes() == 0 {
				t.Errorf("the mapping played no crash: the history's seed tests less than it should")
			}
			if t.Failed() {
				t.Logf("played: %v", m.Log)
			}
			t.Logf("%d records, %d windows (%d results cleanly, %d distinct under faults, %d records read), %d crashes",
				len(recs), len(want), len(wantByID), len(gotByID), n, dbBudget.Crashes()+kinBudget.Crashes())
		})
	}
}

// setupOnMemdb is setup with the state and quarantine tables in a memdb of
// their own (internal/memdb answers as moto does, without HTTP and Python)
// and the output stream on moto.
func setupOnMemdb(t testing.TB) handler.Config {
	t.Helper()
	cfg := handler.Config{Name: name("h"), StateTable: name("state"), OutputStream: name("out"), QuarantineTable: name("quarantine"), Kinesis: kin}
	cfg.DynamoDB = memdb.New(map[string]memdb.Schema{cfg.StateTable: memdb.ViewsTable, cfg.QuarantineTable: memdb.QuarantineTable})
	keyedtest.CreateStream(t, kin, cfg.OutputStream, 1)
	return cfg
}

// lastResults is each window's last result ("<records> <result>"), without
// the windows whose last result is a retraction, checking that each
// window's revisions are 1..n.
func lastResults(t *testing.T, byID map[string]handler.Result) map[string]string {
	t.Helper()
	type chain struct {
		revs []int
		last handler.Result
	}
	chains := map[string]*chain{}
	for _, r := range byID {
		w := r.Key + " " + r.WindowStart.Format("15:04:05.000") + "/" + r.WindowEnd.Format("15:04:05.000")
		c := chains[w]
		if c == nil {
			c = &chain{}
			chains[w] = c
		}
		c.revs = append(c.revs, r.Revision)
		if r.Revision > c.last.Revision {
			c.last = r
		}
	}
	out := map[string]string{}
	for w, c := range chains {
		slices.Sort(c.revs)
		for i, rev := range c.revs {
			if rev != i+1 {
				t.Errorf("%s: revisions %v on the stream; want 1..%d", w, c.revs, len(c.revs))
				break
			}
		}
		if c.last.Type != handler.RetractionType {
			out[w] = fmt.Sprintf("%d %s", c.last.Records, c.last.Result)
		}
	}
	return out
}
