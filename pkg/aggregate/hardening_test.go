package aggregate_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"math"
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

	"github.com/tributary-dev/tributary/internal/memdb"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
)

// hardened is a processor with a quarantine table, over its own tables.
type hardened struct {
	cfg        *pipeline.Config
	views      *state.Views
	proc       *aggregate.Processor
	quarantine string
	store      *throttlingStore
	mem        *memdb.DB // the in-process store, for a test of many records (newHardenedInProcess); nil: moto
}

// throttlingStore throttles the next n window writes, as DynamoDB does
// under load: the only fault a stand-in cannot show on demand.
type throttlingStore struct {
	memdb.Client
	throttle atomic.Int64
}

func (s *throttlingStore) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.throttle.Add(-1) >= 0 {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected throttle")}
	}
	return s.Client.UpdateItem(ctx, in, opts...)
}

func newHardened(t *testing.T, config string, quarantine string) *hardened {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table := fmt.Sprintf("hardened-%d", tableSeq.Add(1))
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if quarantine == "" {
		quarantine = fmt.Sprintf("quarantine-%d", tableSeq.Add(1))
		if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
			t.Fatal(err)
		}
	}
	return hardenedOn(cfg, db, table, quarantine)
}

func hardenedOn(cfg *pipeline.Config, db memdb.Client, table, quarantine string, opts ...aggregate.Option) *hardened {
	store := &throttlingStore{Client: db}
	views := state.NewViews(store, table, cfg.Aggregates)
	p := aggregate.New(cfg, views, nil, "", append([]aggregate.Option{aggregate.WithLogger(quiet),
		aggregate.WithDedupe(aggregate.NewLedger(db, table, cfg)),
		aggregate.WithSetAside(setaside.New(db, quarantine, setaside.WithFunction("aggregate")))}, opts...)...)
	return &hardened{cfg: cfg, views: views, proc: p, quarantine: quarantine, store: store}
}

// newHardenedInProcess is newHardened on the in-process store (memdb,
// which answers these requests as moto does; the fault harness checks it
// against moto), for a test that writes tens of thousands of records.
func newHardenedInProcess(t *testing.T, config string, opts ...aggregate.Option) *hardened {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable, "quarantine": memdb.QuarantineTable})
	h := hardenedOn(cfg, mem, "views", "quarantine", opts...)
	h.mem = mem
	return h
}

const hardShard = "shardId-000000000007"

// rawRecord is a Kinesis record holding data as Lambda delivers it.
func rawRecord(seq int, key string, data []byte, at time.Time) events.KinesisEventRecord {
	s := strconv.Itoa(seq)
	return events.KinesisEventRecord{EventID: hardShard + ":" + s, EventSource: "aws:kinesis",
		EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
		Kinesis:        events.KinesisRecord{SequenceNumber: s, PartitionKey: key, Data: data, ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}}
}

// view is an envelope whose data is raw JSON.
func view(id, key string, at time.Time, data string) []byte {
	ts := at.UTC().Format(time.RFC3339Nano)
	return []byte(fmt.Sprintf(`{"id":%q,"type":"view","key":%q,"occurredAt":%q,"sentAt":%q,"receivedAt":%q,"data":%s}`, id, key, ts, ts, ts, data))
}

// quarantined reads what the function set aside, by sequence number (the
// records here fit one item each, so no chunks to reassemble).
func (h *hardened) quarantined(t *testing.T) map[string]setaside.Item {
	t.Helper()
	got := map[string]setaside.Item{}
	keep := func(raw map[string]types.AttributeValue) {
		var it setaside.Item
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			t.Fatal(err)
		}
		if it.Kind == setaside.ItemSetAside {
			got[it.SequenceNumber] = it
		}
	}
	if h.mem != nil {
		for _, raw := range h.mem.Items(h.quarantine) {
			keep(raw)
		}
		return got
	}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(h.quarantine)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			keep(raw)
		}
	}
	return got
}

