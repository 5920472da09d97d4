package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

var quiet = slog.New(slog.NewTextHandler(quietOut(), nil))

func quietOut() io.Writer {
	if os.Getenv("FAULT_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

var (
	db       *dynamodb.Client
	awsCfg   aws.Config // the stand-in, for FromEnv
	tableSeq atomic.Int64

	faultSeeds     = flag.Int("fault.seeds", 4, "fault-injection scenarios per write path on the in-process DynamoDB (internal/memdb); make soak runs many more")
	faultMotoSeeds = flag.Int("fault.moto", -1, "of those scenarios, how many (the first) also run on moto on each write path, so that memdb cannot drift from it; -1 (go test's, make test's): the first on the per-batch path only (both paths write through the same store code; make soak runs moto on both)")
	faultFirstSeed = flag.Int("fault.seed", 1, "the first scenario's seed: a failing scenario prints the command that runs it alone")
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The fault scenarios' moto sample waits on moto processes of its own,
	// while the memdb scenarios use this process's CPU: both at once.
	standintest.Parallel(4)
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		awsCfg, db = cfg, dynamodb.NewFromConfig(cfg)
		kin = kinesis.NewFromConfig(cfg)
	}))
}

const faultConfig = `{
  "name": "faults",
  "key": "key",
  "value": "data.ms",
  "windows": [{"kind": "tumbling", "size": "1m"}, {"kind": "hopping", "size": "2m", "advance": "1m"},
              {"kind": "session", "gap": "20s"}, {"kind": "sliding", "difference": "15s"}],
  "aggregates": ["count", "sum", "min", "max"],
  "outOfOrderness": "5s",
  "idleTimeout": "30s",
  "latePolicy": "correct",
  "allowedLateness": "24h",
  "partitionKeyIsGroupingKey": true
}`

// faultStore is the DynamoDB a scenario's functions write through: the views,
// the dedupe ledger and the quarantine table. Moto's client and the
// in-process memdb.DB both serve it.
type faultStore = memdb.Client

// faultBackend is where a scenario's tables live: moto (emulator/standin)
// or memdb, which answers what aggregate asks as moto does, without HTTP
// and Python, so that many scenarios run in seconds.
type faultBackend struct {
	name string
	// tables returns the store holding a new views table and a new
	// quarantine table, and their names.
	tables func(t *testing.T) (store faultStore, views, quarantine string)
	// items returns every item of a table.
	items func(t *testing.T, store faultStore, table string) []map[string]types.AttributeValue
}

var (
	onMemdb = faultBackend{
		name: "memdb",
		tables: func(t *testing.T) (faultStore, string, string) {
			views, quarantine := "faults", "faults-quarantine"
			return memdb.New(map[string]memdb.Schema{views: memdb.ViewsTable, quarantine: memdb.QuarantineTable}), views, quarantine
		},
		items: func(t *testing.T, store faultStore, table string) []map[string]types.AttributeValue {
			return store.(*memdb.DB).Items(table)
		},
	}
	// onMoto gives each scenario a moto of its own: moto answers one
	// request at a time, so scenarios sharing one would wait on each other.
	onMoto = faultBackend{
		name: "moto",
		tables: func(t *testing.T) (faultStore, string, string) {
			client := dynamodb.NewFromConfig(standintest.Config(t, standintest.Start(t)))
			views, quarantine := "faults", "faults-quarantine"
			if err := state.CreateTable(context.Background(), client, views); err != nil {
				t.Fatal(err)
			}
			if err := setaside.CreateTable(context.Background(), client, quarantine); err != nil {
				t.Fatal(err)
			}
			return client, views, quarantine
		},
		items: func(t *testing.T, store faultStore, table string) []map[string]types.AttributeValue {
			var out []map[string]types.AttributeValue
			p := dynamodb.NewScanPaginator(store.(*dynamodb.Client), &dynamodb.ScanInput{TableName: aws.String(table)})
			for p.HasMorePages() {
				page, err := p.NextPage(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, page.Items...)
			}
			return out
		},
	}
)

// crashingStore makes the n-th and later writes fail, as a process that dies
// between two writes would leave them: the earlier ones applied, the later not.
// It also throttles about one call in throttleEvery (0: never), at random,
// as DynamoDB does under load: a transient error the handler must retry,
// not set aside.
type crashingStore struct {
	faultStore
	budget        atomic.Int64 // writes left before the "crash"; < 0 means no crash armed
	throttleEvery int
}

var errThrottled = &types.ProvisionedThroughputExceededException{Message: aws.String("injected throttle")}

func (c *crashingStore) throttled() bool {
	return c.throttleEvery > 0 && rand.IntN(c.throttleEvery) == 0
}

