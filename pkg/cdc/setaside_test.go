package cdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

// quarantineTable creates a table with the quarantine's schema.
func quarantineTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("source"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sequenceNumber"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("source"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sequenceNumber"), KeyType: ddbtypes.KeyTypeRange}},
		BillingMode: ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func quarantined(t *testing.T, db *dynamodb.Client, table string) []setaside.Item {
	t.Helper()
	var all []map[string]ddbtypes.AttributeValue
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out.Items...)
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	var items []setaside.Item
	for _, av := range all {
		var it setaside.Item
		if k, _ := av["kind"].(*ddbtypes.AttributeValueMemberS); k != nil && k.Value == setaside.ItemChunk {
			continue
		}
		if err := unmarshalItem(av, &it); err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	return items
}

// TestHandleSetsAsideWhatCanNeverBeWritten: a change whose changelog record
// is over Kinesis' 1 MiB, or whose version is not a number, is set aside in
// the quarantine table with its stream record and the attribute at fault;
// the changes after it in the same batch are written, nothing is reported
// failed, so the shard moves on. A 390 KB attribute full of '<' — 2.4 MB
// with encoding/json's HTML escaping — is written as about 390 KB.
func TestHandleSetsAsideWhatCanNeverBeWritten(t *testing.T) {
	ctx := context.Background()
	db, streams, kin := standIn(t)
	streamArn := createProfiles(t, db, "profiles")
	createKinesis(t, kin, "events", 1)
	quarantineTable(t, db, "quarantine")

	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	markup := strings.Repeat("<", 390_000)
	control := strings.Repeat("\x01", 390_000) // JSON must escape control characters: 6 bytes each
	for _, item := range []map[string]ddbtypes.AttributeValue{
		{"userId": s("u-markup"), "version": n("1"), "bio": s(markup)},
		{"userId": s("u-control"), "version": n("1"), "bio": s(control)},
		{"userId": s("u-1"), "version": n("1"), "plan": s("free")},
		{"userId": s("u-badversion"), "version": s("two"), "plan": s("pro")},
		{"userId": s("u-2"), "version": n("1"), "plan": s("pro")},
	} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("profiles"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	ev := streamEvent(t, streams, streamArn)
	if len(ev.Records) != 5 {
		t.Fatalf("%d stream records, want 5", len(ev.Records))
	}
	var emf bytes.Buffer
	m := newMetrics(&emf)
	sink := setaside.New(db, "quarantine", setaside.WithFunction("cdc"), setaside.WithMetrics(m))
	resp, err := cdc.New(kin, "events", cdc.WithSetAside(sink), cdc.WithMetrics(m)).Handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v: want none, the shard moves on", resp.BatchItemFailures)
	}

	got := map[string]changelog{}
	for _, c := range readKinesis(t, kin, "events") {
		got[c.env.Key] = c
	}
	for _, k := range []string{"u-markup", "u-1", "u-2"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: no changelog record", k)
		}
	}
	if len(got) != 3 {
		t.Errorf("changelog records for %v, want u-markup, u-1 and u-2", keys(got))
	}
	if c := got["u-markup"]; c.data.Image["bio"] != markup {
		t.Errorf("u-markup's bio did not survive the changelog")
	}
	raw := rawKinesis(t, kin, "events")
	if size := len(raw["u-markup"]); size > 400_000 || bytes.Contains(raw["u-markup"], []byte(`\u003c`)) {
		t.Errorf("u-markup's changelog record is %d bytes: want '<' unescaped, about 390 KB", size)
	}

	items := quarantined(t, db, "quarantine")
	if len(items) != 2 {
		var seqs []string
		for _, it := range items {
			seqs = append(seqs, it.SequenceNumber+" "+it.Field)
		}
		t.Fatalf("%d quarantined records (%v), want 2 (u-control, u-badversion)", len(items), seqs)
	}
	bySeq := map[string]setaside.Item{}
	for _, it := range items {
		bySeq[it.SequenceNumber] = it
	}
	for _, w := range []struct {
		rec          events.DynamoDBEventRecord
		field, kind  string
		reasonSaying string
	}{
		{ev.Records[1], "dynamodb.NewImage.bio", setaside.KindOutputTooLarge, fmt.Sprintf("over Kinesis' limit of %d; attribute bio is", limits.KinesisRecordBytes)},
		{ev.Records[3], "dynamodb.NewImage.version", setaside.KindInvalid, "must be an N attribute"},
	} {
		it, ok := bySeq[w.rec.Change.SequenceNumber]
		if !ok {
			t.Errorf("record %s (%s) not quarantined", w.rec.Change.SequenceNumber, w.field)
			continue
		}
		if it.Kind != setaside.ItemSetAside || it.Field != w.field || it.Category != w.kind || !strings.Contains(it.Reason, w.reasonSaying) ||
			it.Source != streamArn || it.EventID != w.rec.EventID || it.Function != "cdc" {
			t.Errorf("quarantined %s: kind %s field %q category %s reason %q source %s; want field %q, %s, a reason saying %q",
				it.SequenceNumber, it.Kind, it.Field, it.Category, it.Reason, it.Source, w.field, w.kind, w.reasonSaying)
		}
		full, err := setaside.Load(ctx, db, "quarantine", it.Source, it.SequenceNumber)
		if err != nil {
			t.Fatal(err)
		}
		var back events.DynamoDBEventRecord
		if err := json.Unmarshal(full.Data, &back); err != nil {
			t.Fatalf("quarantined data is not the Lambda stream record: %v", err)
		}
		if back.EventID != w.rec.EventID || back.Change.NewImage["userId"].String() != w.rec.Change.NewImage["userId"].String() {
			t.Errorf("quarantined data is record %s, want %s", back.EventID, w.rec.EventID)
		}
	}
	if it := bySeq[ev.Records[1].Change.SequenceNumber]; it.DataBytes < 2_000_000 {
		t.Errorf("u-control quarantined with %d bytes of data, want its whole stream record (over 2 MB as JSON)", it.DataBytes)
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(emf.String(), `"RecordsSetAside":2`) || !strings.Contains(emf.String(), `"ChangelogRecords":3`) {
		t.Errorf("metrics %s: want RecordsSetAside 2 and ChangelogRecords 3", emf.String())
	}
}