func (h *hardened) window(t *testing.T, key, kind string, from, to time.Time) []state.View {
	t.Helper()
	vs, err := h.views.Query(context.Background(), h.cfg.Name, key, kind, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

const sumConfig = `{"name":"hard","key":"key","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],
 "aggregates":["count","sum","max"],"outOfOrderness":"1s","partitionKeyIsGroupingKey":true}`

// TestRecordsThatCanNeverBeAppliedAreSetAside: an overflowing value, a
// malformed record, a field of the wrong type, an id reused with other
// content, a data field twice and a field in another case are each set aside with their data and a reason naming the field;
// the other records of the batch are applied, and the shard moves on (no
// batch item failure) and its windows still close.
func TestRecordsThatCanNeverBeAppliedAreSetAside(t *testing.T) {
	h := newHardened(t, sumConfig, "")
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "k", view("e1", "k", at, `{"ms":5}`), at),
		rawRecord(2, "k", view("e2", "k", at, `{"ms":1.7e308}`), at),
		rawRecord(3, "k", []byte(`{"id":"e3","type":`), at),
		rawRecord(4, "k", view("e4", "k", at, `{"ms":"fast"}`), at),
		rawRecord(5, "k", view("e5", "k", at, `{"ms":1.7e308}`), at),
		rawRecord(6, "k", view("e1", "k", at, `{"ms":6}`), at), // e1 again, other content
		rawRecord(7, "k", view("e7", "k", at, `{"ms":7}`), at),
		// Put on the stream by a producer itself, past ingest: JSON that
		// means two things (a field twice, a name in another case).
		rawRecord(8, "k", view("e8", "k", at, `{"ms":100,"ms":900000}`), at),
		rawRecord(9, "k", []byte(`{"id":"e9","type":"view","Key":"k","occurredAt":"2026-12-01T09:00:10Z","sentAt":"2026-12-01T09:00:10Z","data":{"ms":9}}`), at),
		// JSON, but no envelope: unparseable as an array is, not one
		// missing its id.
		rawRecord(10, "k", []byte(`null`), at),
	}}
	resp, err := h.proc.HandleBatch(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch item failures %v: the shard would be held back", resp.BatchItemFailures)
	}
	got := h.quarantined(t)
	want := map[string]struct{ field, kind string }{
		"2": {"data.ms", setaside.KindOverflow}, "3": {"", setaside.KindUnparseable},
		"4": {"data.ms", setaside.KindInvalid}, "5": {"data.ms", setaside.KindOverflow},
		"6": {"id", setaside.KindDuplicateConflict},
		"8": {"data.ms", setaside.KindInvalid}, "9": {"Key", setaside.KindInvalid},
		"10": {"", setaside.KindUnparseable},
	}
	for seq, w := range want {
		it, ok := got[seq]
		switch {
		case !ok:
			t.Errorf("record %s was not set aside", seq)
		case it.Field != w.field || it.Category != w.kind || it.Reason == "" || string(it.Data) != string(ev.Records[mustAtoi(seq)-1].Kinesis.Data):
			t.Errorf("record %s set aside as field %q kind %q reason %q data %q; want field %q kind %q with its data", seq, it.Field, it.Category, it.Reason, it.Data, w.field, w.kind)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d records set aside, want %d", len(got), len(want))
	}
	if !strings.Contains(got["10"].Reason, "must be a JSON object, not null") {
		t.Errorf("record 10 (null) set aside saying %q; want it to say the record must be a JSON object", got["10"].Reason)
	}
	if !strings.Contains(got["2"].Reason, "data.ms") || !strings.Contains(got["6"].Reason, `"e1"`) {
		t.Errorf("reasons do not name the field: %q, %q", got["2"].Reason, got["6"].Reason)
	}
	// The windows close, and hold the records that could be applied.
	if _, err := h.proc.Tick(ctx, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proc.Tick(ctx, at.Add(2*time.Hour)); err != nil {
		t.Fatalf("finalizing: %v", err)
	}
	vs := h.window(t, "k", h.cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour))
	if len(vs) != 1 || !vs[0].Final || vs[0].Result.Count != 2 || vs[0].Result.Sum != 12 {
		t.Fatalf("windows %+v, want one final window of e1 (5) and e7 (7)", vs)
	}
}