func (c *crashingStore) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if c.throttled() {
		return nil, errThrottled
	}
	return c.faultStore.BatchGetItem(ctx, in, opts...)
}

// throttlingSink is the quarantine table's client that fails about one
// write in every, at random: a failing destination, after which nothing may
// be lost.
type throttlingSink struct {
	faultStore
	every int
}

func (c *throttlingSink) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if rand.IntN(c.every) == 0 {
		return nil, errThrottled
	}
	return c.faultStore.BatchWriteItem(ctx, in, opts...)
}

// UpdateItem writes a record's own item (its chunks go by BatchWriteItem).
func (c *throttlingSink) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if rand.IntN(c.every) == 0 {
		return nil, errThrottled
	}
	return c.faultStore.UpdateItem(ctx, in, opts...)
}

var errCrash = errors.New("injected crash between two writes")

func (c *crashingStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.crash() {
		return nil, errCrash
	}
	if c.throttled() {
		return nil, errThrottled
	}
	return c.faultStore.UpdateItem(ctx, in, opts...)
}

// Dropping a published listing crashes too.
func (c *crashingStore) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if c.crash() {
		return nil, errCrash
	}
	if c.throttled() {
		return nil, errThrottled
	}
	return c.faultStore.DeleteItem(ctx, in, opts...)
}

// The dedupe ledger's writes crash too.
func (c *crashingStore) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.crash() {
		return nil, errCrash
	}
	if c.throttled() {
		return nil, errThrottled
	}
	return c.faultStore.PutItem(ctx, in, opts...)
}

func (c *crashingStore) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if c.crash() {
		return nil, errCrash
	}
	return c.faultStore.TransactWriteItems(ctx, in, opts...)
}

func (c *crashingStore) crash() bool { return c.budget.Load() >= 0 && c.budget.Add(-1) < 0 }

// record is one generated input record.
type record struct {
	shard string
	seq   int
	env   stream.Envelope
	// copyOf is set on a producer's copy of an earlier event (same key and
	// id): it must have no effect. conflict marks a copy whose content
	// differs (the id reused for another event): refused.
	copyOf   string
	conflict bool
	// overflow marks a value past pipeline.MaxValue: the record can never
	// be applied and must be set aside.
	overflow bool
	// applied and aside are what the processor must do with the record
	// (see scenario.judge): count it once, or set it aside; neither for a
	// duplicate.
	applied, aside bool
}

// scenario is a seeded run: records per shard and the reference views.
type scenario struct {
	rng     *rand.Rand
	cfg     *pipeline.Config
	records map[string][]record
	// parent maps a child shard to the shard it split from: the child's
	// records are processed once the parent's are done, as Lambda does.
	parent map[string]string
	// order lists the shards parents first: the order in which the
	// processor sees one key's records.
	order []string
}

