package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/projection"
	"github.com/tributary-dev/tributary/pkg/seats"
)

var awsCfg aws.Config

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(c aws.Config) { awsCfg = c }))
}

var seq atomic.Int64

type fixture struct {
	n     int64
	db    *dynamodb.Client
	store *es.Store
	x     *es.Executor[seats.Show]
	views string
}

// newFixture is an event store and a views table the commands' seat maps
// go to (table: where the executor writes the seat map).
func newFixture(t *testing.T, table projection.Table) *fixture {
	t.Helper()
	ctx := context.Background()
	n := seq.Add(1)
	f := &fixture{n: n, db: dynamodb.NewFromConfig(awsCfg), views: fmt.Sprintf("views%d", n)}
	tables := es.Tables{Events: fmt.Sprintf("events%d", n), Snapshots: fmt.Sprintf("snapshots%d", n), Commands: fmt.Sprintf("commands%d", n)}
	if err := es.CreateTables(ctx, f.db, tables); err != nil {
		t.Fatal(err)
	}
	if err := seats.CreateViewsTable(ctx, f.db, f.views); err != nil {
		t.Fatal(err)
	}
	if table == nil {
		table = projection.FixedTable(f.views)
	}
	f.store = es.NewStore(f.db, tables)
	f.x = es.NewExecutor[seats.Show](f.store, seats.Decider{}, es.WithSyncView(seats.SyncView(table)), es.WithSnapshotEvery[seats.Show](5))
	return f
}