// TestGroupingKeysFromDataAreBounded: a grouping key read from data that is
// empty or longer than an envelope's key may be (256 characters) can never
// key a window item; it is set aside naming the field, and the shard moves
// on, where a 3,000-character key used to fail the batch at DynamoDB's key
// limit on every retry. One holding a control character, which ingest
// refuses in an envelope's key, is set aside too, where it used to key
// window items, result ids and log lines.
func TestGroupingKeysFromDataAreBounded(t *testing.T) {
	const config = `{"name":"hardkey","key":"data.user","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"]}`
	h := newHardened(t, config, "")
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	tests := []struct {
		name, user string
		aside      bool
	}{
		{"a key", `"u-1"`, false},
		{"256 characters", `"` + strings.Repeat("é", 256) + `"`, false},
		{"empty", `""`, true},
		{"257 characters", `"` + strings.Repeat("é", 257) + `"`, true},
		{"3,000 characters", `"` + strings.Repeat("u", 3000) + `"`, true},
		// Ingest refuses a control character in an envelope's key; one in
		// data would have keyed items and result ids all the same.
		{"a newline", `"u-1\nforged log line"`, true},
		{"a NUL", `"u\u0000"`, true},
		{"DEL", `"u\u007f"`, true},
	}
	ev := events.KinesisEvent{}
	for i, tt := range tests {
		ev.Records = append(ev.Records, rawRecord(i+1, "k", view(fmt.Sprint("e", i+1), "k", at, `{"ms":5,"user":`+tt.user+`}`), at))
	}
	resp, err := h.proc.HandleBatch(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch item failures %v: the shard would be held back", resp.BatchItemFailures)
	}
	got := h.quarantined(t)
	for i, tt := range tests {
		it, aside := got[strconv.Itoa(i+1)]
		switch {
		case aside != tt.aside:
			t.Errorf("%s: set aside %v, want %v", tt.name, aside, tt.aside)
		case aside && (it.Field != "data.user" || it.Category != setaside.KindInvalid || !strings.Contains(it.Reason, "grouping key")):
			t.Errorf("%s: set aside as field %q kind %q reason %q; want field data.user, invalid, naming the grouping key", tt.name, it.Field, it.Category, it.Reason)
		}
	}
}

// TestHandMadeEventIsRefusedNamingTheField: an event pasted into the
// console's Test tab without the sequence number or the eventID Lambda
// always sends fails the invocation with an error naming the record and the
// field, where it used to come back as a failed batch item "" with the
// reason only in the log; nothing is written or set aside.
func TestHandMadeEventIsRefusedNamingTheField(t *testing.T) {
	h := newHardened(t, sumConfig, "")
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	data := base64.StdEncoding.EncodeToString(view("e1", "k", at, `{"ms":5}`))
	other := base64.StdEncoding.EncodeToString(view("e2", "k", at, `{"ms":7}`))
	good := `{"eventID":"shardId-000000000000:1","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"1","data":"` + data + `"}}`
	tests := []struct {
		name, record, want string
	}{
		{"no sequence number", `{"eventID":"shardId-000000000000:2","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"data":"` + other + `"}}`, `Records[1].kinesis.sequenceNumber: is missing`},
		{"a sequence number not in digits", `{"eventID":"shardId-000000000000:2","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"1e5","data":"` + other + `"}}`, `Records[1].kinesis.sequenceNumber: "1e5" is not`},
		{"a sequence number past 64 digits", `{"eventID":"shardId-000000000000:2","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"` + strings.Repeat("9", 65) + `","data":"` + other + `"}}`, `Records[1].kinesis.sequenceNumber: "999`},
		{"no eventID", `{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"2","data":"` + other + `"}}`, `Records[1].eventID: "" does not name the shard`},
		// What a reason repeats of a hostile value is cut, the cut marked.
		{"a sequence number of 100 bytes not in digits", `{"eventID":"shardId-000000000000:2","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"1e` + strings.Repeat("5", 98) + `","data":"` + other + `"}}`, `Records[1].kinesis.sequenceNumber: "1e` + strings.Repeat("5", 78) + `"… is not`},
		{"an eventID of 100 bytes without a shard", `{"eventID":"` + strings.Repeat("s", 100) + `","eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/events","kinesis":{"sequenceNumber":"2","data":"` + other + `"}}`, `Records[1].eventID: "` + strings.Repeat("s", 80) + `"… does not name the shard`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.proc.Invoke(context.Background(), []byte(`{"Records":[`+good+`,`+tt.record+`]}`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Invoke = %s, %v; want an error saying %s", out, err, tt.want)
			}
		})
	}
	if vs := h.window(t, "k", h.cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour)); len(vs) != 0 {
		t.Errorf("windows %+v written by refused events", vs)
	}
	if got := h.quarantined(t); len(got) != 0 {
		t.Errorf("%d records set aside from refused events", len(got))
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestThrottledStoreIsRetriedNotSetAside: a transient error fails the
// batch from the records it concerns; nothing is set aside, and the retry
// applies each record once.
func TestThrottledStoreIsRetriedNotSetAside(t *testing.T) {
	h := newHardened(t, sumConfig, "")
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "a", view("a1", "a", at, `{"ms":1}`), at),
		rawRecord(2, "b", view("b1", "b", at, `{"ms":2}`), at),
	}}
	h.store.throttle.Store(1)
	resp, err := h.proc.HandleBatch(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) == 0 {
		t.Fatal("a throttled write was not reported: its record would be lost")
	}
	if got := h.quarantined(t); len(got) != 0 {
		t.Fatalf("a throttled record was set aside: %+v", got)
	}
	resp, err = h.proc.HandleBatch(ctx, ev) // Lambda retries
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("retry: %v %v", resp, err)
	}
	for _, key := range []string{"a", "b"} {
		if vs := h.window(t, key, h.cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour)); len(vs) != 1 || vs[0].Result.Count != 1 {
			t.Fatalf("key %s: %+v, want one window counting 1", key, vs)
		}
	}
}