func newScenario(t *testing.T, seed uint64) *scenario {
	cfg, err := pipeline.Parse([]byte(faultConfig))
	if err != nil {
		t.Fatal(err)
	}
	if seed%2 == 1 {
		// Odd seeds keep the ids by hash range (the stack's pipeline does),
		// even ones a ledger a key (the default); the split below puts a
		// parent's and a child's keys in the same ranges.
		cfg.DedupeLedger = pipeline.DedupeLedgerRange
	}
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := &scenario{rng: rng, cfg: cfg, records: map[string][]record{}, parent: map[string]string{}}
	// Shard 2 is a child of shard 0 after a split: it carries on with shard
	// 0's keys (and copies of shard 0's events, resent after the split).
	const child = "shardId-000000000002"
	s.parent[child] = "shardId-000000000000"
	s.order = []string{"shardId-000000000000", "shardId-000000000001", child}
	for _, shard := range s.order {
		n := 30 + rng.IntN(40)
		seq := 1 + rng.IntN(5) // sequence numbers of growing length: 9 → 10 → 100 crossings
		clock := base
		keyShard := shard
		var history []record // earlier events a producer may resend
		if p, ok := s.parent[shard]; ok {
			keyShard = p
			clock = base.Add(4 * time.Minute)
			history = append(history, s.records[p]...)
		}
		for i := 0; i < n; i++ {
			clock = clock.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
			if len(history) > 0 && rng.IntN(5) == 0 {
				// A producer's copy of an earlier event: right away (the
				// same batch, often), or minutes later; the same bytes
				// resent (sentAt kept, so its event time moves on) or
				// re-sent with a fresh sentAt; now and then with other
				// content under the same id.
				orig := history[rng.IntN(len(history))]
				if rng.IntN(2) == 0 {
					orig = history[len(history)-1]
				}
				for orig.copyOf != "" {
					orig = history[rng.IntN(len(history))]
				}
				cp := orig.env
				cp.ReceivedAt = clock
				if rng.IntN(2) == 0 {
					cp.SentAt = clock.Add(-(orig.env.ReceivedAt.Sub(orig.env.SentAt)))
					if cp.SentAt.Before(cp.OccurredAt) {
						cp.SentAt = cp.OccurredAt
					}
				}
				r := record{shard: shard, seq: seq, env: cp, copyOf: orig.env.ID, overflow: orig.overflow}
				if rng.IntN(6) == 0 {
					r.conflict = true
					r.env.Data = json.RawMessage(fmt.Sprintf(`{"ms":%d}`, 2000+rng.IntN(1000)))
					r.overflow = false // other content: a value within the limit
				}
				s.records[shard] = append(s.records[shard], r)
				history = append(history, r)
				seq += 1 + rng.IntN(3)
				continue
			}
			et := clock.Add(-time.Duration(rng.IntN(4000)) * time.Millisecond) // out of order, within outOfOrderness
			if rng.IntN(15) == 0 {
				et = clock.Add(-time.Duration(2+rng.IntN(3)) * time.Minute) // late: its windows are final or nearly so
			}
			key := fmt.Sprintf("%s-k%d", keyShard[len(keyShard)-1:], rng.IntN(4))
			r := record{shard: shard, seq: seq, env: stream.Envelope{
				ID: fmt.Sprintf("%s-%d", shard, seq), Type: "view", Key: key,
				OccurredAt: et, SentAt: et, ReceivedAt: et,
				Data: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, 1+rng.IntN(1000))),
			}}
			if rng.IntN(25) == 0 {
				// A hostile value: two of them would make a sum infinite.
				r.env.Data, r.overflow = json.RawMessage(`{"ms":1.7e308}`), true
			}
			s.records[shard] = append(s.records[shard], r)
			history = append(history, r)
			seq += 1 + rng.IntN(3)
		}
	}
	s.judge()
	return s
}

// judge decides each record's fate as the processor must, in the order it
// sees one key's records (a parent shard's before its child's): a value
// past the limit is set aside and claims nothing; the first other record
// of a (key, id) claims it and is applied, even a copy whose original was
// set aside; a later one with the same content is a duplicate (no effect),
// with other content a conflict (set aside).
func (s *scenario) judge() {
	claimed := map[string]string{} // key and id → content of the claiming record
	for _, shard := range s.order {
		for i := range s.records[shard] {
			r := &s.records[shard][i]
			id := r.env.Key + "\x00" + r.env.ID
			content, ok := claimed[id]
			switch {
			case r.overflow:
				r.aside = true
			case !ok:
				claimed[id] = string(r.env.Data)
				r.applied = true
			case content != string(r.env.Data):
				r.aside = true
			}
		}
	}
}

// distinct returns every shard's records that claim an event id (see
// judge): what the views must count, each once.
func (s *scenario) distinct() []record {
	var out []record
	for _, recs := range s.records {
		for _, r := range recs {
			if r.applied {
				out = append(out, r)
			}
		}
	}
	return out
}

// mustSetAside returns the records that can never be applied, by shard and
// sequence number: values past the limit, and ids reused with other
// content than the record that claimed them (see judge).
func (s *scenario) mustSetAside() map[string]bool {
	out := map[string]bool{}
	for _, recs := range s.records {
		for _, r := range recs {
			if r.aside {
				out[r.shard+"/"+strconv.Itoa(r.seq)] = true
			}
		}
	}
	return out
}

// cell is one expected (or stored) window value.
type cell struct {
	count         uint64
	sum, min, max float64
}

