package enrich_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/enrich"
)

// faultyDB fails UpdateItem calls after `after` of them, while armed.
type faultyDB struct {
	*dynamodb.Client
	armed atomic.Bool
	after atomic.Int64
}

func (f *faultyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f.armed.Load() && f.after.Add(-1) < 0 {
		return nil, errCrash
	}
	return f.Client.UpdateItem(ctx, in, opts...)
}

// faultyKinesis writes the first `keep` records of a call and fails it,
// while armed.
type faultyKinesis struct {
	*kinesis.Client
	armed atomic.Bool
	keep  atomic.Int64
}

func (f *faultyKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if !f.armed.Load() {
		return f.Client.PutRecords(ctx, in, opts...)
	}
	return (&crashingKinesis{Client: f.Client, keep: int(f.keep.Load())}).PutRecords(ctx, in, opts...)
}

// instance is one warm Lambda instance with fault switches.
type instance struct {
	h   *enrich.Handler
	db  *faultyDB
	kin *faultyKinesis
}

func newInstance(table, out string) *instance {
	i := &instance{db: &faultyDB{Client: db}, kin: &faultyKinesis{Client: kin}}
	i.h = enrich.New(i.db, i.kin, table, out, fastBackoff, enrich.WithTailLimits(4, 1<<20))
	return i
}

// TestRandomDeliveries: seeded random Lambda delivery patterns — batches of
// varying size on alternating warm instances and fresh ones, whole
// redeliveries, bisection, crashes after some state writes or some output
// records, concurrent duplicates — give every activity event the join a
// reference computed in memory gives it, in byte-identical copies only.
func TestRandomDeliveries(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			// The shard: changes (with duplicates, older versions and
			// tombstones) and activity over four keys.
			var docs [][]byte
			want := map[string]string{} // activity id → plan@version
			type held struct {
				version int
				plan    string
			}
			ref := map[string]held{}
			versions := map[string]int{}
			for i := range 80 {
				key := fmt.Sprintf("u-%d", rng.IntN(4))
				switch r := rng.IntN(10); {
				case r < 2:
					versions[key]++
					plan := []string{"free", "pro", "team"}[rng.IntN(3)]
					docs = append(docs, profile(key, versions[key], plan))
					if versions[key] > ref[key].version {
						ref[key] = held{versions[key], plan}
					}
				case r == 2 && versions[key] > 1:
					v := 1 + rng.IntN(versions[key]-1) // a late retry of an older version
					docs = append(docs, profile(key, v, "stale"))
				case r == 3 && versions[key] > 0:
					versions[key]++
					docs = append(docs, tombstone(key, versions[key]))
					ref[key] = held{versions[key], "-"}
				default:
					id := fmt.Sprintf("e-%d", i)
					docs = append(docs, activity(id, key))
					if h, ok := ref[key]; ok {
						want[id] = fmt.Sprintf("%s@%d", h.plan, h.version)
					} else {
						want[id] = "-@-"
					}
				}
			}
			recs := synthetic(docs...)
			table, out := joinTable(t), newStream(t, "enriched")
			pool := []*instance{newInstance(table, out), newInstance(table, out)}
			deliver := func(in *instance, batch []events.KinesisEventRecord) string {
				resp, err := in.h.Handle(context.Background(), events.KinesisEvent{Records: batch})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.BatchItemFailures) == 0 {
					return ""
				}
				return resp.BatchItemFailures[0].ItemIdentifier
			}
			var pattern []string
			for cursor := 0; cursor < len(recs); {
				n := 1 + rng.IntN(min(20, len(recs)-cursor))
				batch := recs[cursor : cursor+n]
				in := pool[rng.IntN(2)]
				if rng.IntN(6) == 0 {
					in = newInstance(table, out) // a cold instance
				}
				action := rng.IntN(6)
				pattern = append(pattern, fmt.Sprintf("%d+%d:%d", cursor, n, action))
				var failed string
				switch action {
				case 0: // crash after some state writes
					in.db.after.Store(int64(rng.IntN(3)))
					in.db.armed.Store(true)
					failed = deliver(in, batch)
					in.db.armed.Store(false)
				case 1: // crash after some output records
					in.kin.keep.Store(int64(rng.IntN(n + 1)))
					in.kin.armed.Store(true)
					failed = deliver(in, batch)
					in.kin.armed.Store(false)
				case 2: // delivered, then redelivered whole
					if failed = deliver(in, batch); failed == "" {
						failed = deliver(pool[rng.IntN(2)], batch)
					}
				case 3: // bisected
					if mid := n / 2; mid > 0 {
						if failed = deliver(in, batch[:mid]); failed == "" {
							failed = deliver(pool[rng.IntN(2)], batch[mid:])
						}
					} else {
						failed = deliver(in, batch)
					}
				case 4: // a concurrent duplicate invocation
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { defer wg.Done(); _ = deliver(newInstance(table, out), batch) }()
					failed = deliver(in, batch)
					wg.Wait()
				default:
					failed = deliver(in, batch)
				}
				if failed == "" {
					cursor += n
				} else if i := index(recs, failed); i < cursor {
					t.Fatalf("failure %s before the batch's first record (pattern %v)", failed, pattern)
				} else {
					cursor = i
				}
			}
			got := output(t, out)
			ids := map[string]string{}
			for seq, es := range got {
				for _, e := range es {
					if string(e.raw) != string(es[0].raw) {
						t.Errorf("source %s enriched differently across deliveries:\n%s\n%s\n(pattern %v)", seq, es[0].raw, e.raw, pattern)
					}
				}
				ids[es[0].env.ID] = plan(es[0]) + "@" + version(es[0])
			}
			for id, w := range want {
				if ids[id] != w {
					t.Errorf("%s joined %s, want %s (pattern %v)", id, ids[id], w, pattern)
				}
			}
			if len(ids) != len(want) {
				t.Errorf("%d events enriched, want %d", len(ids), len(want))
			}
			for key, h := range ref {
				p, err := pool[0].h.Lookup(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if p.Version != fmt.Sprint(h.version) || (h.plan == "-") != p.Deleted {
					b, _ := json.Marshal(p)
					t.Errorf("join state of %s = %s, want version %d plan %s", key, b, h.version, h.plan)
				}
			}
		})
	}
}