// TestFailingSetAsideReportsTheRecord: when the quarantine cannot be
// written, the record is reported failed — never dropped — and the batch's
// other records are applied.
func TestFailingSetAsideReportsTheRecord(t *testing.T) {
	h := newHardened(t, sumConfig, "no-such-quarantine-table")
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "k", view("e1", "k", at, `{"ms":1}`), at),
		rawRecord(2, "k", []byte(`not json`), at),
		rawRecord(3, "k", view("e3", "k", at, `{"ms":3}`), at),
	}}
	resp, err := h.proc.HandleBatch(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
		t.Fatalf("failures %v, want the record that could not be set aside (2)", resp.BatchItemFailures)
	}
}

// hotSessionConfig is a session and a day's tumbling window of a value
// and its distinct users, for the busy keys' tests.
const hotSessionConfig = `{"name":"hot","key":"key","value":"data.ms","distinct":"data.user",
 "windows":[{"kind":"session","gap":"30s"},{"kind":"tumbling","size":"24h"}],
 "aggregates":["count","max","distinct"],"outOfOrderness":"1s","partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`

// hotUser is record seq's data in the busy keys' tests: 3,000 values, 5,000 users.
func hotUser(seq int) string { return fmt.Sprintf(`{"ms":%d,"user":"u%d"}`, seq%3000, seq%5000) }

// hotKey sends 40 batches of 1,000 records of one key, step apart with no
// pause, through h, the data of record seq data(seq), and returns the
// last record's sequence number and time; a batch that reports a failure
// stops the test: the shard is stuck.
func hotKey(t *testing.T, h *hardened, start time.Time, step time.Duration, data func(seq int) string) (int, time.Time) {
	t.Helper()
	ctx := context.Background()
	seq, at := 0, start
	for b := 0; b < 40; b++ {
		var ev events.KinesisEvent
		for i := 0; i < 1000; i++ {
			seq++
			at = at.Add(step)
			ev.Records = append(ev.Records, rawRecord(seq, "hot", view(fmt.Sprint("e", seq), "hot", at, data(seq)), at))
		}
		resp, err := h.proc.HandleBatch(ctx, ev)
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		if len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: failures %v: the shard is stuck", b, resp.BatchItemFailures)
		}
	}
	return seq, at
}

// TestHotKeySessionIsHeldAsItsAggregate: one key sending without the pause
// that closes its session (40,000 records, 100 ms apart) keeps a small
// keyed state — its session held as its aggregate, as Kafka Streams holds
// one — and every record is applied: none set aside, the session counts
// them all, and the tumbling window agrees. The key was set aside after
// some 30,000 records when the state held every record.
func TestHotKeySessionIsHeldAsItsAggregate(t *testing.T) {
	h := newHardenedInProcess(t, hotSessionConfig)
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	seq, at := hotKey(t, h, start, 100*time.Millisecond, hotUser)
	if got := h.quarantined(t); len(got) != 0 {
		t.Fatalf("%d of the hot key's records set aside, want none", len(got))
	}
	largest := 0
	for _, it := range h.mem.Items("views") {
		if sk, _ := it["sk"].(*types.AttributeValueMemberS); sk != nil && strings.HasPrefix(sk.Value, "session:30s") {
			largest = max(largest, limits.ItemSize(it))
		}
	}
	if largest == 0 || largest > 16<<10 {
		t.Fatalf("the hot key's session state takes %d bytes after %d records, want at most 16 KB", largest, seq)
	}
	for _, tick := range []time.Time{at.Add(time.Hour), at.Add(2 * time.Hour)} {
		if _, err := h.proc.Tick(ctx, tick); err != nil {
			t.Fatal(err)
		}
	}
	sessions := h.window(t, "hot", "session:30s", start.Add(-time.Hour), at.Add(time.Hour))
	if len(sessions) != 1 {
		t.Fatalf("%d sessions %+v, want the one the key never paused", len(sessions), sessions)
	}
	r := sessions[0].Result
	if !sessions[0].Final || r.Count != uint64(seq) || r.Max != 2999 || math.Abs(float64(r.Distinct)-5000) > 100 {
		t.Fatalf("session %+v: want final, count %d, max 2999, about 5,000 distinct users", sessions[0], seq)
	}
	var total uint64
	for _, v := range h.window(t, "hot", "tumbling:24h0m0s", start.Add(-24*time.Hour), start.Add(24*time.Hour)) {
		total += v.Result.Count
	}
	if total != uint64(seq) {
		t.Fatalf("the tumbling window counts %d, want all %d records", total, seq)
	}
}