// TestHandleRetriesThrottledWrites: Kinesis throttling is transient — the
// lowest throttled record is the batch item failure, retried by Lambda,
// and nothing is set aside. A change that can never succeed in the same
// batch is still set aside.
func TestHandleRetriesThrottledWrites(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	db := dynamodb.NewFromConfig(cfg)
	quarantineTable(t, db, "quarantine")
	rec := func(seq, user string) events.DynamoDBEventRecord {
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user), "version": events.NewNumberAttribute(seq)}
		return events.DynamoDBEventRecord{EventID: "ev-" + seq, EventName: "MODIFY",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/2026-11-29T00:00:00.000",
			Change: events.DynamoDBStreamRecord{ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1795000000, 0)},
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user)}, NewImage: img,
				SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES"}}
	}
	batch := func() events.DynamoDBEvent {
		ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec("100", "a"), rec("200", "b"), rec("300", "a"), rec("400", "c")}}
		ev.Records[0].Change.NewImage = nil // can never succeed: set aside
		return ev
	}
	tests := []struct {
		name    string
		put     *fakePutter
		want    string
		written int
	}{
		{"entries throttled: the lowest is retried", &fakePutter{failAt: map[int]bool{1: true, 2: true}}, "300", 1},
		{"the whole call throttled", &fakePutter{err: throttle()}, "200", 0},
		{"no throttle", &fakePutter{}, "", 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := fmt.Sprintf("quarantine%d", i)
			quarantineTable(t, db, table)
			h := cdc.New(tt.put, "events", cdc.WithSetAside(setaside.New(db, table)))
			resp, err := h.Handle(context.Background(), batch())
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if len(resp.BatchItemFailures) > 0 {
				got = resp.BatchItemFailures[0].ItemIdentifier
			}
			if got != tt.want || len(resp.BatchItemFailures) > 1 {
				t.Errorf("reported %v, want %q", resp.BatchItemFailures, tt.want)
			}
			if len(tt.put.got) != tt.written {
				t.Errorf("%d records written, want %d", len(tt.put.got), tt.written)
			}
			items := quarantined(t, db, table)
			if len(items) != 1 || items[0].SequenceNumber != "100" || items[0].Field != "dynamodb.NewImage" {
				t.Errorf("quarantined %d records: want only record 100 (no NewImage), never a throttled one", len(items))
			}
		})
	}
}

// callSizes records the bytes of each PutRecords call.
type callSizes struct{ calls []int }

func (c *callSizes) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	n := 0
	out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(0)}
	for _, e := range in.Records {
		n += len(e.Data) + len(aws.ToString(e.PartitionKey))
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	c.calls = append(c.calls, n)
	return out, nil
}

// TestHandleKeepsCallsWithinFiveMiB: six changelog records of about 900 KB
// each go out in calls of at most 5 MiB (Kinesis refuses a bigger call as a
// whole, which no retry would fix).
func TestHandleKeepsCallsWithinFiveMiB(t *testing.T) {
	var ev events.DynamoDBEvent
	for i := range 6 {
		user := fmt.Sprintf("u-%d", i)
		img := map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user), "version": events.NewNumberAttribute("1"),
			"bio": events.NewStringAttribute(strings.Repeat("b", 900_000))}
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventID: "ev-" + user, EventName: "INSERT",
			EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/profiles/stream/x",
			Change: events.DynamoDBStreamRecord{ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1795000000, 0)},
				Keys: map[string]events.DynamoDBAttributeValue{"userId": events.NewStringAttribute(user)}, NewImage: img,
				SequenceNumber: fmt.Sprint(100 + i)}})
	}
	put := &callSizes{}
	resp, err := cdc.New(put, "events").Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp.BatchItemFailures, err)
	}
	total := 0
	for _, n := range put.calls {
		if n > limits.KinesisPutRecordsBytes {
			t.Errorf("a PutRecords call of %d bytes, over 5 MiB", n)
		}
		total += n
	}
	if len(put.calls) != 2 || total < 6*900_000 {
		t.Errorf("calls %v: want the six records in two calls", put.calls)
	}
}
