package setaside_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

var (
	db     *dynamodb.Client
	serial atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) { db = dynamodb.NewFromConfig(cfg) }))
}

var now = time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)

const streamArn = "arn:aws:kinesis:us-east-1:123456789012:stream/events"

// table creates a quarantine table (the stack's schema).
func table(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("quarantine-%d", serial.Add(1))
	err := setaside.CreateTable(context.Background(), db, name)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// scan is every item of the table, raw.
func scan(t *testing.T, tbl string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	var all []map[string]ddbtypes.AttributeValue
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(tbl), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return all
		}
		start = out.LastEvaluatedKey
	}
}

func kinesisRecord(seq string, data []byte) events.KinesisEventRecord {
	return events.KinesisEventRecord{EventID: "shardId-000000000001:" + seq, EventSourceArn: streamArn,
		Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "user-7", Data: data,
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: now.Add(-time.Minute)}}}
}

func TestSetAsideWritesTheRecordWithItsReason(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	var logs, emf bytes.Buffer
	m := metrics.New(&emf, "aggregate")
	sink := setaside.New(db, tbl, setaside.WithFunction("tributary-aggregate"), setaside.WithMetrics(m),
		setaside.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), setaside.WithClock(func() time.Time { return now }))
	kr := kinesisRecord("49601189658422359378836298521827638475320189012309704722", []byte(`{"data":{"ms":1.7e308}}`))
	rec := setaside.FromKinesis(&kr)
	rec.Field, rec.Kind, rec.Reason = "data.ms", setaside.KindOverflow, "data.ms 1.7e308 would make the window's sum +Inf"
	if err := sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	it, err := setaside.Load(context.Background(), db, tbl, streamArn+"/shardId-000000000001", kr.Kinesis.SequenceNumber)
	if err != nil || it == nil {
		t.Fatalf("Load = %v, %v", it, err)
	}
	want := setaside.Item{Source: streamArn + "/shardId-000000000001", SequenceNumber: kr.Kinesis.SequenceNumber, Kind: setaside.ItemSetAside,
		Data: kr.Kinesis.Data, DataBytes: len(kr.Kinesis.Data), PartitionKey: "user-7", ApproximateArrival: "2026-11-29T10:59:00Z",
		Function: "tributary-aggregate", Field: "data.ms", Category: "overflow", SetAsideAt: "2026-11-29T11:00:00Z",
		ExpiresAt: now.Add(14 * 24 * time.Hour).Unix(), Reason: "data.ms 1.7e308 would make the window's sum +Inf",
		Functions: map[string]setaside.Entry{"tributary-aggregate": {Field: "data.ms", Category: "overflow",
			Reason: "data.ms 1.7e308 would make the window's sum +Inf", SetAsideAt: "2026-11-29T11:00:00Z"}}}
	if fmt.Sprintf("%+v", *it) != fmt.Sprintf("%+v", want) {
		t.Errorf("item\n %+v\nwant\n %+v", *it, want)
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(emf.Bytes(), &doc); err != nil || doc["RecordsSetAside"] != 1.0 || doc["Function"] != "aggregate" {
		t.Errorf("EMF %s: want RecordsSetAside 1 for function aggregate", emf.String())
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	for k, v := range map[string]string{"msg": "record set aside", "field": "data.ms", "kind": "overflow", "shard": "shardId-000000000001",
		"sequenceNumber": kr.Kinesis.SequenceNumber, "reason": want.Reason, "function": "tributary-aggregate"} {
		if line[k] != v {
			t.Errorf("log %s = %v, want %q", k, line[k], v)
		}
	}
}

func TestSetAsideKeepsBigRecordsWhole(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	sink := setaside.New(db, tbl, setaside.WithFunction("enrich"))
	big := bytes.Repeat([]byte("<tag>&</tag>"), (1<<20)/12) // a 1 MiB Kinesis record
	small := []byte(`{"id":"x"}`)
	a, b := kinesisRecord("100", big), kinesisRecord("200", small)
	recs := []setaside.Record{setaside.FromKinesis(&a), setaside.FromKinesis(&b)}
	for i := range recs {
		recs[i].Field, recs[i].Kind, recs[i].Reason = "data", setaside.KindOutputTooLarge, "too big"
	}
	for range 2 { // idempotent: the second call writes the same items
		if err := sink.SetAside(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
	}
	items := scan(t, tbl)
	wantItems := 1 + (len(big)+setaside.ChunkBytes-1)/setaside.ChunkBytes
	if len(items) != wantItems {
		t.Fatalf("%d items, want %d (the small record, and the big one over %d items)", len(items), wantItems, wantItems-1)
	}
	for _, it := range items {
		if n := limits.ItemSize(it); n > limits.DynamoDBItemBytes {
			t.Errorf("item %v is %d bytes, over DynamoDB's limit", it["sequenceNumber"], n)
		}
	}
	got, err := setaside.Load(context.Background(), db, tbl, streamArn+"/shardId-000000000001", "100")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, big) || got.DataBytes != len(big) || got.DataTruncated {
		t.Errorf("reassembled %d bytes (dataBytes %d, truncated %v), want the %d bytes set aside", len(got.Data), got.DataBytes, got.DataTruncated, len(big))
	}
	// The record's own item says how many items hold its data.
	var head setaside.Item
	for _, it := range items {
		if v, _ := it["sequenceNumber"].(*ddbtypes.AttributeValueMemberS); v.Value == "100" {
			if err := attributevalue.UnmarshalMap(it, &head); err != nil {
				t.Fatal(err)
			}
		}
	}
	if head.DataChunks != wantItems-1 || len(head.Data) != setaside.ChunkBytes {
		t.Errorf("head item: dataChunks %d, %d data bytes; want %d and %d", head.DataChunks, len(head.Data), wantItems-1, setaside.ChunkBytes)
	}
	if got, _ := setaside.Load(context.Background(), db, tbl, streamArn+"/shardId-000000000001", "200"); got == nil || !bytes.Equal(got.Data, small) {
		t.Errorf("small record = %+v", got)
	}
}

// throttled answers the first BatchWriteItem call (the chunks of big
// records) with part of its items unprocessed (as DynamoDB does under
// throttling), or fails every call, UpdateItem's (the records' own items)
// too.
type throttled struct {
	*dynamodb.Client
	calls     atomic.Int64
	failCalls bool
}

func (c *throttled) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	n := c.calls.Add(1)
	if c.failCalls {
		return nil, &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	}
	if n > 1 {
		return c.Client.BatchWriteItem(ctx, in, opts...)
	}
	part := map[string][]ddbtypes.WriteRequest{}
	rest := map[string][]ddbtypes.WriteRequest{}
	for tbl, reqs := range in.RequestItems {
		part[tbl], rest[tbl] = reqs[:1], reqs[1:]
	}
	if _, err := c.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: part}, opts...); err != nil {
		return nil, err
	}
	return &dynamodb.BatchWriteItemOutput{UnprocessedItems: rest}, nil
}