// TestLargeBatchOfOneSessionIsTaken: one batch of 10,000 records of one
// key, 10 ms apart, is more than the state's budget at its records'
// largest size (10,000 × 45 bytes), but they make one run of one session,
// held as its aggregate: the budget counts them so (sessionFits), and none
// is set aside.
func TestLargeBatchOfOneSessionIsTaken(t *testing.T) {
	const config = `{"name":"big","key":"key","value":"data.ms",
	 "windows":[{"kind":"session","gap":"30s"}],
	 "aggregates":["count","sum"],"outOfOrderness":"1s","partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`
	h := newHardenedInProcess(t, config)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ev events.KinesisEvent
	for seq := 1; seq <= 10_000; seq++ {
		at = at.Add(10 * time.Millisecond)
		ev.Records = append(ev.Records, rawRecord(seq, "big", view(fmt.Sprint("e", seq), "big", at, fmt.Sprintf(`{"ms":%d.25}`, seq)), at))
	}
	resp, err := h.proc.HandleBatch(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("the batch: %v %v", resp, err)
	}
	if got := h.quarantined(t); len(got) != 0 {
		t.Fatalf("%d records set aside, want none", len(got))
	}
	for _, tick := range []time.Time{at.Add(time.Hour), at.Add(2 * time.Hour)} {
		if _, err := h.proc.Tick(ctx, tick); err != nil {
			t.Fatal(err)
		}
	}
	sessions := h.window(t, "big", "session:30s", at.Add(-time.Hour), at.Add(time.Hour))
	if len(sessions) != 1 || sessions[0].Result.Count != 10_000 {
		t.Fatalf("sessions %+v, want one counting all 10,000", sessions)
	}
}

// TestHotKeyPastItsBudgetIsSetAside: a key whose records come newest first
// (a backfill in reverse), each accepted into its one session but late —
// so held one by one, never as a run — fills its keyed state; from then
// on its records are set aside (in every window kind, so the kinds agree),
// the shard moves on, and once its session closes the key is taken again.
func TestHotKeyPastItsBudgetIsSetAside(t *testing.T) {
	h := newHardenedInProcess(t, hotSessionConfig)
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	seq, at := hotKey(t, h, start, -100*time.Millisecond, hotUser)
	got := h.quarantined(t)
	for _, it := range got {
		if it.Category != setaside.KindStateBudget || it.Field != "key" || !strings.Contains(it.Reason, `"hot"`) {
			t.Fatalf("set aside as %q field %q: %s", it.Category, it.Field, it.Reason)
		}
	}
	aside := len(got)
	applied := seq - aside
	t.Logf("one key, newest first, 100 ms apart: %d records applied, %d set aside", applied, aside)
	if aside == 0 || applied < 20_000 {
		t.Fatalf("%d applied and %d set aside: want the budget reached after at least 20,000", applied, aside)
	}
	// The tumbling window agrees with the session: it counts what was applied.
	var total uint64
	for _, v := range h.window(t, "hot", "tumbling:24h0m0s", start.Add(-48*time.Hour), start.Add(24*time.Hour)) {
		total += v.Result.Count
	}
	if total != uint64(applied) {
		t.Fatalf("tumbling windows count %d, want the %d applied records", total, applied)
	}
	// The key goes quiet; the ticker closes its session and prunes its
	// points; its next record is applied again.
	for _, tick := range []time.Time{start.Add(time.Hour), start.Add(2 * time.Hour)} {
		if _, err := h.proc.Tick(ctx, tick); err != nil {
			t.Fatal(err)
		}
	}
	later := start.Add(3 * time.Hour)
	_ = at
	resp, err := h.proc.HandleBatch(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(seq+1, "hot", view("after", "hot", later, `{"ms":1,"user":"u1"}`), later)}})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("after the pause: %v %v", resp, err)
	}
	if n := len(h.quarantined(t)); n != aside {
		t.Fatalf("the record after the pause was set aside too (%d, was %d)", n, aside)
	}
}