// reference applies every record exactly once, in memory: tumbling and
// hopping windows record by record, session and sliding windows from each
// key's whole set of records.
func (s *scenario) reference() map[string]cell {
	ref := map[string]cell{}
	byKey := map[string][]time.Time{}
	for _, r := range s.distinct() {
		byKey[r.env.Key] = append(byKey[r.env.Key], r.env.EventTime().Truncate(time.Millisecond))
	}
	keyedWins := map[string]map[string][]window.Window{} // key → kind → windows
	for key, times := range byKey {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		keyedWins[key] = map[string][]window.Window{}
		for _, ws := range s.cfg.Windows {
			switch ws.Kind {
			case pipeline.Sliding:
				keyedWins[key][ws.ID()] = ws.Sliding().Windows(times)
			case pipeline.Session:
				var wins []window.Window
				start, last := times[0], times[0]
				for _, t := range times[1:] {
					if t.Sub(last) >= ws.Gap {
						wins = append(wins, window.Window{Start: start.UTC(), End: last.Add(ws.Gap).UTC()})
						start = t
					}
					last = t
				}
				keyedWins[key][ws.ID()] = append(wins, window.Window{Start: start.UTC(), End: last.Add(ws.Gap).UTC()})
			}
		}
	}
	for _, r := range s.distinct() {
		{
			var d struct{ Ms float64 }
			_ = json.Unmarshal(r.env.Data, &d)
			for _, ws := range s.cfg.Windows {
				var wins []window.Window
				switch ws.Kind {
				case pipeline.Tumbling:
					wins = ws.Tumbling().AppendWindows(nil, r.env.EventTime())
				case pipeline.Hopping:
					wins = ws.Hopping().AppendWindows(nil, r.env.EventTime())
				default:
					t := r.env.EventTime().Truncate(time.Millisecond)
					for _, w := range keyedWins[r.env.Key][ws.ID()] {
						if !t.Before(w.Start) && t.Before(w.End) {
							wins = append(wins, w)
						}
					}
				}
				for _, w := range wins {
					k := r.env.Key + " " + state.SortKey(ws.ID(), w)
					c, ok := ref[k]
					if !ok {
						c = cell{min: d.Ms, max: d.Ms}
					}
					c.count++
					c.sum += d.Ms
					c.min, c.max = min(c.min, d.Ms), max(c.max, d.Ms)
					ref[k] = c
				}
			}
		}
	}
	return ref
}

func kinesisEvent(recs []record) events.KinesisEvent {
	var ev events.KinesisEvent
	for _, r := range recs {
		data, _ := json.Marshal(r.env)
		seq := strconv.Itoa(r.seq)
		ev.Records = append(ev.Records, events.KinesisEventRecord{
			EventID: r.shard + ":" + seq, EventSource: "aws:kinesis", EventName: "aws:kinesis:record",
			EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: r.env.Key, Data: data,
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: r.env.ReceivedAt}},
		})
	}
	return ev
}

// lambda plays one shard's event source mapping against the processor with
// randomized faults: whole-batch redelivery, bisected retries, checkpointed
// retries after item failures, retried batches of a different size, crashes
// after k of n writes, concurrent duplicate invocations, and cold starts.
type lambda struct {
	t          *testing.T
	rng        *rand.Rand
	store      *crashingStore
	out        *resultStream
	table      string
	quarantine string
	cfg        *pipeline.Config
	proc       *aggregate.Processor
	log        []string
	// shards lists the scenario's shards and their parents, as Kinesis
	// does for the function's first flush of a child (WithShardLister).
	shards aggregate.ShardLister
	// carriedBudget, when not zero, caps the window state an interval's
	// claims and points may take (WithCarriedBudget): the scenario's
	// intervals outgrow it and write overflow items.
	carriedBudget int
}

// scenarioShards is a ListShards of the scenario's shards, each child
// naming its parent.
type scenarioShards map[string]string

func (s scenarioShards) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	out := &kinesis.ListShardsOutput{}
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"} {
		sh := kintypes.Shard{ShardId: aws.String(shard)}
		if p, ok := s[shard]; ok {
			sh.ParentShardId = aws.String(p)
		}
		out.Shards = append(out.Shards, sh)
	}
	return out, nil
}

func (l *lambda) coldStart() {
	views := state.NewViews(l.store, l.table, l.cfg.Aggregates, state.WithCompactAt(4))
	sink := setaside.New(&throttlingSink{faultStore: l.store.faultStore, every: 7}, l.quarantine, setaside.WithBackoff(func(int) time.Duration { return time.Millisecond }))
	l.proc = aggregate.New(l.cfg, views, l.out, "results", aggregate.WithLogger(quiet),
		aggregate.WithDedupe(aggregate.NewLedger(l.store, l.table, l.cfg)),
		aggregate.WithShardLister(l.shards, "events"),
		aggregate.WithSetAside(sink), aggregate.WithCarriedBudget(l.carriedBudget))
}

// invoke runs one batch, maybe with a crash armed; it returns the index into
// recs to resume from (len(recs) when all done) and whether it "crashed".
func (l *lambda) invoke(recs []record) (resume int, crashed bool) {
	budget := int64(-1)
	if l.rng.IntN(4) == 0 {
		budget = int64(l.rng.IntN(6))
	}
	l.store.budget.Store(budget)
	defer l.store.budget.Store(-1)
	resp, err := l.proc.HandleBatch(context.Background(), kinesisEvent(recs))
	if err != nil {
		return 0, true
	}
	if budget >= 0 && l.rng.IntN(3) == 0 {
		// The process died after the writes but before Lambda got the response.
		return 0, true
	}
	if len(resp.BatchItemFailures) == 0 {
		return len(recs), false
	}
	lowest := resp.BatchItemFailures[0].ItemIdentifier
	for i, r := range recs {
		if strconv.Itoa(r.seq) == lowest {
			return i, false
		}
	}
	l.t.Fatalf("item failure %s is not in the batch", lowest)
	return 0, false
}

