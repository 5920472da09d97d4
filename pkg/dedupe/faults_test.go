package dedupe_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
)

var (
	faultSeeds     = flag.Int("fault.seeds", 8, "fault-injection scenarios on the in-process DynamoDB (internal/memdb); make soak runs many more")
	faultMotoSeeds = flag.Int("fault.moto", 1, "of those scenarios, how many (the first) also run on moto, so that memdb cannot drift from it")
	faultFirstSeed = flag.Int("fault.seed", 1, "the first scenario's seed: a failing scenario prints the command that runs it alone")
)

// The horizon of the fault scenarios: short, so that some copies arrive
// after it and count again.
const faultHorizon = 60 // seconds

// faultEvent is one record's data: an event's key, id and content, and
// its arrival on the stream (seconds).
type faultEvent struct {
	Key     string `json:"key"`
	ID      string `json:"id"`
	Content string `json:"content"`
	Arrival uint32 `json:"arrival"`
}

// faultRecord is one generated record of a shard and what the ledger must
// say of it.
type faultRecord struct {
	shard string
	seq   int
	ev    faultEvent
	// want is the verdict the record must get whenever its batch goes
	// through: New (or Redelivered, when a retry of its batch finds its own
	// claim), Duplicate or Conflict.
	want dedupe.Verdict
}

func (r faultRecord) name() string { return r.shard + "/" + strconv.Itoa(r.seq) }

// dedupeScenario generates two shards of events, each shard with keys of
// its own (a key's records share a shard, as Kinesis routes them): new
// ids, producer copies of earlier events (right away, minutes later, now
// and then past the horizon), ids reused with other content, and judges
// each record as the ledger must, in shard order.
func dedupeScenario(rng *rand.Rand) map[string][]faultRecord {
	out := map[string][]faultRecord{}
	for s := 0; s < 2; s++ {
		shard := fmt.Sprintf("shardId-00000000000%d", s)
		seq := 1 + rng.IntN(5)
		arrival := uint32(1_800_000_000 + rng.IntN(1000))
		var history []faultEvent
		type claim struct {
			content string
			arrival uint32
		}
		claims := map[string]claim{} // key and id → the live claim
		for i := 0; i < 60+rng.IntN(60); i++ {
			arrival += uint32(rng.IntN(3))
			if rng.IntN(25) == 0 {
				arrival += faultHorizon + uint32(rng.IntN(30)) // a pause: earlier claims may expire
			}
			ev := faultEvent{Key: fmt.Sprintf("s%d-k%d", s, rng.IntN(3)), ID: fmt.Sprintf("e%d-%d", s, i), Content: fmt.Sprintf("c%d", rng.IntN(1000)), Arrival: arrival}
			if len(history) > 0 && rng.IntN(3) == 0 {
				// A producer's copy: of the last event (often in the same
				// batch) or of any earlier one; now and then the id
				// reused with other content.
				orig := history[len(history)-1]
				if rng.IntN(2) == 0 {
					orig = history[rng.IntN(len(history))]
				}
				ev.Key, ev.ID, ev.Content = orig.Key, orig.ID, orig.Content
				if rng.IntN(5) == 0 {
					ev.Content += "-other"
				}
			}
			history = append(history, ev)
			r := faultRecord{shard: shard, seq: seq, ev: ev}
			id := ev.Key + "\x00" + ev.ID
			c, ok := claims[id]
			switch {
			case !ok || c.arrival < arrival-min(arrival, faultHorizon):
				r.want = dedupe.New
				claims[id] = claim{content: ev.Content, arrival: arrival}
			case c.content == ev.Content:
				r.want = dedupe.Duplicate
			default:
				r.want = dedupe.Conflict
			}
			out[shard] = append(out[shard], r)
			seq += 1 + rng.IntN(3)
		}
	}
	return out
}

// applied is the effect of the records the ledger lets through, kept by
// record (shard and sequence number) as the fences of package state keep
// them: a record applied twice has one effect; two records applying one
// event are a double count.
type applied struct {
	mu       sync.Mutex
	byRecord map[string]faultEvent
	verdicts map[string]map[dedupe.Verdict]bool // every verdict a record got in a batch that went through
}

func (a *applied) note(name string, ev faultEvent, v dedupe.Verdict) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verdicts[name] == nil {
		a.verdicts[name] = map[dedupe.Verdict]bool{}
	}
	a.verdicts[name][v] = true
	if v.Applies() {
		a.byRecord[name] = ev
	}
}