// TestBusySlidingWindowFinalizesInRounds: a batch of 1,000 records of one
// key 100 ms apart makes as many final sliding windows, each with its
// distinct sketch (a few KB), more than one write of the keyed state holds
// (it failed with DynamoDB's item size limit, and the shard stopped): the
// finalize records and publishes them a state's worth at a time.
func TestBusySlidingWindowFinalizesInRounds(t *testing.T) {
	const config = `{"name":"busy","key":"key","value":"data.ms","distinct":"data.user",
	 "windows":[{"kind":"sliding","difference":"1h"}],
	 "aggregates":["count","max","distinct"],"outOfOrderness":"0s","partitionKeyIsGroupingKey":true,"dedupeHorizon":"0s"}`
	h := newHardenedInProcess(t, config)
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var ev events.KinesisEvent
	at := start
	for seq := 1; seq <= 1000; seq++ {
		at = at.Add(100 * time.Millisecond)
		ev.Records = append(ev.Records, rawRecord(seq, "busy", view(fmt.Sprint("e", seq), "busy", at, fmt.Sprintf(`{"ms":1,"user":"u%d"}`, seq)), at))
	}
	resp, err := h.proc.HandleBatch(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("the batch: %v %v", resp, err)
	}
	for _, tick := range []time.Time{at.Add(time.Hour), at.Add(2 * time.Hour)} { // the first notes the idle shard
		if _, err := h.proc.Tick(ctx, tick); err != nil {
			t.Fatalf("tick: %v", err)
		}
	}
	wins := h.window(t, "busy", "sliding:1h0m0s", start.Add(-2*time.Hour), at.Add(2*time.Hour))
	largest := uint64(0)
	for _, v := range wins {
		if !v.Final {
			t.Fatalf("window %s not final after the tick", v.Window.ID())
		}
		largest = max(largest, v.Result.Count)
	}
	if len(wins) < 1000 || largest != 1000 {
		t.Fatalf("%d sliding windows, the largest counting %d: want one a record at least, one counting all 1,000", len(wins), largest)
	}
}

// TestTimesOutOfRangeAreSetAsideAndLeaveTheWatermark: a hostile producer's
// times — an event of the year 9999 stamped by ingest (its clock correction
// would saturate), one written straight to the stream with every time in
// the last minute of 9999 (its window would end in the year 10000, which
// no window id reads back), and one whose own receivedAt is an hour after
// the record reached the stream (an event time from the future) — are each
// set aside naming the field. The batch succeeds, the other key's event is
// counted in its window, the shard's watermark does not move past it, and
// the ticker still runs.
func TestTimesOutOfRangeAreSetAsideAndLeaveTheWatermark(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	at := func(tm time.Time) string { return tm.Format(time.RFC3339Nano) }
	envelope := func(occurred, sent, received string) []byte {
		return []byte(fmt.Sprintf(`{"id":"hostile","type":"view","key":"attacker","occurredAt":%q,"sentAt":%q,"receivedAt":%q,"data":{"ms":1}}`, occurred, sent, received))
	}
	tests := []struct {
		name      string
		data      []byte
		wantField string
	}{
		{"year 9999 through ingest", envelope("9999-12-31T23:00:00Z", "9999-12-31T23:00:01Z", at(now)), "occurredAt"},
		{"year 9999 straight to the stream", envelope("9999-12-31T23:59:30Z", "9999-12-31T23:59:30Z", "9999-12-31T23:59:30Z"), "occurredAt"},
		{"receivedAt an hour after arrival", envelope(at(now.Add(time.Hour)), at(now.Add(time.Hour)), at(now.Add(time.Hour))), "receivedAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHardenedInProcess(t, sumConfig)
			ctx := context.Background()
			resp, err := h.proc.HandleBatch(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
				rawRecord(1, "attacker", tt.data, now),
				rawRecord(2, "victim", view("good", "victim", now, `{"ms":10}`), now),
			}})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("batch failed (the shard would be blocked): failures %v, err %v", resp.BatchItemFailures, err)
			}
			q := h.quarantined(t)
			if it, ok := q["1"]; !ok || it.Field != tt.wantField {
				t.Fatalf("hostile record: set aside %+v, want it set aside naming %s", q, tt.wantField)
			}
			marks, err := h.views.Watermarks(ctx, h.cfg.Name)
			if err != nil {
				t.Fatal(err)
			}
			if wm := marks[hardShard].Current(); wm.After(now) {
				t.Errorf("watermark %s moved past the good event at %s", wm, now)
			}
			// The shard moves on: a later event closes the victim's window.
			later := now.Add(2 * time.Minute)
			if _, err := h.proc.HandleBatch(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{
				rawRecord(3, "victim", view("later", "victim", later, `{"ms":10}`), later),
			}}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.proc.Tick(ctx, later); err != nil {
				t.Fatalf("ticker: %v", err)
			}
			vs := h.window(t, "victim", h.cfg.Windows[0].ID(), now.Add(-time.Hour), now.Add(time.Minute))
			if len(vs) != 1 || vs[0].Result.Count != 1 || !vs[0].Final {
				t.Errorf("victim's window %+v, want one final window counting its event", vs)
			}
		})
	}
}