func (l *lambda) run(recs []record) {
	for pos := 0; pos < len(recs); {
		if l.rng.IntN(10) == 0 {
			l.coldStart()
		}
		size := 1 + l.rng.IntN(25)
		b := recs[pos:min(pos+size, len(recs))]
		switch l.rng.IntN(6) {
		case 0: // a concurrent duplicate invocation of the same batch
			var wg sync.WaitGroup
			for i := 0; i < 2; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = l.proc.HandleBatch(context.Background(), kinesisEvent(b)) }()
			}
			wg.Wait()
			l.log = append(l.log, fmt.Sprintf("dup %d+%d", pos, len(b)))
		case 1: // the whole batch redelivered (response lost)
			_, _ = l.proc.HandleBatch(context.Background(), kinesisEvent(b))
			l.log = append(l.log, fmt.Sprintf("redeliver %d+%d", pos, len(b)))
		}
		resume, crashed := l.invoke(b)
		if crashed {
			l.log = append(l.log, fmt.Sprintf("crash %d+%d", pos, len(b)))
			if len(b) > 1 && l.rng.IntN(2) == 0 {
				// Bisect: retry the first half alone; the loop then goes on
				// from wherever that leaves the checkpoint, with a new size.
				half := b[:len(b)/2]
				r, c := l.invoke(half)
				if !c {
					pos += r
				}
				l.log = append(l.log, fmt.Sprintf("bisect %d+%d", pos, len(half)))
			}
			continue // retried from the same checkpoint, maybe with another batch size
		}
		pos += resume
		if resume < len(b) {
			l.log = append(l.log, fmt.Sprintf("checkpoint at %d", pos))
		}
	}
}

// runIntervals plays the mapping with TumblingWindowInSeconds: records in
// intervals, each interval's batches carrying state, then the final
// invocation that flushes. Faults: a non-final invocation redelivered with
// the same state (response lost), a final invocation crashing after k of n
// writes and retried with the same state, a duplicate final invocation
// running concurrently, a final invocation whose response was lost and
// that is retried after it succeeded, and cold starts.
func (l *lambda) runIntervals(recs []record) {
	ctx := context.Background()
	for pos := 0; pos < len(recs); {
		end := min(pos+5+l.rng.IntN(40), len(recs))
		st := map[string]string{}
		shard := recs[pos].shard
		win := events.TimeWindowProperties{ShardID: shard}
		for b := pos; b < end; {
			if l.rng.IntN(8) == 0 {
				l.coldStart()
			}
			size := 1 + l.rng.IntN(10)
			ev := events.KinesisTimeWindowEvent{KinesisEvent: kinesisEvent(recs[b:min(b+size, end)]), TimeWindowProperties: win}
			ev.State = st
			if l.rng.IntN(5) == 0 {
				_, _ = l.proc.HandleInterval(ctx, ev) // response lost: Lambda sends the same batch and state again
				l.log = append(l.log, fmt.Sprintf("redeliver %d+%d", b, size))
			}
			resp, err := l.proc.HandleInterval(ctx, ev)
			if err != nil {
				// A transient error (a throttled read): Lambda retries the
				// batch with the same state.
				l.log = append(l.log, fmt.Sprintf("error %d+%d", b, size))
				continue
			}
			st = resp.State
			if len(resp.BatchItemFailures) > 0 {
				// Retried from the first failed record with the state
				// the invocation returned.
				failed := resp.BatchItemFailures[0].ItemIdentifier
				next := b
				for i := b; i < min(b+size, end); i++ {
					if strconv.Itoa(recs[i].seq) == failed {
						next = i
					}
				}
				l.log = append(l.log, fmt.Sprintf("failed %d+%d at %d", b, size, next))
				b = next
				continue
			}
			b += size
		}
		final := events.KinesisTimeWindowEvent{TimeWindowProperties: win}
		final.State, final.IsFinalInvokeForWindow = st, true
		if l.rng.IntN(4) == 0 {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = l.proc.HandleInterval(ctx, final) }()
			defer wg.Wait()
			l.log = append(l.log, fmt.Sprintf("dup-final %d..%d", pos, end))
		}
		for attempt := 0; ; attempt++ {
			budget := int64(-1)
			if attempt < 3 && l.rng.IntN(3) == 0 {
				budget = int64(l.rng.IntN(5))
			}
			l.store.budget.Store(budget)
			_, err := l.proc.HandleInterval(ctx, final)
			l.store.budget.Store(-1)
			if err == nil {
				break
			}
			l.log = append(l.log, fmt.Sprintf("crash-final %d..%d", pos, end))
		}
		if l.rng.IntN(4) == 0 {
			_, _ = l.proc.HandleInterval(ctx, final) // response lost after success: retried
			l.log = append(l.log, fmt.Sprintf("refinal %d..%d", pos, end))
		}
		pos = end
	}
}