// consumer is a function that screens producer copies with the ledger
// before its effect: Lambda runs it in two warm environments at once
// (each with its own ledger cache, so one's copy goes stale when the other
// writes), and a cold start replaces both.
type consumer struct {
	rng     *rand.Rand
	mu      sync.Mutex
	ledgers [2]*dedupe.Ledger
	out     *applied
}

// HandleBatch judges the batch's records, commits their claims and applies
// the records let through up to the first record of a key whose ledger
// could not be written, where Lambda resumes.
func (c *consumer) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	c.mu.Lock()
	l := c.ledgers[c.rng.IntN(len(c.ledgers))]
	c.mu.Unlock()
	cands := make([]dedupe.Candidate, len(ev.Records))
	evs := make([]faultEvent, len(ev.Records))
	for i, r := range ev.Records {
		if err := json.Unmarshal(r.Kinesis.Data, &evs[i]); err != nil {
			return events.KinesisEventResponse{}, err
		}
		shard, _, _ := strings.Cut(r.EventID, ":")
		cands[i] = dedupe.Candidate{Key: evs[i].Key, Entry: dedupe.Entry{
			ID:      dedupe.IdentityOf(evs[i].Key, evs[i].ID),
			Content: dedupe.ContentOf("event", time.Time{}, []byte(evs[i].Content)),
			Claim:   dedupe.ClaimOf(shard, r.Kinesis.SequenceNumber),
			Arrival: evs[i].Arrival,
		}}
	}
	s := l.Begin("", nil)
	if err := s.Judge(ctx, cands); err != nil {
		return events.KinesisEventResponse{}, err
	}
	failed := map[string]bool{}
	for _, ke := range s.Commit(ctx, 4) {
		failed[ke.Key] = true
	}
	var resp events.KinesisEventResponse
	for i, v := range s.Verdicts() {
		if failed[l.KeyOf(cands[i].Key)] { // a commit fails for a ledger key: the key's, or its range's
			resp.BatchItemFailures = []events.KinesisBatchItemFailure{{ItemIdentifier: ev.Records[i].Kinesis.SequenceNumber}}
			break
		}
		shard, _, _ := strings.Cut(ev.Records[i].EventID, ":")
		c.out.note(shard+"/"+ev.Records[i].Kinesis.SequenceNumber, evs[i], v)
	}
	return resp, nil
}

// TestFaultInjectionClaimsExactlyOnce plays seeded histories of producer
// copies through a consumer that screens them with the ledger, under
// Lambda's retry patterns (whole and concurrent redeliveries, crashes
// between the ledger's write and the effect, bisected and checkpointed
// retries, cold starts), two warm environments whose caches go stale,
// throttled reads and writes, writes whose answer is lost, a small head
// (sealed segments, merged when more than two or three are live), a small
// cache (evictions) and a horizon some copies outlive. Every event must be applied by exactly one record (its first,
// or its first after the horizon), never by a copy; every record must get
// the verdict the model gives it. The scenarios run on memdb, and the
// first -fault.moto on moto too, so that memdb cannot drift from it.
func TestFaultInjectionClaimsExactlyOnce(t *testing.T) {
	keyedtest.Seeds{Test: "TestFaultInjectionClaimsExactlyOnce", Package: "./pkg/dedupe", First: *faultFirstSeed, N: *faultSeeds, Moto: *faultMotoSeeds}.Run(t,
		func(t *testing.T, backend string, seed int) { faultScenario(t, backend, uint64(seed), false) })
}

// TestFaultInjectionClaimsExactlyOnceByRange is the same scenarios with
// each environment's ledgers kept by hash range (WithRanges, reading an
// empty ledger a key before, WithPredecessor): many keys share a range's
// head, the shards write the ranges they share at once, and the small
// cache evicts whole ranges.
func TestFaultInjectionClaimsExactlyOnceByRange(t *testing.T) {
	keyedtest.Seeds{Test: "TestFaultInjectionClaimsExactlyOnceByRange", Package: "./pkg/dedupe", First: *faultFirstSeed, N: *faultSeeds, Moto: *faultMotoSeeds}.Run(t,
		func(t *testing.T, backend string, seed int) { faultScenario(t, backend, uint64(seed), true) })
}