func (f *fixture) table(t *testing.T, name string) string {
	t.Helper()
	if err := seats.CreateViewsTable(context.Background(), f.db, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// workload sends n random commands on shows (scheduling them first): many
// reservations, cancellations and moves, some refused.
func (f *fixture) workload(t *testing.T, rng *rand.Rand, shows []string, n int, prefix string) {
	t.Helper()
	ctx := context.Background()
	for i, s := range shows {
		body := fmt.Sprintf(`{"id":"%s-sched-%d","type":"ScheduleShow","showId":%q,"data":{"title":"Show %d","startsAt":"2026-12-0%dT20:00:00Z","rows":3,"seatsPerRow":4}}`, prefix, i, s, i, i%3+1)
		if _, err := f.x.Execute(ctx, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	labels := seats.SeatLabels(3, 4)
	var active []string
	for i := range n {
		show := shows[rng.IntN(len(shows))]
		seatsJSON := func() string {
			p := rng.Perm(len(labels))[:rng.IntN(3)+1]
			out := make([]string, len(p))
			for j, k := range p {
				out[j] = labels[k]
			}
			b, _ := json.Marshal(out)
			return string(b)
		}
		id := fmt.Sprintf("%s-%d", prefix, i)
		var body string
		switch r := rng.IntN(10); {
		case r < 6 || len(active) == 0:
			rid := "r" + id
			body = fmt.Sprintf(`{"id":%q,"type":"ReserveSeats","showId":%q,"data":{"reservationId":%q,"customerId":"cust%d","seats":%s}}`, id, show, rid, rng.IntN(4), seatsJSON())
			active = append(active, show+"|"+rid)
		case r < 8:
			k := rng.IntN(len(active))
			var s, rid string
			fmt.Sscanf(replaceBar(active[k]), "%s %s", &s, &rid)
			body = fmt.Sprintf(`{"id":%q,"type":"CancelReservation","showId":%q,"data":{"reservationId":%q}}`, id, s, rid)
		default:
			var s, rid string
			fmt.Sscanf(replaceBar(active[rng.IntN(len(active))]), "%s %s", &s, &rid)
			body = fmt.Sprintf(`{"id":%q,"type":"MoveReservation","showId":%q,"data":{"reservationId":%q,"seats":%s}}`, id, s, rid, seatsJSON())
		}
		if _, err := f.x.Execute(ctx, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

func replaceBar(s string) string {
	for i := range s {
		if s[i] == '|' {
			return s[:i] + " " + s[i+1:]
		}
	}
	return s
}

// log reads the whole log in order.
func (f *fixture) log(t *testing.T) []es.Event {
	t.Helper()
	var all []es.Event
	if _, err := es.ScanLog(context.Background(), f.db, f.store.Tables().Events, func(run []es.Event) error {
		all = append(all, run...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// records are the published records of evs on one shard, sequence numbers
// increasing, as Lambda delivers them.
func records(t *testing.T, evs []es.Event) []events.KinesisEventRecord {
	t.Helper()
	out := make([]events.KinesisEventRecord, len(evs))
	for i := range evs {
		env, err := es.Envelope(&evs[i], evs[i].RecordedAt)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		sq := "4960" + fmt.Sprintf("%016d", i*10)
		out[i] = events.KinesisEventRecord{EventID: "shardId-000000000000:" + sq, EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/show-events",
			Kinesis: events.KinesisRecord{Data: b, PartitionKey: evs[i].AggregateID, SequenceNumber: sq}}
	}
	return out
}

// TestRedeliveryAndDisorderChangeNothing: the projector is fed the log's
// records as Lambda and the publisher may deliver them — whole batches
// again, from an earlier checkpoint, records of an aggregate out of order,
// records held back and delivered later — and ends with the same views as
// the log applied once; the folds really filled gaps from the store.
func TestRedeliveryAndDisorderChangeNothing(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			f := newFixture(t, nil)
			rng := rand.New(rand.NewPCG(seed, 7))
			f.workload(t, rng, []string{"show-a", "show-b", "show-c", "show-d"}, 60, "w")
			all := f.log(t)
			recs := records(t, all)

			reference := f.table(t, f.views+"-ref")
			ref := projection.New(f.db, f.store, projection.FixedTable(reference), seats.Views(f.x))
			for _, e := range all { // one event at a time, in order: the plain case
				if err := ref.ApplyLog(ctx, reference, []es.Event{e}); err != nil {
					t.Fatal(err)
				}
			}
			played := f.table(t, f.views+"-played")
			p := projection.New(f.db, f.store, projection.FixedTable(played), seats.Views(f.x))
			deliver := func(batch ...events.KinesisEventRecord) {
				resp, err := p.Handle(ctx, events.KinesisEvent{Records: batch})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("batch: %v %v", resp.BatchItemFailures, err)
				}
			}
			// A late version of the first show before anything else: the
			// versions before it must come from the store.
			deliver(recs[slices.IndexFunc(all, func(e es.Event) bool { return e.AggregateID == all[0].AggregateID && e.Version == 4 })])
			var held []events.KinesisEventRecord
			for i := 0; i < len(recs); {
				n := rng.IntN(8) + 1
				b := append([]events.KinesisEventRecord(nil), recs[i:min(i+n, len(recs))]...)
				switch rng.IntN(5) {
				case 0: // some records held back, delivered with a later batch
					k := rng.IntN(len(b))
					held = append(held, b[k])
					b = append(b[:k], b[k+1:]...)
				case 1: // shuffled (the publisher's order across a transaction is not promised)
					rng.Shuffle(len(b), func(x, y int) { b[x], b[y] = b[y], b[x] })
				case 2: // redelivered from an earlier checkpoint
					b = append(append([]events.KinesisEventRecord(nil), recs[max(0, i-rng.IntN(10)):i]...), b...)
				}
				if len(held) > 0 && rng.IntN(3) == 0 {
					b, held = append(b, held...), nil
				}
				if len(b) > 0 {
					deliver(b...)
					if rng.IntN(4) == 0 {
						deliver(b...) // the whole batch again
					}
				}
				i += n
			}
			if len(held) > 0 {
				deliver(held...)
			}
			d, err := projection.Compare(ctx, f.db, reference, played)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Equal() {
				t.Fatalf("%s", d)
			}
			if p.Stats().GapFills == 0 {
				t.Errorf("no gap was filled from the store: the test did not exercise it (%+v)", p.Stats())
			}
			checkViewsMatchTheLog(t, f, reference)
		})
	}
}

// checkViewsMatchTheLog checks table against states folded from the log:
// each show's free seats and version, its seat map, and one reserved
// booking per active reservation.
func checkViewsMatchTheLog(t *testing.T, f *fixture, table string) {
	t.Helper()
	ctx := context.Background()
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	type avail struct {
		Free, Capacity int
		Version        int64
	}
	got := map[string]avail{}
	reserved := map[string]int{}
	maps := map[string]seats.SeatMap{}
	for _, it := range out.Items {
		var k struct{ PK, SK string }
		_ = attributevalue.UnmarshalMap(it, &k)
		var a struct {
			Pk, Sk, ShowID, Status string
			Free, Capacity         int
			Version                int64
		}
		_ = attributevalue.UnmarshalMap(it, &a)
		switch {
		case a.Sk == "availability":
			got[a.ShowID] = avail{a.Free, a.Capacity, a.Version}
		case a.Sk == "seatmap":
			var m seats.SeatMap
			_ = attributevalue.UnmarshalMap(it, &m)
			maps[m.ShowID] = m
		case a.Status == seats.StatusReserved:
			reserved[a.ShowID]++
		}
	}
	byShow := map[string][]es.Event{}
	for _, e := range f.log(t) {
		byShow[e.AggregateID] = append(byShow[e.AggregateID], e)
	}
	for show, evs := range byShow {
		s, v, err := f.x.Fold(nil, evs)
		if err != nil {
			t.Fatal(err)
		}
		if a := got[show]; a.Free != s.Free() || a.Capacity != s.Capacity() || a.Version != v {
			t.Errorf("%s availability %+v, the log says free %d of %d at version %d", show, a, s.Free(), s.Capacity(), v)
		}
		if reserved[show] != len(s.Reservations) {
			t.Errorf("%s: %d bookings reserved, the log has %d active reservations", show, reserved[show], len(s.Reservations))
		}
		if m := maps[show]; m.Version != v || m.Free != s.Free() || len(m.Reservations) != len(s.Reservations) {
			t.Errorf("%s seat map at %d free %d, the log says %d free %d", show, m.Version, m.Free, v, s.Free())
		}
	}
}

// TestUnreadableRecordsAreSetAside: a record that is not a published event
// is set aside naming the field, and the events around it are applied.
func TestUnreadableRecordsAreSetAside(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.workload(t, rand.New(rand.NewPCG(5, 5)), []string{"show-x"}, 3, "u")
	recs := records(t, f.log(t))
	bad := recs[1]
	bad.Kinesis.Data = []byte(`{"id":"x","type":"SeatsReserved","key":"show-x","occurredAt":"2026-01-01T00:00:00Z","sentAt":"2026-01-01T00:00:00Z","data":{"aggregateId":"show-x","aggregateType":"show","version":0,"data":{}}}`)
	bad.Kinesis.SequenceNumber, bad.EventID = "49599999999999999999", "shardId-000000000000:49599999999999999999"
	quarantine := fmt.Sprintf("quarantine%d", f.n)
	if err := createQuarantine(ctx, f.db, quarantine); err != nil {
		t.Fatal(err)
	}
	sink := newSink(f.db, quarantine)
	p := projection.New(f.db, f.store, projection.FixedTable(f.views), seats.Views(f.x), projection.WithSetAside(sink))
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: append([]events.KinesisEventRecord{bad}, recs...)})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	item, err := loadSetAside(ctx, f.db, quarantine, bad)
	if err != nil || item == nil || item.Field != "data.version" {
		t.Fatalf("set aside: %+v %v, want field data.version", item, err)
	}
	if st := p.Stats(); st.EventsApplied != int64(len(recs)) || st.SetAside != 1 {
		t.Fatalf("stats %+v, want %d applied and 1 set aside", st, len(recs))
	}
	_ = time.Second
}

// TestRecordsThatMeanTwoThingsAreSetAside: a published record the one
// strict reader refuses — a key twice, a name in another case, a field a
// published event does not have, text that is not UTF-8 — could be read
// one way here and another by the next reader ({"version":2,"version":99}
// is version 99 to encoding/json, 2 to others). Each is set aside naming
// the field, and the events around them are applied.
func TestRecordsThatMeanTwoThingsAreSetAside(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.workload(t, rand.New(rand.NewPCG(6, 6)), []string{"show-y"}, 3, "v")
	recs := records(t, f.log(t))
	good := string(recs[1].Kinesis.Data)
	var bad []events.KinesisEventRecord
	var fields []string
	for i, tt := range []struct{ old, new, field string }{
		{`"version":2`, `"version":2,"version":99`, "data.version"},
		{`"version":2`, `"Version":2`, "data.Version"},
		{`"aggregateType":"show"`, `"aggregateType":"show","extra":1`, "data.extra"},
		{`"aggregateType":"show"`, "\"aggregateType\":\"sh\xffow\"", "data.aggregateType"},
		{`"key":"show-y"`, `"key":"show-y","key":"show-z"`, "key"},
		{`"key":"show-y"`, `"key":"show-y","Key":"show-z"`, "Key"},
	} {
		if !strings.Contains(good, tt.old) {
			t.Fatalf("%s is not in the record %s", tt.old, good)
		}
		r := recs[1]
		r.Kinesis.Data = []byte(strings.Replace(good, tt.old, tt.new, 1))
		r.Kinesis.SequenceNumber = fmt.Sprintf("495999999999999999%02d", i)
		r.EventID = "shardId-000000000000:" + r.Kinesis.SequenceNumber
		bad, fields = append(bad, r), append(fields, tt.field)
	}
	quarantine := fmt.Sprintf("quarantine%d", f.n)
	if err := createQuarantine(ctx, f.db, quarantine); err != nil {
		t.Fatal(err)
	}
	p := projection.New(f.db, f.store, projection.FixedTable(f.views), seats.Views(f.x), projection.WithSetAside(newSink(f.db, quarantine)))
	resp, err := p.Handle(ctx, events.KinesisEvent{Records: append(bad, recs...)})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	for i, r := range bad {
		item, err := loadSetAside(ctx, f.db, quarantine, r)
		if err != nil || item == nil || item.Field != fields[i] {
			t.Errorf("%s: set aside %+v %v, want field %s", r.Kinesis.Data, item, err, fields[i])
		}
	}
	if st := p.Stats(); st.EventsApplied != int64(len(recs)) || st.SetAside != int64(len(bad)) {
		t.Fatalf("stats %+v, want %d applied and %d set aside", st, len(recs), len(bad))
	}
}

// TestRecordsPastTheLogAreSetAside: a published record whose version the
// event store has not reached (a hand-made record, or one of an events
// table since replaced) leaves a gap the store cannot fill, on every try:
// it is set aside naming data.version, with the records after it of its
// aggregate, and its batch does not fail. So too when the aggregate type
// has entity views alone, which no fold checks against the log.
func TestRecordsPastTheLogAreSetAside(t *testing.T) {
	for _, tc := range []struct {
		name  string
		views func(*fixture) projection.Views
	}{
		{"every view", func(f *fixture) projection.Views { return seats.Views(f.x) }},
		{"entity views alone", func(f *fixture) projection.Views {
			return projection.Views{Entities: seats.Views(f.x).Entities}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { recordsPastTheLogAreSetAside(t, tc.views) })
	}
}

func recordsPastTheLogAreSetAside(t *testing.T, views func(*fixture) projection.Views) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.workload(t, rand.New(rand.NewPCG(7, 7)), []string{"show-w"}, 3, "w")
	recs := records(t, f.log(t))
	last := recs[len(recs)-1]
	var past []events.KinesisEventRecord
	for i, v := range []int64{99, 100} {
		e, err := es.DecodePublished(last.Kinesis.Data)
		if err != nil {
			t.Fatal(err)
		}
		e.Version = v
		env, err := es.Envelope(&e, e.RecordedAt)
		if err != nil {
			t.Fatal(err)
		}
		r := last
		r.Kinesis.Data, _ = json.Marshal(env)
		r.Kinesis.SequenceNumber = fmt.Sprintf("495999999999999999%02d", i)
		r.EventID = "shardId-000000000000:" + r.Kinesis.SequenceNumber
		past = append(past, r)
	}
	quarantine := fmt.Sprintf("quarantine%d", f.n)
	if err := createQuarantine(ctx, f.db, quarantine); err != nil {
		t.Fatal(err)
	}
	p := projection.New(f.db, f.store, projection.FixedTable(f.views), views(f), projection.WithSetAside(newSink(f.db, quarantine)))
	for _, batch := range [][]events.KinesisEventRecord{append(slices.Clone(recs), past...), past[:1], past} {
		resp, err := p.Handle(ctx, events.KinesisEvent{Records: batch})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%v %v, want no failure", resp, err)
		}
	}
	for _, r := range past {
		item, err := loadSetAside(ctx, f.db, quarantine, r)
		if err != nil || item == nil || item.Field != "data.version" {
			t.Errorf("set aside %+v %v, want field data.version", item, err)
		}
	}
	if st := p.Stats(); st.EventsApplied != int64(len(recs)) {
		t.Fatalf("stats %+v, want %d applied", st, len(recs))
	}
	// No view holds what the set-aside records say: an item at version 99
	// would keep every later real event of its key out.
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.views)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		n, _ := it[projection.AttrVersion].(*types.AttributeValueMemberN)
		if v, err := strconv.Atoi(n.Value); err != nil || v > len(recs) {
			t.Errorf("view item %v is at version %s, past the log's %d", it["pk"], n.Value, len(recs))
		}
	}
}

// TestMetricsCountEventsInAndApplied: each batch's EMF line says how many
// records came in and how many events the views now hold (a redelivered
// batch counts again: its events are applied, the fences make it a no-op),
// under Function=project, so the dashboard's project widget has both.
func TestMetricsCountEventsInAndApplied(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.workload(t, rand.New(rand.NewPCG(5, 5)), []string{"show-m"}, 8, "m")
	all := f.log(t)
	recs := records(t, all)
	table := f.table(t, f.views+"-metrics")
	quarantine := fmt.Sprintf("quarantine%d", f.n)
	if err := createQuarantine(ctx, f.db, quarantine); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := projection.New(f.db, f.store, projection.FixedTable(table), seats.Views(f.x),
		projection.WithSetAside(newSink(f.db, quarantine)), projection.WithMetrics(metrics.New(&out, "project")))
	bad := recs[len(recs)-1]
	bad.Kinesis.Data = []byte("not an event")
	bad.Kinesis.SequenceNumber, bad.EventID = "49599999999999999999", "shardId-000000000000:49599999999999999999"
	for i, batch := range [][]events.KinesisEventRecord{recs, recs} {
		if i == 1 {
			batch = append(slices.Clone(recs), bad) // redelivered, with a record that is no event
		}
		if resp, err := p.Handle(ctx, events.KinesisEvent{Records: batch}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch %d: %v %v", i, resp.BatchItemFailures, err)
		}
	}
	var lines []struct {
		Function                string
		EventsIn, EventsApplied float64
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			Function                string
			EventsIn, EventsApplied *float64
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.EventsIn == nil {
			continue // ProjectionLag lines and the like
		}
		if m.EventsApplied == nil {
			t.Fatalf("a line with EventsIn but no EventsApplied: %s", l)
		}
		lines = append(lines, struct {
			Function                string
			EventsIn, EventsApplied float64
		}{m.Function, *m.EventsIn, *m.EventsApplied})
	}
	n := float64(len(recs))
	if len(lines) != 2 || lines[0].Function != "project" ||
		lines[0].EventsIn != n || lines[0].EventsApplied != n || lines[1].EventsIn != n+1 || lines[1].EventsApplied != n {
		t.Fatalf("metric lines %+v, want EventsIn %v then %v, EventsApplied %v both times, Function project:\n%s", lines, n, n+1, n, out.String())
	}
}

// TestCompareListsWhatDiffers: two versions of a views table — an item
// only in each, one that differs, one alike, and a fence that differs
// (not a difference: where a writer got in the stream) — are compared
// item for item, the differing one listed with both values.
func TestCompareListsWhatDiffers(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	a, b := twoVersions(t, db)
	put := func(table, pk, sk, v, fence string) {
		t.Helper()
		item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"v": &types.AttributeValueMemberS{Value: v}, "f_shardId-1": &types.AttributeValueMemberS{Value: fence}}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(a, "show-1", "x", "only in a", "1")
	put(a, "show-1", "y", "old", "1")
	put(b, "show-1", "y", "new", "2")
	put(a, "show-2", "z", "same", "1")
	put(b, "show-2", "z", "same", "9")
	put(b, "show-3", "w", "only in b", "1")
	d, err := projection.Compare(ctx, db, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if d.ItemsA != 3 || d.ItemsB != 3 || d.NOnlyA != 1 || d.NOnlyB != 1 || d.NDiffer != 1 ||
		!slices.Equal(d.OnlyA, []string{"6:show-1x"}) || !slices.Equal(d.OnlyB, []string{"6:show-3w"}) ||
		len(d.Differ) != 1 || !strings.Contains(d.Differ[0], `"v":"old"`) || !strings.Contains(d.Differ[0], `"v":"new"`) {
		t.Errorf("diff %+v; want x only in a, w only in b, y differing (old, new), z alike whatever its fence", d)
	}
}

// TestCompareAnswerIsBounded: versions whose items differ in large
// attributes (seat maps of full houses, up to 400 KB each) are compared
// in an answer of a few KB that names the attributes that differ, not
// every listed item twice in full: after a rebuild on a busy stack, the
// previous version differs in every show booked since, and its diff was
// megabytes on the operator's terminal.
func TestCompareAnswerIsBounded(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	a, b := twoVersions(t, db)
	big := strings.Repeat("x", 100_000)
	for i := range 12 {
		for _, tb := range []struct{ table, free, seats string }{{a, "3", big + "a"}, {b, "2", big + "b"}} {
			item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("show#s%02d", i)}, "sk": &types.AttributeValueMemberS{Value: "seatmap"},
				"title": &types.AttributeValueMemberS{Value: big}, "free": &types.AttributeValueMemberN{Value: tb.free},
				"seats": &types.AttributeValueMemberS{Value: tb.seats}}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tb.table), Item: item}); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, err := projection.Compare(ctx, db, a, b)
	if err != nil {
		t.Fatal(err)
	}
	out := d.String()
	if d.NDiffer != 12 || len(d.Differ) != 10 || !strings.Contains(d.Differ[0], `"free":3`) || !strings.Contains(d.Differ[0], `"free":2`) ||
		!strings.Contains(d.Differ[0], `"seats":`) || strings.Contains(d.Differ[0], `"title"`) {
		t.Errorf("diff: %d differ, %d listed, first %.600s; want 12, 10 listed, each naming free and seats (which differ), not title (alike)", d.NDiffer, len(d.Differ), d.Differ[0])
	}
	if len(out) > 16<<10 {
		t.Errorf("the diff is %d bytes; want it bounded (16 KB)", len(out))
	}
}