// TestGroupingKeyFromDataMustBeThePartitionKey: a pipeline that groups by a
// data field and says producers use it as the partition key
// (partitionKeyIsGroupingKey) sets aside a record whose field is not its
// partition key, naming the field and both keys, as the join does. Before,
// a new user's record with key "other-key" and data.shop "shop-1" was
// counted in shop-1's session and tumbling windows from another shard than
// shop-1's other records, each shard closing them by its own watermark.
// Without the declaration nothing is checked: the file then says producers
// make no such promise.
func TestGroupingKeyFromDataMustBeThePartitionKey(t *testing.T) {
	const declared = `{"name":"shops","key":"data.shop","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"],"partitionKeyIsGroupingKey":true}`
	const undeclared = `{"name":"shops2","key":"data.shop","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"]}`
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		name, config string
		aside        bool
	}{
		{"declared", declared, true},
		{"not declared", undeclared, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHardened(t, tc.config, "")
			ev := events.KinesisEvent{Records: []events.KinesisEventRecord{
				rawRecord(1, "shop-1", view("e1", "shop-1", at, `{"ms":5,"shop":"shop-1"}`), at),
				rawRecord(2, "other-key", view("e2", "other-key", at, `{"ms":7,"shop":"shop-1"}`), at),
			}}
			resp, err := h.proc.HandleBatch(context.Background(), ev)
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("HandleBatch = %v, %v", resp, err)
			}
			got := h.quarantined(t)
			it, aside := got["2"]
			if aside != tc.aside || len(got) > 1 {
				t.Fatalf("set aside %v, want record 2 set aside: %v", got, tc.aside)
			}
			if aside && (it.Field != "data.shop" || it.Category != setaside.KindInvalid || !strings.Contains(it.Reason, `"shop-1"`) ||
				!strings.Contains(it.Reason, `"other-key"`) || !strings.Contains(it.Reason, "partitionKeyIsGroupingKey")) {
				t.Errorf("set aside as field %q kind %q reason %q; want data.shop, invalid, naming both keys and the setting", it.Field, it.Category, it.Reason)
			}
			if _, err := h.proc.Tick(context.Background(), at.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			want := uint64(2)
			if tc.aside {
				want = 1
			}
			vs := h.window(t, "shop-1", h.cfg.Windows[0].ID(), at.Add(-time.Hour), at.Add(time.Hour))
			if len(vs) != 1 || vs[0].Result.Count != want {
				t.Fatalf("shop-1's windows %+v, want one of %d records", vs, want)
			}
		})
	}
}

// TestWithoutASinkTheReasonIsLogged: a processor without a set-aside sink
// (a tool's; replay's rebuild once ran so) reports a record that can never be applied failed, and
// logs why, naming the record and the field: a rebuild skipped such records
// saying only "see the processor's log for why", and the log said nothing.
func TestWithoutASinkTheReasonIsLogged(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(sumConfig))
	if err != nil {
		t.Fatal(err)
	}
	mem := memdb.New(map[string]memdb.Schema{"views": memdb.ViewsTable})
	var logged strings.Builder
	p := aggregate.New(cfg, state.NewViews(mem, "views", cfg.Aggregates), nil, "",
		aggregate.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))), aggregate.WithDedupe(aggregate.NewLedger(mem, "views", cfg)))
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	resp, err := p.HandleBatch(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "k", view("e1", "k", at, `{"ms":1}`), at),
		rawRecord(2, "k", view("e2", "k", at, `{"ms":true}`), at),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2" {
		t.Fatalf("failures %v, want record 2", resp.BatchItemFailures)
	}
	for _, want := range []string{"sequenceNumber=2", "field=data.ms", "must be a number", "no set-aside table"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log does not say %q:\n%s", want, logged.String())
		}
	}
}