func faultScenario(t *testing.T, backend string, seed uint64, ranges bool) {
	var store memdb.Client
	table := "views"
	if backend == "moto" {
		store, table = db, newTable(t)
	} else {
		store = memdb.New(map[string]memdb.Schema{table: memdb.ViewsTable})
	}
	shards := dedupeScenario(rand.New(rand.NewPCG(seed, 41)))
	out := &applied{byRecord: map[string]faultEvent{}, verdicts: map[string]map[dedupe.Verdict]bool{}}
	var wg sync.WaitGroup
	var mappings []*keyedtest.Mapping
	for shard, recs := range shards {
		budget := keyedtest.NewBudget(3)
		fdb := &keyedtest.DB{Client: store, B: budget, ThrottleEvery: 30, LoseEvery: 15}
		rng := rand.New(rand.NewPCG(seed, uint64(len(shard)+len(recs))))
		m := &keyedtest.Mapping{T: t, Rng: rng, Budgets: []*keyedtest.Budget{budget}, MaxBatch: 12,
			New: func() keyedtest.Handler {
				c := &consumer{rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), out: out}
				// The first environment seals segments a merge seldom
				// fits; the second merges them at nearly every seal.
				newLedger := func(opts ...dedupe.Option) *dedupe.Ledger {
					opts = append(opts, dedupe.WithHorizon(faultHorizon*time.Second), dedupe.WithCacheEntries(12))
					if !ranges {
						return dedupe.NewLedger(fdb, table, itemKey, opts...)
					}
					before := dedupe.NewLedger(fdb, table, itemKey, opts...)
					return dedupe.NewLedger(fdb, table, rangeItemKey, append(opts, dedupe.WithRanges(), dedupe.WithPredecessor(before))...)
				}
				c.ledgers[0] = newLedger(dedupe.WithHeadEntries(4), dedupe.WithSegmentEntries(5), dedupe.WithMaxSegments(3))
				c.ledgers[1] = newLedger(dedupe.WithHeadEntries(3), dedupe.WithSegmentEntries(8), dedupe.WithMaxSegments(2))
				return c
			}}
		mappings = append(mappings, m)
		kin := make([]events.KinesisEventRecord, len(recs))
		for i, r := range recs {
			data, _ := json.Marshal(r.ev)
			seq := strconv.Itoa(r.seq)
			kin[i] = events.KinesisEventRecord{EventID: shard + ":" + seq, Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: r.ev.Key, Data: data}}
		}
		wg.Add(1)
		go func() { defer wg.Done(); m.Run(kin) }()
	}
	wg.Wait()

	var bad []string
	distinct, copies := 0, 0
	for _, recs := range shards {
		for _, r := range recs {
			got := out.verdicts[r.name()]
			_, applied := out.byRecord[r.name()]
			switch {
			case len(got) == 0:
				bad = append(bad, fmt.Sprintf("%s (%s %s): never judged in a batch that went through", r.name(), r.ev.Key, r.ev.ID))
			case r.want == dedupe.New:
				distinct++
				if !applied {
					bad = append(bad, fmt.Sprintf("%s (%s %s) claims its event but was never applied (lost): verdicts %v", r.name(), r.ev.Key, r.ev.ID, verdictList(got)))
				}
				if got[dedupe.Duplicate] || got[dedupe.Conflict] {
					bad = append(bad, fmt.Sprintf("%s (%s %s) claims its event but was judged %v", r.name(), r.ev.Key, r.ev.ID, verdictList(got)))
				}
			default:
				copies++
				if applied {
					bad = append(bad, fmt.Sprintf("%s (%s %s) is a copy (%s) but was applied (counted twice): verdicts %v", r.name(), r.ev.Key, r.ev.ID, r.want, verdictList(got)))
				} else if len(got) != 1 || !got[r.want] {
					bad = append(bad, fmt.Sprintf("%s (%s %s): verdicts %v, want %s", r.name(), r.ev.Key, r.ev.ID, verdictList(got), r.want))
				}
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		for _, m := range mappings {
			t.Logf("pattern: %v", m.Log)
		}
		t.Fatalf("%d problems over %d events and %d copies:\n%s", len(bad), distinct, copies, strings.Join(bad, "\n"))
	}
	t.Logf("%d events applied once each, %d copies and reused ids held back", distinct, copies)
}

func verdictList(vs map[dedupe.Verdict]bool) []string {
	var out []string
	for v := range vs {
		out = append(out, v.String())
	}
	sort.Strings(out)
	return out
}