func TestFaultInjectionViewsEqualReference(t *testing.T) {
	for _, mode := range []string{"per-batch", "per-interval"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// The output check is not empty: the scenarios make corrections
			// (a seed may make none; 4 seeds make some on each path).
			var corrected, ran atomic.Int64
			t.Cleanup(func() {
				if ran.Load() >= 4 && corrected.Load() == 0 {
					t.Errorf("%d scenarios put no correction of a tumbling or hopping window on the output stream: its check proved nothing", ran.Load())
				}
			})
			// The moto sample first: one scenario there takes as long as
			// dozens on memdb, so it starts before them.
			first := *faultFirstSeed
			t.Run(onMoto.name, func(t *testing.T) {
				t.Parallel()
				faultScenarios(t, mode, onMoto, first, min(motoSeeds(mode), *faultSeeds), &corrected, &ran)
			})
			t.Run(onMemdb.name, func(t *testing.T) {
				t.Parallel()
				faultScenarios(t, mode, onMemdb, first, *faultSeeds, &corrected, &ran)
			})
		})
	}
}

// motoSeeds is how many of a write path's scenarios also run on moto
// (-fault.moto): by default one on the per-batch path, none on the
// per-interval path. A moto scenario takes about 90 s of a loaded 2-core
// machine, as long as dozens on memdb; internal/memdb's tests keep memdb's
// items byte-equal to moto's, and make soak runs moto on both paths.
func motoSeeds(mode string) int {
	if *faultMotoSeeds >= 0 {
		return *faultMotoSeeds
	}
	if mode == "per-batch" {
		return 1
	}
	return 0
}

// faultScenarios runs n seeded scenarios from seed first on backend, in
// parallel, each a subtest named by its seed; a failing one prints the
// command that runs it alone.
func faultScenarios(t *testing.T, mode string, backend faultBackend, first, n int, corrected, ran *atomic.Int64) {
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					onMoto := ""
					if backend.name == "moto" {
						onMoto = " -fault.moto=1"
					}
					t.Logf("run this scenario alone: go test -count=1 -run '^TestFaultInjectionViewsEqualReference$/^%s$/^%s$/^seed-%d$' ./pkg/aggregate -args -fault.seed=%d%s",
						mode, backend.name, seed, seed, onMoto)
				}
			})
			faultScenario(t, mode, backend, uint64(seed), corrected, ran)
		})
	}
}

