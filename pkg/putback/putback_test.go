package putback_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

var (
	db     *dynamodb.Client
	kin    *kinesis.Client
	serial atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		db, kin = dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
	}))
}

// now is the tests' clock: records arrived a few minutes before it.
var now = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

const shard = "shardId-000000000000"

// fixture is a quarantine table and an events stream of one shard.
type fixture struct {
	t           *testing.T
	table       string
	stream, arn string
	sink        *setaside.Sink
	putter      *putback.Putter
	seq         int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	n := serial.Add(1)
	f := &fixture{t: t, table: fmt.Sprintf("quarantine-%d", n), stream: fmt.Sprintf("events-%d", n)}
	if err := setaside.CreateTable(ctx, db, f.table); err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(f.stream), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	d, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(f.stream)})
	if err != nil {
		t.Fatal(err)
	}
	f.arn = aws.ToString(d.StreamDescriptionSummary.StreamARN)
	f.sink = setaside.New(db, f.table, setaside.WithFunction("Tributary-AggregatePageviews"),
		setaside.WithClock(func() time.Time { return now.Add(-time.Minute) }))
	f.putter = &putback.Putter{DB: db, Streams: kin, Table: f.table, Now: func() time.Time { return now }}
	return f
}

// setAside has the sink set a record aside as a function would, and
// returns its source and sequence number.
func (f *fixture) setAside(rec setaside.Record) (source, seq string) {
	f.t.Helper()
	f.seq++
	if rec.Source == "" {
		rec.Source, rec.Shard = f.arn, shard
	}
	if rec.Sequence == "" {
		rec.Sequence = fmt.Sprintf("4965%020d", f.seq)
	}
	if rec.ArrivedAt.IsZero() {
		rec.ArrivedAt = now.Add(-5 * time.Minute)
	}
	if err := f.sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
		f.t.Fatal(err)
	}
	if rec.Shard == "" {
		return rec.Source, rec.Sequence
	}
	return rec.Source + "/" + rec.Shard, rec.Sequence
}

// onStream is every record of the fixture's stream.
func (f *fixture) onStream() []kintypes.Record {
	f.t.Helper()
	ctx := context.Background()
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: aws.String(shard),
		ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Records
}

const envelope = `{"id":"evt-7","type":"page_view","key":"user-7","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{"ms":"slow"}}`