func (c *throttled) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.failCalls {
		return nil, &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

func TestSetAsideRetriesUnprocessedItems(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	c := &throttled{Client: db}
	sink := setaside.New(c, tbl, setaside.WithBackoff(func(int) time.Duration { return time.Millisecond }))
	var recs []setaside.Record
	big := bytes.Repeat([]byte("x"), setaside.ChunkBytes+1) // two items each: the second a chunk
	for i := range 5 {
		kr := kinesisRecord(fmt.Sprint(100+i), big)
		r := setaside.FromKinesis(&kr)
		r.Reason = "bad"
		recs = append(recs, r)
	}
	if err := sink.SetAside(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if n := len(scan(t, tbl)); n != 10 || c.calls.Load() != 2 {
		t.Errorf("%d items, chunks in %d calls, want 10 (5 records and their chunks), chunks in 2 (the unprocessed retried)", n, c.calls.Load())
	}
	for i := range 5 {
		if it, err := setaside.Load(context.Background(), db, tbl, streamArn+"/shardId-000000000001", fmt.Sprint(100+i)); err != nil || it == nil || !bytes.Equal(it.Data, big) {
			t.Errorf("record %d: %v, want it whole", 100+i, err)
		}
	}
}

func TestSetAsideErrors(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	ok := kinesisRecord("1", []byte("x"))
	noSource := ok
	noSource.EventSourceArn = ""
	tests := []struct {
		name string
		sink *setaside.Sink
		rec  events.KinesisEventRecord
		want string
	}{
		{"no sink: the records are reported failed, not lost", nil, ok, "no quarantine table"},
		{"throttled: a transient error for the caller to report", setaside.New(&throttled{Client: db, failCalls: true}, tbl), ok, "ProvisionedThroughputExceeded"},
		{"no such table", setaside.New(db, "no-such-table"), ok, "no-such-table"},
		{"a record without its source cannot be kept apart from others", setaside.New(db, tbl), noSource, "no source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sink.SetAside(context.Background(), []setaside.Record{setaside.FromKinesis(&tt.rec)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SetAside = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if err := (*setaside.Sink)(nil).SetAside(context.Background(), []setaside.Record{setaside.FromKinesis(&ok)}); !errors.Is(err, setaside.ErrNoSink) {
		t.Errorf("nil sink: %v, want ErrNoSink", err)
	}
}

// TestEveryAttributeIsBounded: items whose attributes a caller filled from
// hostile input (a 450 KB failedAt, 600-digit sequence numbers, a thousand
// redacted fields, a megabyte of reason) are still written, cut to their
// bounds; keys out of bounds are ErrUnwritable, so a caller knows no retry
// helps.
func TestEveryAttributeIsBounded(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	sink := setaside.New(db, tbl)
	src := streamArn + "/shardId-000000000001"
	huge := func(n int) string { return strings.Repeat("9", n) }
	many := make([]string, 1000)
	for i := range many {
		many[i] = "dynamodb.NewImage." + huge(100)
	}
	items := []setaside.Item{
		{Source: src, SequenceNumber: "1-2", Kind: setaside.ItemMissing, Reason: "gone", ExpiresAt: now.Unix(),
			FailedAt: huge(450 << 10), StartSequenceNumber: huge(600), EndSequenceNumber: huge(600),
			ApproximateArrivalOfFirstRecord: huge(100 << 10), ApproximateArrivalOfLastRecord: huge(100 << 10)},
		{Source: src, SequenceNumber: "3", Kind: setaside.ItemRecord, Data: []byte("d"), Reason: huge(1 << 20), Redacted: many,
			ApproximateArrival: huge(100 << 10), FunctionArn: huge(100 << 10), Condition: huge(100 << 10), ExpiresAt: now.Unix()},
	}
	if err := sink.Keep(context.Background(), items); err != nil {
		t.Fatalf("Keep = %v; want the items written, cut to their bounds", err)
	}
	kr := kinesisRecord("4", []byte("poison"))
	rec := setaside.FromKinesis(&kr)
	rec.Field, rec.Reason, rec.Redacted, rec.PartitionKey = huge(1<<20), huge(1<<20), many, huge(1<<20)
	if err := sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
		t.Fatalf("SetAside = %v; want the record written, cut to its bounds", err)
	}
	for _, seq := range []string{"1-2", "3", "4"} {
		it, err := setaside.Load(context.Background(), db, tbl, src, seq)
		if err != nil || it == nil {
			t.Fatalf("Load %s = %v, %v", seq, it, err)
		}
		for name, v := range map[string]string{"failedAt": it.FailedAt, "startSequenceNumber": it.StartSequenceNumber,
			"approximateArrival": it.ApproximateArrival, "field": it.Field, "reason": it.Reason, "partitionKey": it.PartitionKey} {
			if len(v) > 4096 {
				t.Errorf("item %s: %s is %d bytes, not bounded", seq, name, len(v))
			}
		}
		if len(it.Redacted) > 8 {
			t.Errorf("item %s: %d redacted fields, not bounded", seq, len(it.Redacted))
		}
	}

	for _, tt := range []struct{ name, source, seq string }{
		{"sort key over 1,024 bytes", src, huge(1201)},
		{"partition key over 2,048 bytes", huge(2049), "1"},
		{"no sequence number", src, ""},
	} {
		err := sink.Keep(context.Background(), []setaside.Item{{Source: tt.source, SequenceNumber: tt.seq, Kind: setaside.ItemMissing, ExpiresAt: now.Unix()}})
		if !errors.Is(err, setaside.ErrUnwritable) {
			t.Errorf("%s: Keep = %v, want ErrUnwritable", tt.name, err)
		}
	}
}

func TestKeepNeverReplacesASetAsideRecord(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	sink := setaside.New(db, tbl)
	src := streamArn + "/shardId-000000000001"
	kr := kinesisRecord("300", []byte("poison"))
	rec := setaside.FromKinesis(&kr)
	rec.Field, rec.Reason = "occurredAt", "occurredAt: not a time"
	if err := sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	ranged := func(seq string) setaside.Item {
		return setaside.Item{Source: src, SequenceNumber: seq, Kind: setaside.ItemRecord, Data: []byte("from the range"),
			Condition: "RetryAttemptsExhausted", Reason: "batch retries exhausted", ExpiresAt: now.Unix()}
	}
	if err := sink.Keep(context.Background(), []setaside.Item{ranged("300"), ranged("301")}); err != nil {
		t.Fatal(err)
	}
	if it, _ := setaside.Load(context.Background(), db, tbl, src, "300"); it == nil || it.Kind != setaside.ItemSetAside || it.Reason != rec.Reason {
		t.Errorf("record 300 = %+v; want the set-aside item with its own reason", it)
	}
	if it, _ := setaside.Load(context.Background(), db, tbl, src, "301"); it == nil || it.Kind != setaside.ItemRecord || it.Condition != "RetryAttemptsExhausted" {
		t.Errorf("record 301 = %+v; want the range's record", it)
	}
	// The other way round: a function setting aside a record quarantine
	// kept from a range gives the precise reason.
	kr = kinesisRecord("301", []byte("from the range"))
	rec = setaside.FromKinesis(&kr)
	rec.Reason = "precise"
	if err := sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if it, _ := setaside.Load(context.Background(), db, tbl, src, "301"); it == nil || it.Kind != setaside.ItemSetAside || it.Reason != "precise" || it.Condition != "" {
		t.Errorf("record 301 = %+v; want set aside, nothing of the range's copy left", it)
	}
}

// A record more than MaxFunctions functions set aside keeps the entries of
// the first MaxFunctions, and the last one's on the item's own attributes:
// the item stays within DynamoDB's limit, and no write fails for it.
func TestSetAsideKeepsAtMostMaxFunctionsEntries(t *testing.T) {
	t.Parallel()
	tbl := table(t)
	kr := kinesisRecord("400", []byte(`{"data":{}}`))
	n := setaside.MaxFunctions + 2
	for i := range n {
		rec := setaside.FromKinesis(&kr)
		rec.Field, rec.Kind, rec.Reason = fmt.Sprintf("data.f%d", i), setaside.KindInvalid, fmt.Sprintf("reason %d", i)
		sink := setaside.New(db, tbl, setaside.WithFunction(fmt.Sprintf("consumer-%02d", i)), setaside.WithClock(func() time.Time { return now.Add(time.Duration(i) * time.Second) }))
		if err := sink.SetAside(context.Background(), []setaside.Record{rec}); err != nil {
			t.Fatalf("function %d: %v", i, err)
		}
	}
	it, err := setaside.Load(context.Background(), db, tbl, streamArn+"/shardId-000000000001", "400")
	if err != nil || it == nil {
		t.Fatalf("Load = %v, %v", it, err)
	}
	last := fmt.Sprintf("consumer-%02d", n-1)
	views := it.SetAsides()
	if len(it.Functions) != setaside.MaxFunctions || len(views) != setaside.MaxFunctions+1 || views[0].Function != last || views[0].Reason != fmt.Sprintf("reason %d", n-1) {
		t.Errorf("%d entries, %d set-asides, newest %s %q; want %d entries and the last function's on the item itself",
			len(it.Functions), len(views), views[0].Function, views[0].Reason, setaside.MaxFunctions)
	}
	if v, ok := it.SetAsideBy("consumer-03"); !ok || v.Field != "data.f3" || v.Reason != "reason 3" || v.SetAsideAt != "2026-11-29T11:00:03Z" {
		t.Errorf("consumer-03's = %+v, %v; want its own field, reason and time", v, ok)
	}
}

func TestFromDynamoDBKeepsMarkupUnescaped(t *testing.T) {
	rec := events.DynamoDBEventRecord{EventID: "e1", EventName: "MODIFY",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "800000000003126276362",
			NewImage: map[string]events.DynamoDBAttributeValue{"bio": events.NewStringAttribute(strings.Repeat("<", 1000))}}}
	r := setaside.FromDynamoDB(&rec)
	if r.Source != rec.EventSourceArn || r.Shard != "" || r.Sequence != "800000000003126276362" || r.EventID != "e1" || r.EventName != "MODIFY" {
		t.Errorf("record %+v", r)
	}
	if bytes.Contains(r.Data, []byte(`\u003c`)) || len(r.Data) > 1500 {
		t.Errorf("data is %d bytes with HTML escapes; want '<' kept as one byte", len(r.Data))
	}
	var back events.DynamoDBEventRecord
	if err := json.Unmarshal(r.Data, &back); err != nil || back.Change.NewImage["bio"].String() != strings.Repeat("<", 1000) {
		t.Errorf("data does not decode back into the Lambda record: %v", err)
	}
}

func TestFromSQS(t *testing.T) {
	r := setaside.FromSQS(&events.SQSMessage{MessageId: "m-1", Body: "hello", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:Failures",
		Attributes: map[string]string{"SentTimestamp": "1795949000000"}})
	if r.Source != "arn:aws:sqs:us-east-1:123456789012:Failures" || r.Sequence != "m-1" || string(r.Data) != "hello" || r.ArrivedAt.UnixMilli() != 1795949000000 {
		t.Errorf("record %+v", r)
	}
}

// TestKeepLeavesASetAsideRecordsChunksAlone: a record bigger than an item,
// set aside by its function and then copied by quarantine from a failed
// range with data that is not byte for byte the same (a DynamoDB stream
// record as Lambda delivered it and as GetRecords returns it differ: the
// creation time's precision, userIdentity), reads back whole as the
// function kept it. Before, the copy's chunks replaced the set-aside
// record's: Load returned the function's first part followed by the copy's
// rest, without an error.
func TestKeepLeavesASetAsideRecordsChunksAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl := table(t)
	sink := setaside.New(db, tbl)
	src := streamArn + "/shardId-000000000001"
	kept := bytes.Repeat([]byte("a"), 2*setaside.ChunkBytes+100)
	kr := kinesisRecord("400", kept)
	rec := setaside.FromKinesis(&kr)
	rec.Kind, rec.Reason = setaside.KindOutputTooLarge, "output over 1 MiB"
	if err := sink.SetAside(ctx, []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	copied := append([]byte("shifted"), bytes.Repeat([]byte("b"), 2*setaside.ChunkBytes+100)...)
	if err := sink.Keep(ctx, []setaside.Item{{Source: src, SequenceNumber: "400", Kind: setaside.ItemRecord, Data: copied,
		Reason: "batch retries exhausted", ExpiresAt: now.Unix()}}); err != nil {
		t.Fatal(err)
	}
	it, err := setaside.Load(ctx, db, tbl, src, "400")
	if err != nil || it == nil {
		t.Fatalf("Load = %v, %v", it, err)
	}
	if it.Kind != setaside.ItemSetAside || !bytes.Equal(it.Data, kept) {
		t.Errorf("record 400 reads back as kind %s, %d bytes, %d of them 'b': want the set-aside record's %d bytes of 'a'",
			it.Kind, len(it.Data), bytes.Count(it.Data, []byte("b")), len(kept))
	}
}