// faultScenario plays one seeded scenario's shards, each through its own
// crashing, throttling mapping, closes every window with a tick, and
// compares the views, the output stream and the quarantine table with the
// reference.
func faultScenario(t *testing.T, mode string, backend faultBackend, seed uint64, corrected, ran *atomic.Int64) {
	s := newScenario(t, seed)
	base, table, quarantine := backend.tables(t)
	out := &resultStream{}
	out.throttle.Store(true)
	var wg sync.WaitGroup
	lambdas := map[string]*lambda{}
	done := map[string]chan struct{}{}
	for shard := range s.records {
		done[shard] = make(chan struct{})
	}
	for shard, recs := range s.records {
		// Each shard's mapping crashes on its own: a crash armed for
		// one shard's final invocation never hits another shard's batch.
		store := &crashingStore{faultStore: base, throttleEvery: 40}
		store.budget.Store(-1)
		l := &lambda{t: t, rng: rand.New(rand.NewPCG(seed, uint64(len(shard)+len(recs)))), store: store, out: out, table: table, quarantine: quarantine, cfg: s.cfg,
			shards: scenarioShards(s.parent)}
		if seed%2 == 1 {
			// Half the scenarios: intervals whose claims and points
			// outgrow the window state after a few records.
			l.carriedBudget = 200 + int(seed%5)*150
		}
		l.coldStart()
		lambdas[shard] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[shard])
			if p, ok := s.parent[shard]; ok {
				<-done[p] // a child shard starts once its parent is done
			}
			if mode == "per-interval" {
				l.runIntervals(recs)
			} else {
				l.run(recs)
			}
		}()
	}
	wg.Wait()
	// Close every window: a tick long after the last event (the
	// output stream no longer throttling).
	out.throttle.Store(false)
	views := state.NewViews(base, table, s.cfg.Aggregates)
	p := aggregate.New(s.cfg, views, out, "results", aggregate.WithLogger(quiet))
	if _, err := p.Tick(context.Background(), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Tick(context.Background(), time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	got, stored := readAll(t, views, s)
	want := s.reference()
	bad, finals, corrections := out.check(s.cfg, stored)
	if finals == 0 {
		bad = append(bad, "the scenario put no final result of a tumbling or hopping window on the output stream")
	}
	corrected.Add(int64(corrections))
	ran.Add(1)
	t.Logf("output stream: %d final results and %d corrections checked", finals, corrections)
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.count != w.count || g.sum != w.sum || g.min != w.min || g.max != w.max {
			bad = append(bad, fmt.Sprintf("%s: got %+v want %+v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected window %+v", k, got[k]))
		}
	}
	// Every record that can never be applied is set aside, with a
	// reason naming the field; nothing else is.
	aside := setAsideRecords(t, backend.items(t, base, quarantine))
	for k := range s.mustSetAside() {
		if _, ok := aside[k]; !ok {
			bad = append(bad, fmt.Sprintf("record %s can never be applied but was not set aside", k))
		}
	}
	for k, it := range aside {
		if !s.mustSetAside()[k] {
			bad = append(bad, fmt.Sprintf("record %s was set aside (%s: %s) but can be applied", k, it.Field, it.Reason))
		} else if it.Field == "" || it.Reason == "" || len(it.Data) == 0 {
			bad = append(bad, fmt.Sprintf("record %s set aside without its field, reason or data: %+v", k, it))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		for shard, l := range lambdas {
			t.Logf("%s pattern: %v", shard, l.log)
		}
		logStateAfterFailure(t, views, s)
		t.Fatalf("%d problems over %d windows: views that differ from applying each record once, or results missing from the output stream:\n%v", len(bad), len(want), bad)
	}
}

// logStateAfterFailure logs what a failing scenario left behind that the
// problems alone do not show: each shard's watermark as the closing ticks
// left it, what each shard still lists in the open-windows index, and each
// key's keyed states (version, fence, listing, size). A failure that a
// rerun of its seed does not repeat (a schedule of goroutines) is then
// still evidence.
func logStateAfterFailure(t *testing.T, views *state.Views, s *scenario) {
	t.Helper()
	ctx := context.Background()
	marks, err := views.Watermarks(ctx, s.cfg.Name)
	if err != nil {
		t.Logf("watermarks: %v", err)
	}
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, shard := range s.order {
		wm, ok := marks[shard]
		if !ok {
			t.Logf("%s: no watermark stored", shard)
		} else {
			t.Logf("%s: watermark %s, max event time %s, idle since %s at max %s", shard,
				wm.Value.Format(time.RFC3339Nano), wm.MaxEventTime.Format(time.RFC3339Nano), wm.IdleSince.Format(time.RFC3339Nano), wm.IdleMax.Format(time.RFC3339Nano))
		}
		refs, err := views.OpenWindows(ctx, s.cfg.Name+"#"+shard, far)
		t.Logf("%s: %d entries still listed %v (err %v)", shard, len(refs), refs, err)
	}
	keys := map[string]bool{}
	for _, r := range s.distinct() {
		keys[r.env.Key] = true
	}
	for key := range keys {
		for _, ws := range s.cfg.Windows {
			if ws.Kind != pipeline.Session && ws.Kind != pipeline.Sliding {
				continue
			}
			var line string
			for _, shard := range s.order {
				ks, err := views.LoadKeyed(ctx, state.KeyedRef{Pipeline: s.cfg.Name, Key: key, Kind: ws.ID()}, shard)
				if err != nil || ks.Version == 0 {
					continue
				}
				if line == "" {
					line = fmt.Sprintf("%s %s: version %d, listed in %q until %s, %d bytes; fences:", key, ws.ID(),
						ks.Version, ks.ListedIn, ks.ListedUntil.Format(time.RFC3339Nano), len(ks.Blob))
				}
				if ks.Fence != "" {
					line += fmt.Sprintf(" %s %s", shard, strings.TrimLeft(ks.Fence, "0"))
				}
			}
			if line != "" {
				t.Log(line)
			}
		}
	}
}

// setAsideRecords reads the quarantine table's items: the records set
// aside, by "<shard>/<sequence number>".
func setAsideRecords(t *testing.T, items []map[string]types.AttributeValue) map[string]setaside.Item {
	t.Helper()
	out := map[string]setaside.Item{}
	for _, raw := range items {
		var it setaside.Item
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			t.Fatal(err)
		}
		if it.Kind != setaside.ItemSetAside {
			continue
		}
		shard := it.Source[strings.LastIndex(it.Source, "/")+1:]
		out[shard+"/"+it.SequenceNumber] = it
	}
	return out
}