// TestSetAsideValueKeepsItsRule: a record set aside for its value field
// keeps, on its item, the rule that field broke — a finite number within
// ±2^53 — so that a record put back corrected is held to it (a string "5"
// or 1e400 in place of an object would only be set aside again). The rule
// is the processor's own: each value it holds the processor applies, and
// each it refuses the processor sets aside. A record set aside for
// another reason keeps none.
func TestSetAsideValueKeepsItsRule(t *testing.T) {
	h := newHardened(t, sumConfig, "")
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	first := events.KinesisEvent{Records: []events.KinesisEventRecord{
		rawRecord(1, "k", view("e1", "k", at, `{"ms":{"v":5}}`), at),
		rawRecord(2, "k", view("e2", "k", at, `{"ms":1.7e308}`), at),
		rawRecord(3, "k", view("e3", "k", at, `{}`), at),
		rawRecord(4, "k", []byte(`{"id":"e4","type":`), at),
	}}
	if _, err := h.proc.HandleBatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	got := h.quarantined(t)
	for _, seq := range []string{"1", "2", "3"} {
		if r := got[seq].Rule; r == nil || *r != *setaside.NumberRule(pipeline.MaxValue) {
			t.Fatalf("record %s set aside for %s (%s) keeps the rule %+v, want a number within ±2^53", seq, got[seq].Field, got[seq].Reason, r)
		}
	}
	if r := got["4"].Rule; r != nil {
		t.Errorf("an unparseable record keeps the rule %+v, want none", r)
	}

	// The processor is the oracle: it applies each value the rule holds
	// and sets aside each it does not.
	rule := got["1"].Rule
	values := []string{`5`, `0.5`, `-0`, `1e-400`, `9007199254740992`, `-9007199254740993`, `-1.7e308`, `9007199254740994`,
		`9223372036854775808`, `1e400`, `"5"`, `null`, `true`, `{}`, `[1]`, ``}
	second := events.KinesisEvent{}
	for i, v := range values {
		data := `{"ms":` + v + `}`
		if v == "" {
			data = `{"other":1}`
		}
		second.Records = append(second.Records, rawRecord(100+i, "k", view(fmt.Sprint("v", i), "k", at, data), at))
	}
	if _, err := h.proc.HandleBatch(ctx, second); err != nil {
		t.Fatal(err)
	}
	got = h.quarantined(t)
	for i, v := range values {
		it, aside := got[strconv.Itoa(100+i)]
		var raw []byte
		if v != "" {
			raw = []byte(v)
		}
		if err := rule.Check(raw); (err != nil) != aside || aside && it.Field != "data.ms" {
			t.Errorf("value %q: the rule says %v; the processor set it aside: %v (%s)", v, err, aside, it.Reason)
		}
	}
}

// TestIntervalStateSeqMustBeASequenceNumber: a window state's "seq" is the
// last record it holds, and the records at or below it are skipped as
// already in the state; one that is no sequence number ("abc", as a
// hand-made event may carry) skipped them without a word. It fails the
// invocation naming the state's member, as a corrupt "wm" does.
func TestIntervalStateSeqMustBeASequenceNumber(t *testing.T) {
	h := newHardened(t, sumConfig, "")
	at := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	for _, seq := range []string{"abc", "-1", strings.Repeat("9", 65)} {
		ev := events.KinesisTimeWindowEvent{
			KinesisEvent:         events.KinesisEvent{Records: []events.KinesisEventRecord{rawRecord(1, "k", view("e1", "k", at, `{"ms":5}`), at)}},
			TimeWindowProperties: events.TimeWindowProperties{ShardID: hardShard, State: map[string]string{"seq": seq}},
		}
		_, err := h.proc.HandleInterval(context.Background(), ev)
		if err == nil || !strings.Contains(err.Error(), `window state "seq"`) || !strings.Contains(err.Error(), "is not a Kinesis sequence number") {
			t.Errorf("seq %.20q: %v; want the invocation failed naming the state's seq", seq, err)
		}
	}
}