// A record set aside for a field of its data goes back to the stream it
// came from, with its partition key and its first arrival as receivedAt,
// and its item says so; a second put-back is refused unless Again.
func TestPutBackPutsTheRecordOnItsStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	source, seq := f.setAside(setaside.Record{PartitionKey: "user-7", Data: []byte(envelope),
		Field: "data.ms", Kind: setaside.KindInvalid, Reason: `"slow" is not a number`})

	fixed := []byte(strings.Replace(envelope, `"slow"`, `120`, 1))
	plan, err := f.putter.Prepare(ctx, source, seq, fixed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.putter.Put(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	recs := f.onStream()
	if len(recs) != 1 {
		t.Fatalf("the stream holds %d records, want the one put back", len(recs))
	}
	if got := aws.ToString(recs[0].PartitionKey); got != "user-7" {
		t.Errorf("partition key %q, want user-7", got)
	}
	var env map[string]any
	if err := json.Unmarshal(recs[0].Data, &env); err != nil {
		t.Fatalf("put back data is not JSON: %v: %s", err, recs[0].Data)
	}
	if env["receivedAt"] != "2026-12-05T09:55:00Z" || env["id"] != "evt-7" || env["data"].(map[string]any)["ms"] != 120.0 {
		t.Errorf("put back %s, want the fixed envelope with receivedAt its first arrival 2026-12-05T09:55:00Z", recs[0].Data)
	}
	it, err := setaside.Load(ctx, db, f.table, source, seq)
	if err != nil {
		t.Fatal(err)
	}
	if it.PutBackAt == "" || it.PutBackSequence != res.Sequence || it.PutBackSequence != aws.ToString(recs[0].SequenceNumber) {
		t.Errorf("item marked putBackAt %q putBackSequence %q, want now and %s", it.PutBackAt, it.PutBackSequence, aws.ToString(recs[0].SequenceNumber))
	}

	_, err = f.putter.Prepare(ctx, source, seq, fixed)
	var r *putback.Refusal
	if !errors.As(err, &r) || !r.AlreadyPutBack() || !strings.Contains(err.Error(), res.Sequence) {
		t.Fatalf("second put-back: %v, want a refusal naming the first one's sequence number", err)
	}
	again := *f.putter
	again.Again = true
	if plan, err = again.Prepare(ctx, source, seq, fixed); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Put(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if n := len(f.onStream()); n != 2 {
		t.Errorf("after -again the stream holds %d records, want 2", n)
	}
}

// Every record that cannot go back, or would only be set aside again, is
// refused with a reason a user can act on, and nothing is put.
func TestPutBackRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	big := make([]byte, setaside.MaxDataBytes+10)
	for i := range big {
		big[i] = 'x'
	}
	for _, tc := range []struct {
		name   string
		rec    setaside.Record
		fixed  []byte
		putter func(*putback.Putter)
		want   string
		flag   string
	}{
		{name: "a state-budget record its function took the id of",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "key", Kind: setaside.KindStateBudget, Reason: "full"},
			want: "state-budget: Tributary-AggregatePageviews took the record's event id"},
		// The projector applies the event store's events: a published
		// record the store does not hold is set aside again.
		{name: "a published event the event store does not hold",
			rec: setaside.Record{PartitionKey: "show-1", Data: []byte(envelope), Field: "data.commandId", Kind: setaside.KindNotInLog,
				Reason: "is not what the event store holds at version 3"},
			want: "not-in-log: Tributary-AggregatePageviews applies the events the event store holds, and this record is not one of them (is not what the event store holds at version 3): a copy put back is set aside again"},
		{name: "a duplicate conflict",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "id", Kind: setaside.KindDuplicateConflict, Reason: "reused"},
			want: "expected, nothing to do"},
		{name: "a record its function read in part and took the id of (detect: other rules matched it)",
			rec: setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindOverflow, IDTaken: true,
				Reason: `field data.ms: 1e300 is outside ±9.007199254740992e+15 (sum rule "x3" cannot add it and skip this event; the other rules that read it still match it)`},
			fixed: []byte(strings.Replace(envelope, `"slow"`, `120`, 1)),
			want:  `overflow data.ms: Tributary-AggregatePageviews read the record and took its event id in its dedupe ledger before it set it aside for the part of it that could not read data.ms (field data.ms: 1e300 is outside ±9.007199254740992e+15 (sum rule "x3" cannot add it`},
		{name: "a DynamoDB stream record",
			rec: setaside.Record{Source: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-12-01T00:00:00.000",
				Data: []byte(`{"eventName":"INSERT"}`), Field: "dynamodb.NewImage.bio", Kind: setaside.KindInvalid, Reason: "too long"},
			want: "replay its change by writing its item again"},
		{name: "an SQS message",
			rec:  setaside.Record{Source: "arn:aws:sqs:us-east-1:123456789012:failures", Data: []byte(`garbage`), Kind: setaside.KindUnparseable, Reason: "not JSON"},
			want: "has no stream to go back to"},
		{name: "an output that was never written",
			rec:  setaside.Record{Source: "WindowResults", Sequence: "user-7@3#0", Data: []byte(`{}`), Kind: setaside.KindOutputTooLarge, Reason: "over 1 MiB"},
			want: "it was never on a stream"},
		{name: "data that still does not decode",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(`{"id":"evt-8","type":"page_view","key":"user-7","occurredAt":"yesterday","data":{}}`), Field: "occurredAt", Kind: setaside.KindInvalid, Reason: "not a time"},
			want: "its data would be set aside again: field occurredAt", flag: "data"},
		{name: "fixed data with a key twice",
			rec:   setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"},
			fixed: []byte(`{"id":"evt-7","type":"page_view","key":"user-7","key":"user-8","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{}}`),
			want:  "the record given in its place would be set aside again", flag: "data"},
		{name: "fixed data under another key than its partition key",
			rec:   setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"},
			fixed: []byte(strings.Replace(envelope, `"key":"user-7"`, `"key":"user-9"`, 1)),
			want:  `field key: "user-9" is not the partition key "user-7"`, flag: "data"},
		{name: "data whose field at fault is unchanged",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: `"slow" is not a number`},
			want: `its data holds the data.ms it held when Tributary-AggregatePageviews set the record aside ("slow" is not a number)`, flag: "unchanged"},
		{name: "a corrected record whose field at fault is unchanged",
			rec:   setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"},
			fixed: []byte(strings.Replace(envelope, `"page_view"`, `"click"`, 1)),
			want:  "the record given in its place holds the data.ms it held", flag: "unchanged"},
		{name: "a field at fault that is missing from both",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.amount", Kind: setaside.KindInvalid, Reason: "is required"},
			want: "holds the data.amount it held", flag: "unchanged"},
		{name: "a corrected record made a change data capture record",
			rec:   setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"},
			fixed: []byte(strings.Replace(envelope, `"page_view"`, `"profile_changed"`, 1)),
			want:  `field type: "profile_changed" is a change data capture record type`, flag: "data"},
		{name: "a corrected record with a control character in its id",
			rec:   setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"},
			fixed: []byte(strings.Replace(envelope, `"evt-7"`, `"evt\u00077"`, 1)),
			want:  "field id: holds control character U+0007", flag: "data"},
		{name: "a record past the dedupe horizon",
			rec:  setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), ArrivedAt: now.Add(-2 * time.Hour), Field: "key", Kind: setaside.KindStateUnreadable, Reason: "x"},
			want: "first arrived 2h0m0s ago", flag: "past-horizon"},
		{name: "data kept cut",
			rec:  setaside.Record{PartitionKey: "user-7", Data: big, Kind: setaside.KindUnparseable, Reason: "not JSON"},
			want: "only the start of its data was kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			source, seq := f.setAside(tc.rec)
			p := *f.putter
			if tc.putter != nil {
				tc.putter(&p)
			}
			_, err := p.Prepare(ctx, source, seq, tc.fixed)
			var r *putback.Refusal
			if !errors.As(err, &r) || !strings.Contains(r.Reason, tc.want) || r.Flag != tc.flag {
				t.Fatalf("Prepare: %v, want a refusal with %q and flag %q", err, tc.want, tc.flag)
			}
		})
	}
	if n := len(f.onStream()); n != 0 {
		t.Errorf("the stream holds %d records after refusals only", n)
	}

	// The same record past the horizon goes back with -past-horizon, or
	// when the consumers' horizon is longer.
	source, seq := f.setAside(setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), ArrivedAt: now.Add(-2 * time.Hour),
		Field: "key", Kind: setaside.KindStateUnreadable, Reason: "the key's state does not decode"})
	for _, p := range []putback.Putter{{PastHorizon: true}, {Horizon: 3 * time.Hour}} {
		p.DB, p.Streams, p.Table, p.Now = db, kin, f.table, f.putter.Now
		if _, err := p.Prepare(ctx, source, seq, nil); err != nil {
			t.Errorf("Prepare with %+v: %v", p, err)
		}
	}
	// A record whose cause was elsewhere (the pipeline file changed) goes
	// back unchanged with Unchanged.
	source, seq = f.setAside(setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Field: "data.ms", Kind: setaside.KindInvalid, Reason: "not a number"})
	unchanged := *f.putter
	unchanged.Unchanged = true
	if _, err := unchanged.Prepare(ctx, source, seq, nil); err != nil {
		t.Errorf("Prepare with Unchanged: %v", err)
	}
	if _, err := f.putter.Prepare(ctx, f.arn+"/"+shard, "4965000", nil); !errors.Is(err, putback.ErrNotFound) {
		t.Errorf("Prepare of a record never set aside: %v, want ErrNotFound", err)
	}
}

