package handler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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
			fcfg.Kinesis = &keyedtest.Kinesis{Client: kin, B: kinBudget}
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