// twoVersions creates two views tables to compare, named for this test.
func twoVersions(t *testing.T, db *dynamodb.Client) (a, b string) {
	t.Helper()
	n := seq.Add(1)
	a, b = fmt.Sprintf("cmpa%d", n), fmt.Sprintf("cmpb%d", n)
	for _, name := range []string{a, b} {
		if err := seats.CreateViewsTable(context.Background(), db, name); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestAfterSwapSaysWhyVersionsDiffer: a rebuild run while commands come in
// ends with versions that differ — the previous one stops getting updates
// at the swap — and said so in one line of 2,558 characters, its item
// names run together (customer#cust1-0h9show-1#r48), nothing saying why,
// so a user took the rebuild for failed. The summary says why, counts what
// the swap explains (items only in the new version, items with a higher
// version there), lists a few items as (pk, sk) and counts the rest, and
// names what the swap does not explain.
func TestAfterSwapSaysWhyVersionsDiffer(t *testing.T) {
	ctx := context.Background()
	db := dynamodb.NewFromConfig(awsCfg)
	put := func(table, pk, sk string, version int) {
		t.Helper()
		item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"version": &types.AttributeValueMemberN{Value: strconv.Itoa(version)}, "status": &types.AttributeValueMemberS{Value: "reserved"}}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("commands after the swap", func(t *testing.T) {
		a, b := twoVersions(t, db)
		for _, tb := range []string{a, b} {
			put(tb, "customer#cust1-0h9", "show-1#r1", 2)
		}
		put(a, "show#show-1", "availability", 2)
		put(b, "show#show-1", "availability", 66)
		for i := range 64 {
			put(b, fmt.Sprintf("customer#cust%d-0h9", i%3), fmt.Sprintf("show-1#r%02d", i+2), i+3)
		}
		d, err := projection.Compare(ctx, db, a, b)
		if err != nil {
			t.Fatal(err)
		}
		out := d.AfterSwap()
		for _, want := range []string{
			"64 only in " + b + ": created after the swap",
			"(customer#cust0-0h9, show-1#r02)",
			"and 59 more",
			"1 with a higher version in " + b + ": updated after the swap",
			"every difference is one the swap explains",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("after the swap: want %q in\n%s", want, out)
			}
		}
		if strings.Contains(out, "0h9show") || len(out) > 1500 || strings.Count(out, "\n") > 5 {
			t.Errorf("after the swap: want a few short lines, item names apart; %d bytes:\n%s", len(out), out)
		}
	})
	t.Run("differences the swap does not explain", func(t *testing.T) {
		a, b := twoVersions(t, db)
		put(a, "customer#cust1-0h9", "show-1#r1", 2)
		put(a, "show#show-1", "availability", 5)
		put(b, "show#show-1", "availability", 4)
		d, err := projection.Compare(ctx, db, a, b)
		if err != nil {
			t.Fatal(err)
		}
		out := d.AfterSwap()
		if !strings.Contains(out, "not explained by the swap — 1 only in "+a+": (customer#cust1-0h9, show-1#r1); 1 differing without a higher version in "+b+": (show#show-1, availability) (eventstore compare") ||
			strings.Contains(out, "every difference is one the swap explains") {
			t.Errorf("an item only in the previous version and one older in the new: want them named as not explained by the swap:\n%s", out)
		}
	})
}
