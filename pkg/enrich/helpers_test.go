package enrich_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/cdc"
	"github.com/tributary-dev/tributary/pkg/enrich"
	"github.com/tributary-dev/tributary/pkg/setaside"
)

var (
	db      *dynamodb.Client
	kin     *kinesis.Client
	streams *dynamodbstreams.Client
	serial  atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(standintest.Main(m, func(cfg aws.Config) {
		db, kin, streams = dynamodb.NewFromConfig(cfg), kinesis.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg)
	}))
}

// name is a resource name unique to this test run.
func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, serial.Add(1)) }

// fastBackoff keeps retries short in tests.
var fastBackoff = enrich.WithBackoff(func(int) time.Duration { return time.Millisecond })

// joinTable creates a join table with the only schema the handler needs.
func joinTable(t *testing.T) string {
	t.Helper()
	tn := name("join")
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(tn),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// newStream creates a Kinesis stream with one shard.
func newStream(t *testing.T, prefix string) string {
	t.Helper()
	sn := name(prefix)
	ctx := context.Background()
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(sn), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(sn)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return sn
}

// put appends records (JSON documents, partitioned by their key) to the
// stream in order.
func put(t *testing.T, sn string, docs ...[]byte) {
	t.Helper()
	for len(docs) > 0 {
		n := min(500, len(docs))
		var entries []kintypes.PutRecordsRequestEntry
		for _, d := range docs[:n] {
			var env struct{ Key string }
			_ = json.Unmarshal(d, &env)
			pk := env.Key
			if pk == "" {
				pk = "none"
			}
			entries = append(entries, kintypes.PutRecordsRequestEntry{Data: d, PartitionKey: aws.String(pk)})
		}
		out, err := kin.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(sn), Records: entries})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("putting records: %v %v", err, out)
		}
		docs = docs[n:]
	}
}

// shardRecords reads every record of each shard of the stream as Lambda
// hands them to a function (shards one after the other).
func shardRecords(t *testing.T, sn string) []events.KinesisEventRecord {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(sn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.KinesisEventRecord
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(sn), ShardId: sh.ShardId,
			ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				seq := aws.ToString(r.SequenceNumber)
				out = append(out, events.KinesisEventRecord{
					EventID: aws.ToString(sh.ShardId) + ":" + seq, EventName: "aws:kinesis:record", EventSource: "aws:kinesis",
					EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/" + sn,
					Kinesis: events.KinesisRecord{Data: r.Data, PartitionKey: aws.ToString(r.PartitionKey), SequenceNumber: seq,
						ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}},
				})
			}
			if len(page.Records) == 0 || aws.ToInt64(page.MillisBehindLatest) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return out
}

// enriched is one record of the output stream.
type enriched struct {
	raw  []byte
	env  struct{ ID, Type, Key string }
	data enrich.Data
}

// output reads the output stream and groups its records by the source
// sequence number they enrich (every copy kept, in stream order).
func output(t *testing.T, sn string) map[string][]enriched {
	t.Helper()
	out := map[string][]enriched{}
	for _, r := range shardRecords(t, sn) {
		e := enriched{raw: r.Kinesis.Data}
		var env struct {
			ID, Type, Key string
			Data          json.RawMessage
		}
		if err := json.Unmarshal(r.Kinesis.Data, &env); err != nil {
			t.Fatalf("output record %s: %v", r.Kinesis.SequenceNumber, err)
		}
		e.env.ID, e.env.Type, e.env.Key = env.ID, env.Type, env.Key
		dec := json.NewDecoder(bytesReader(env.Data))
		dec.UseNumber()
		if err := dec.Decode(&e.data); err != nil {
			t.Fatalf("output record %s data: %v", r.Kinesis.SequenceNumber, err)
		}
		if r.Kinesis.PartitionKey != env.Key {
			t.Errorf("output record %s: partition key %q, want the entity key %q", env.ID, r.Kinesis.PartitionKey, env.Key)
		}
		out[e.data.SequenceNumber] = append(out[e.data.SequenceNumber], e)
	}
	return out
}