const checkout = `{"id":"evt-9","type":"checkout","key":"user-9","occurredAt":"2026-12-05T09:54:00Z","sentAt":"2026-12-05T09:54:01Z","data":{"amount":{"value":5},"currency":"EUR"}}`

// A corrected record is held to the rule its field broke, when the item
// keeps one: a pipeline's value set aside as an object and put back as a
// string, 1e400, 2^63 or not at all would only be set aside again, so it
// is refused naming the field and what it must hold; a number the
// pipeline reads goes back. An item set aside before rules were kept is
// judged as before, and Unchanged (the pipeline file changed) skips the
// rule as it skips the check of an unchanged value.
func TestPutBackHoldsTheFieldToItsRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rule := setaside.NumberRule(1 << 53)
	invalid := setaside.Record{PartitionKey: "user-9", Data: []byte(checkout), Field: "data.amount", Kind: setaside.KindInvalid,
		Reason: "record evt-9: field data.amount: must be a number, not an object", Rule: rule}
	overflow := setaside.Record{PartitionKey: "user-9", Data: []byte(strings.Replace(checkout, `{"value":5}`, `1e300`, 1)), Field: "data.amount",
		Kind: setaside.KindOverflow, Reason: "record evt-9: field data.amount: 1e300 is outside ±9.007199254740992e+15, the range a window aggregates without overflow", Rule: rule}
	withAmount := func(v string) []byte {
		if v == "" {
			return []byte(strings.Replace(checkout, `"amount":{"value":5},`, ``, 1))
		}
		return []byte(strings.Replace(checkout, `{"value":5}`, v, 1))
	}
	for _, tc := range []struct {
		name      string
		rec       setaside.Record
		amount    string // "" removes it
		unchanged bool
		want      string // "" when it goes back
	}{
		{name: "a string", rec: invalid, amount: `"5"`, want: "field data.amount: is a string, not a number"},
		{name: "past a float64", rec: invalid, amount: `1e400`, want: "field data.amount: 1e400 is not a finite 64-bit number"},
		{name: "2^63", rec: invalid, amount: `9223372036854775808`, want: "field data.amount: 9223372036854775808 is outside ±9007199254740992"},
		{name: "removed", rec: invalid, amount: ``, want: "field data.amount: is missing"},
		{name: "an overflow removed", rec: overflow, amount: ``, want: "field data.amount: is missing"},
		{name: "an overflow made an array", rec: overflow, amount: `[5]`, want: "field data.amount: is an array, not a number"},
		{name: "a number", rec: invalid, amount: `12.5`},
		{name: "-2^53-1, which the pipeline reads as -2^53", rec: overflow, amount: `-9007199254740993`},
		{name: "an item kept without a rule", rec: setaside.Record{PartitionKey: "user-9", Data: []byte(checkout), Field: "data.amount",
			Kind: setaside.KindInvalid, Reason: "must be a number, not an object"}, amount: `"5"`},
		{name: "unchanged: the pipeline file changed", rec: invalid, amount: `"5"`, unchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			source, seq := f.setAside(tc.rec)
			p := *f.putter
			p.Unchanged = tc.unchanged
			plan, err := p.Prepare(ctx, source, seq, withAmount(tc.amount))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Prepare: %v, want it put back", err)
				}
				if !strings.Contains(string(plan.Data), `"amount":`+tc.amount) {
					t.Errorf("the plan puts %s, want the corrected record", plan.Data)
				}
				return
			}
			var r *putback.Refusal
			if !errors.As(err, &r) || r.Flag != putback.FlagUnchanged || !strings.Contains(r.Reason, "the record given in its place would be set aside again: "+tc.want) ||
				!strings.Contains(r.Reason, "Tributary-AggregatePageviews takes only a JSON number within ±9007199254740992 there") {
				t.Fatalf("Prepare: %v, want a refusal naming the field, %q and what it must hold", err, tc.want)
			}
		})
	}
	if n := len(f.onStream()); n != 0 {
		t.Errorf("the stream holds %d records after plans and refusals only", n)
	}
}