// readAll queries every key's windows and checks they are all final.
func readAll(t *testing.T, views *state.Views, s *scenario) (map[string]cell, []state.View) {
	t.Helper()
	var all []state.View
	keys := map[string]bool{}
	for _, r := range s.distinct() {
		keys[r.env.Key] = true
	}
	got := map[string]cell{}
	from, to := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for key := range keys {
		for _, ws := range s.cfg.Windows {
			vs, err := views.Query(context.Background(), s.cfg.Name, key, ws.ID(), from, to)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				if !v.Final {
					t.Errorf("%s %s %s is not final after the closing tick", key, ws.ID(), v.Window.ID())
				}
				got[key+" "+state.SortKey(ws.ID(), v.Window)] = cell{count: v.Result.Count, sum: v.Result.Sum, min: v.Result.Min, max: v.Result.Max}
				all = append(all, v)
			}
		}
	}
	return got, all
}

// resultStream is the output stream of the fault scenarios: it keeps every
// record put, by id, and while throttle is set refuses about one call in
// four whole (a throttle or a timeout: what no endpoint shows on demand).
type resultStream struct {
	throttle atomic.Bool
	mu       sync.Mutex
	byID     map[string][]string // each copy's bytes
}

func (s *resultStream) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if s.throttle.Load() && rand.IntN(4) == 0 {
		return nil, &kintypes.ProvisionedThroughputExceededException{Message: aws.String("injected: the output stream throttled the call")}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string][]string{}
	}
	out := &kinesis.PutRecordsOutput{}
	for _, r := range in.Records {
		var o aggregate.Output
		if err := json.Unmarshal(r.Data, &o); err != nil {
			return nil, err
		}
		s.byID[o.ID] = append(s.byID[o.ID], string(r.Data))
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

// check compares the stream with the stored tumbling and hopping windows
// (session and sliding windows' results are emitted from their keyed
// states, not checked here): every revision of every window is on it, each
// id's copies are the same bytes, the last revision carries the stored
// value, and each correction retracts the revision before it.
// It returns the problems, and how many final results and corrections it checked.
func (s *resultStream) check(cfg *pipeline.Config, views []state.View) (bad []string, finals, corrections int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range views {
		ws, ok := kindOf(cfg, v.Kind)
		if !ok || (ws.Kind != pipeline.Tumbling && ws.Kind != pipeline.Hopping) {
			continue
		}
		prefix := fmt.Sprintf("%s/%s/%s/%s/r", v.Pipeline, v.Key, v.Kind, v.Window.ID())
		var prev aggregate.Output
		for r := 1; r <= v.Revision; r++ {
			copies := s.byID[prefix+strconv.Itoa(r)]
			if len(copies) == 0 {
				bad = append(bad, fmt.Sprintf("%s%d: revision %d of %d never reached the output stream", prefix, r, r, v.Revision))
				break
			}
			for _, c := range copies[1:] {
				if c != copies[0] {
					bad = append(bad, fmt.Sprintf("%s%d: copies differ: %s | %s", prefix, r, copies[0], c))
				}
			}
			var o aggregate.Output
			_ = json.Unmarshal([]byte(copies[0]), &o)
			wantKind := map[bool]string{true: "final", false: "correction"}[r == 1]
			if o.Kind != wantKind || (r > 1 && (o.Previous == nil || o.Previous.Count != prev.Result.Count || o.Previous.Sum != prev.Result.Sum)) {
				bad = append(bad, fmt.Sprintf("%s%d: %s, want a %s retracting revision %d (%+v)", prefix, r, copies[0], wantKind, r-1, prev.Result))
			}
			if r == v.Revision && (o.Result.Count != v.Result.Count || o.Result.Sum != v.Result.Sum) {
				bad = append(bad, fmt.Sprintf("%s%d: last revision on the stream %+v, stored %+v", prefix, r, o.Result, v.Result))
			}
			prev = o
			if r == 1 {
				finals++
			} else {
				corrections++
			}
		}
		if len(s.byID[prefix+strconv.Itoa(v.Revision+1)]) > 0 {
			bad = append(bad, fmt.Sprintf("%s%d: on the stream, but the window is at revision %d", prefix, v.Revision+1, v.Revision))
		}
	}
	return bad, finals, corrections
}

func kindOf(cfg *pipeline.Config, id string) (pipeline.WindowSpec, bool) {
	for _, ws := range cfg.Windows {
		if ws.ID() == id {
			return ws, true
		}
	}
	return pipeline.WindowSpec{}, false
}