// byID is the output's single records keyed by event id; it fails t on a
// sequence number enriched more than once.
func byID(t *testing.T, out map[string][]enriched) map[string]enriched {
	t.Helper()
	m := map[string]enriched{}
	for seq, es := range out {
		if len(es) != 1 {
			t.Errorf("source record %s enriched %d times, want once", seq, len(es))
		}
		m[es[0].env.ID] = es[0]
	}
	return m
}

var clock = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// activity is an activity event of key.
func activity(id, key string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "type": "page_view", "key": key,
		"occurredAt": clock, "sentAt": clock.Add(time.Second), "data": map[string]any{"path": "/" + id}})
	return b
}

// changed is a cdc changelog record of key at version with image fields.
func changed(typ, key string, version int, image map[string]any) []byte {
	if image != nil {
		image["userId"] = key
		image["version"] = version
	}
	data, _ := json.Marshal(cdc.Data{Key: key, Version: json.Number(fmt.Sprint(version)), Image: image})
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("profiles/%s/%d", key, version), "type": typ, "key": key,
		"occurredAt": clock, "sentAt": clock, "receivedAt": clock, "data": json.RawMessage(data)})
	return b
}

func profile(key string, version int, plan string) []byte {
	return changed(cdc.TypeChanged, key, version, map[string]any{"plan": plan})
}

func tombstone(key string, version int) []byte { return changed(cdc.TypeDeleted, key, version, nil) }

// handle runs one batch and returns the reported failure ("" when none).
func handle(t *testing.T, h *enrich.Handler, recs []events.KinesisEventRecord) string {
	t.Helper()
	resp, err := h.Handle(context.Background(), events.KinesisEvent{Records: recs})
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	switch len(resp.BatchItemFailures) {
	case 0:
		return ""
	case 1:
		return resp.BatchItemFailures[0].ItemIdentifier
	}
	t.Fatalf("Handle reported %d failures, want at most one (the lowest)", len(resp.BatchItemFailures))
	return ""
}

// index is the position of the record with sequence number seq.
func index(recs []events.KinesisEventRecord, seq string) int {
	for i := range recs {
		if recs[i].Kinesis.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// plan is the "plan" of an enriched record's profile, or "-" without one.
func plan(e enriched) string {
	if e.data.Profile == nil || string(e.data.Profile) == "null" {
		return "-"
	}
	var p struct{ Plan string }
	_ = json.Unmarshal(e.data.Profile, &p)
	return p.Plan
}

func version(e enriched) string {
	if e.data.ProfileVersion == nil {
		return "-"
	}
	return e.data.ProfileVersion.String()
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// syntheticStream is the event source of synthetic records.
const syntheticStream = "arn:aws:kinesis:us-east-1:123456789012:stream/synthetic"

// quarantineTable creates a table with the quarantine's schema.
func quarantineTable(t *testing.T) string {
	t.Helper()
	tn := name("quarantine")
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(tn),
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
	return tn
}

// assertSetAside checks that rec is in the quarantine table q, set aside
// with its data whole, the field and the kind (an invalid one's reason
// naming the field).
func assertSetAside(t *testing.T, q string, rec events.KinesisEventRecord, field, kind string) {
	t.Helper()
	shard, _, _ := strings.Cut(rec.EventID, ":")
	it, err := setaside.Load(context.Background(), db, q, rec.EventSourceArn+"/"+shard, rec.Kinesis.SequenceNumber)
	if err != nil || it == nil {
		t.Fatalf("record %s not in the quarantine table: %v", rec.Kinesis.SequenceNumber, err)
	}
	// An invalid record's reason names its field, as every consumer's does.
	namesField := kind != setaside.KindInvalid || strings.Contains(it.Reason, field)
	if it.Kind != setaside.ItemSetAside || it.Field != field || it.Category != kind || it.Reason == "" || !namesField || !bytes.Equal(it.Data, rec.Kinesis.Data) {
		t.Errorf("quarantined %s: kind %s field %q category %s reason %q, %d data bytes; want field %q, %s, its %d bytes",
			rec.Kinesis.SequenceNumber, it.Kind, it.Field, it.Category, it.Reason, len(it.Data), field, kind, len(rec.Kinesis.Data))
	}
}