// A record set aside because its partition key was not its key goes back
// under its key; one without an arrival, or with ArriveNow, keeps no
// receivedAt; one whose data spans chunk items goes back whole.
func TestPutBackKeyArrivalAndChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	put := func(p *putback.Putter, source, seq string) []byte {
		t.Helper()
		plan, err := p.Prepare(ctx, source, seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Put(ctx, plan); err != nil {
			t.Fatal(err)
		}
		recs := f.onStream()
		last := recs[len(recs)-1]
		if aws.ToString(last.PartitionKey) != "user-7" {
			t.Errorf("put back with partition key %q, want the envelope's key user-7", aws.ToString(last.PartitionKey))
		}
		return last.Data
	}

	source, seq := f.setAside(setaside.Record{PartitionKey: "device-3", Data: []byte(envelope), Field: "key", Kind: setaside.KindInvalid,
		Reason: `"user-7" is not the record's partition key "device-3"`})
	if data := put(f.putter, source, seq); !strings.Contains(string(data), `"receivedAt":"2026-12-05T09:55:00Z"`) {
		t.Errorf("put back %s, want receivedAt", data)
	}

	now := *f.putter
	now.ArriveNow = true
	source, seq = f.setAside(setaside.Record{PartitionKey: "user-7", Data: []byte(envelope), Kind: setaside.KindStateUnreadable, Field: "key", Reason: "x"})
	if data := put(&now, source, seq); string(data) != envelope {
		t.Errorf("with ArriveNow put back %s, want the data as kept", data)
	}

	pad := strings.Repeat("p", 2*setaside.ChunkBytes)
	long := strings.Replace(envelope, `"ms":"slow"`, `"ms":1,"pad":"`+pad+`"`, 1)
	source, seq = f.setAside(setaside.Record{PartitionKey: "user-7", Data: []byte(long), Kind: setaside.KindStateUnreadable, Field: "key", Reason: "x"})
	if data := put(&now, source, seq); string(data) != long {
		t.Errorf("a chunked record went back as %d bytes, want its %d", len(data), len(long))
	}
}

// List finds the records, newest first, filtered, at most the number
// asked for, without their data, and never lists chunks.
func TestList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	at := func(d time.Duration) *setaside.Sink {
		return setaside.New(db, f.table, setaside.WithFunction("Tributary-Enrich"), setaside.WithClock(func() time.Time { return now.Add(d) }))
	}
	f.sink = at(-3 * time.Hour)
	f.setAside(setaside.Record{PartitionKey: "user-1", Data: []byte(strings.Repeat("x", 2*setaside.ChunkBytes)), Kind: setaside.KindUnparseable, Reason: "old"})
	f.sink = at(-2 * time.Minute)
	f.setAside(setaside.Record{PartitionKey: "user-2", Data: []byte(envelope), Kind: setaside.KindInvalid, Field: "data.ms", Reason: "newer"})
	f.sink = at(-time.Minute)
	f.setAside(setaside.Record{PartitionKey: "user-3", Data: []byte(envelope), Kind: setaside.KindInvalid, Field: "data.ms", Reason: "newest"})
	// A record of a failed range, as quarantine keeps it.
	rec := setaside.Item{Source: f.arn + "/" + shard, SequenceNumber: "4965999", Kind: setaside.ItemRecord, Data: []byte(envelope),
		PartitionKey: "user-4", FailedAt: now.Add(-30 * time.Minute).Format(time.RFC3339Nano), Reason: "retries ran out",
		ExpiresAt: now.Add(setaside.Retention).Unix()}
	av, err := attributevalue.MarshalMap(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: av}); err != nil {
		t.Fatal(err)
	}

	reasons := func(l putback.Listing) string {
		var out []string
		for _, it := range l.Items {
			if len(it.Data) != 0 {
				t.Errorf("%s listed with its data", it.SequenceNumber)
			}
			out = append(out, it.Reason)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name    string
		filter  putback.Filter
		limit   int
		want    string
		matched int
	}{
		{"all, newest first", putback.Filter{}, 10, "newest,newer,retries ran out,old", 4},
		{"at most two", putback.Filter{}, 2, "newest,newer", 4},
		{"by category", putback.Filter{Category: setaside.KindInvalid}, 10, "newest,newer", 2},
		{"by function", putback.Filter{Function: "Tributary-Enrich"}, 10, "newest,newer,old", 3},
		{"by words of the function's name", putback.Filter{Function: "enrich tributary"}, 10, "newest,newer,old", 3},
		{"by a name no function has", putback.Filter{Function: "aggregate-pageviews"}, 10, "", 0},
		{"by source", putback.Filter{Source: f.arn}, 10, "newest,newer,retries ran out,old", 4},
		{"by another source", putback.Filter{Source: "arn:aws:kinesis:us-east-1:123456789012:stream/other"}, 10, "", 0},
		{"since an hour ago", putback.Filter{Since: now.Add(-time.Hour)}, 10, "newest,newer,retries ran out", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pages int
			l, err := putback.List(ctx, db, f.table, tc.filter, tc.limit, func(int, int) { pages++ })
			if err != nil {
				t.Fatal(err)
			}
			if got := reasons(l); got != tc.want || l.Matched != tc.matched {
				t.Errorf("listed %q (%d matched), want %q (%d)", got, l.Matched, tc.want, tc.matched)
			}
			if l.Scanned < 5 || pages == 0 {
				t.Errorf("scanned %d items in %d pages, want every item of the table (chunk included) reported", l.Scanned, pages)
			}
		})
	}
	l, err := putback.List(ctx, db, f.table, putback.Filter{Function: "aggregate-pageviews"}, 10, nil)
	if err != nil || l.Functions["Tributary-Enrich"] != 3 {
		t.Errorf("List by a name no function has: %v, functions %v, want Tributary-Enrich's 3 counted", err, l.Functions)
	}
	if _, err := putback.List(ctx, db, "no-such-table", putback.Filter{}, 10, nil); !errors.Is(err, putback.ErrNoTable) {
		t.Errorf("List of a missing table: %v, want ErrNoTable", err)
	}
	if _, err := putback.List(ctx, db, f.table, putback.Filter{}, putback.MaxList+1, nil); err == nil {
		t.Error("List past MaxList: no error")
	}
}
