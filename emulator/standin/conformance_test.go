package standin_test

// Conformance of the moto stand-in for what Tributary relies on: each test
// starts a private stand-in and drives it with aws-sdk-go-v2, asserting the
// AWS behaviour a function or the local runner depends on. Where moto 5.2.5
// departs from AWS, the test asserts only what moto does right and a
// "moto gap:" comment says what differs (the report lists them all).

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwschemas "github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	dstypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// ---------------------------------------------------------------- Kinesis

// kinesisShard is a shard's id and inclusive hash key range.
type kinesisShard struct {
	id         string
	start, end *big.Int
}

// moto gap (not asserted, it fails): moto serves requests on threads with no
// lock around a shard, so concurrent PutRecords to one shard hand out the
// same sequence number twice and the later record overwrites the earlier:
// 8 goroutines x 10 batches of 100 to a 1-shard stream read back 7922 of
// 8000 records, with 78 duplicated sequence numbers. Appending is also
// O(records in the shard) per record and records are never trimmed.
func TestKinesisConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kc := kinesis.NewFromConfig(standintest.Config(t, standintest.Start(t)))

	const stream = "events"
	shards := createKinesisStream(t, kc, stream, 2)

	t.Run("ListShards splits the hash key space between 2 shards", func(t *testing.T) {
		if len(shards) != 2 {
			t.Fatalf("got %d shards, want 2", len(shards))
		}
		maxKey := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
		if shards[0].start.Sign() != 0 {
			t.Errorf("%s starts at %s, want 0", shards[0].id, shards[0].start)
		}
		if next := new(big.Int).Add(shards[0].end, big.NewInt(1)); next.Cmp(shards[1].start) != 0 {
			t.Errorf("%s ends at %s but %s starts at %s: ranges not contiguous", shards[0].id, shards[0].end, shards[1].id, shards[1].start)
		}
		if shards[1].end.Cmp(maxKey) != 0 {
			t.Errorf("%s ends at %s, want 2^128-1", shards[1].id, shards[1].end)
		}
	})

	// One batch of 500 (the PutRecords maximum); keys repeat so that
	// several records share a partition key and its order.
	const n = 500
	entries := make([]kintypes.PutRecordsRequestEntry, n)
	for i := range entries {
		entries[i] = kintypes.PutRecordsRequestEntry{
			PartitionKey: aws.String(fmt.Sprintf("device-%d", i%37)),
			Data:         fmt.Appendf(nil, `{"i":%d}`, i),
		}
	}
	beforePut := time.Now()
	put, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	// want[shardID] is the shard's records in put order.
	want := map[string][]putRecord{}

	t.Run("PutRecords routes each record by the MD5 of its partition key", func(t *testing.T) {
		if got := aws.ToInt32(put.FailedRecordCount); got != 0 {
			t.Fatalf("FailedRecordCount = %d, want 0", got)
		}
		if len(put.Records) != n {
			t.Fatalf("got %d result entries, want %d", len(put.Records), n)
		}
		for i, r := range put.Records {
			key := aws.ToString(entries[i].PartitionKey)
			wantShard := shardForKey(shards, key)
			if got := aws.ToString(r.ShardId); got != wantShard {
				t.Errorf("record %d (key %q): ShardId %s, want %s", i, key, got, wantShard)
			}
			seq, ok := new(big.Int).SetString(aws.ToString(r.SequenceNumber), 10)
			if !ok {
				t.Fatalf("record %d: SequenceNumber %q is not a decimal integer", i, aws.ToString(r.SequenceNumber))
			}
			want[wantShard] = append(want[wantShard], putRecord{seq: seq, data: entries[i].Data, key: key})
		}
		for _, s := range shards {
			if len(want[s.id]) == 0 {
				t.Errorf("no record went to %s: routing is not spreading keys", s.id)
			}
		}
	})

	// moto gap: sequence numbers are per-shard counters (1, 2, 3...), the
	// same values on every shard, not AWS's 56-digit numbers. Compared as
	// big integers (as Tributary must: "9" > "10" as strings) they order.
	t.Run("sequence numbers increase within each shard as big integers", func(t *testing.T) {
		for id, recs := range want {
			for i := 1; i < len(recs); i++ {
				if recs[i].seq.Cmp(recs[i-1].seq) <= 0 {
					t.Fatalf("%s: record %d has sequence number %s, not above the previous %s", id, i, recs[i].seq, recs[i-1].seq)
				}
			}
		}
	})

	t.Run("PutRecords honours ExplicitHashKey", func(t *testing.T) {
		for _, s := range shards {
			// The middle of the shard's range; see the boundary gap below.
			mid := new(big.Int).Rsh(new(big.Int).Add(s.start, s.end), 1)
			out, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: []kintypes.PutRecordsRequestEntry{
				{PartitionKey: aws.String("any"), ExplicitHashKey: aws.String(mid.String()), Data: []byte("explicit")},
			}})
			if err != nil {
				t.Fatalf("PutRecords with ExplicitHashKey %s: %v", mid, err)
			}
			if got := aws.ToString(out.Records[0].ShardId); got != s.id {
				t.Errorf("ExplicitHashKey %s went to %s, want %s", mid, got, s.id)
			}
			want[s.id] = append(want[s.id], putRecord{seq: mustBig(t, out.Records[0].SequenceNumber), data: []byte("explicit"), key: "any"})
		}
		// moto gap: moto tests start <= h < end, so a hash key equal to a
		// shard's EndingHashKey (2^127-1 here, or 2^128-1) finds no shard
		// and PutRecords fails with HTTP 500. An MD5 landing there is a
		// 2^-127 chance; only hand-picked ExplicitHashKeys hit it.
	})

	t.Run("GetRecords from TRIM_HORIZON returns each shard in order", func(t *testing.T) {
		for _, s := range shards {
			it := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(s.id), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
			got := readShard(t, kc, it, 100)
			if len(got) != len(want[s.id]) {
				t.Fatalf("%s: read %d records, want %d", s.id, len(got), len(want[s.id]))
			}
			for i, r := range got {
				w := want[s.id][i]
				if aws.ToString(r.SequenceNumber) != w.seq.String() || !bytes.Equal(r.Data, w.data) || aws.ToString(r.PartitionKey) != w.key {
					t.Fatalf("%s record %d: got seq %s data %s key %s, want seq %s data %s key %s", s.id, i,
						aws.ToString(r.SequenceNumber), r.Data, aws.ToString(r.PartitionKey), w.seq, w.data, w.key)
				}
				at := aws.ToTime(r.ApproximateArrivalTimestamp)
				if at.Before(beforePut.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
					t.Errorf("%s record %d: ApproximateArrivalTimestamp %v, want between %v and now", s.id, i, at, beforePut)
				}
			}
		}
	})

	t.Run("AT_ and AFTER_SEQUENCE_NUMBER start at or after the record", func(t *testing.T) {
		s := shards[0]
		recs := want[s.id]
		mid := recs[len(recs)/2]
		tests := []struct {
			typ       kintypes.ShardIteratorType
			wantFirst int
		}{
			{kintypes.ShardIteratorTypeAtSequenceNumber, len(recs) / 2},
			{kintypes.ShardIteratorTypeAfterSequenceNumber, len(recs)/2 + 1},
		}
		for _, tt := range tests {
			it := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(s.id),
				ShardIteratorType: tt.typ, StartingSequenceNumber: aws.String(mid.seq.String())})
			out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1)})
			if err != nil {
				t.Fatalf("%s: GetRecords: %v", tt.typ, err)
			}
			if len(out.Records) != 1 || aws.ToString(out.Records[0].SequenceNumber) != recs[tt.wantFirst].seq.String() {
				t.Errorf("%s %s: first record %v, want sequence number %s", tt.typ, mid.seq, seqs(out.Records), recs[tt.wantFirst].seq)
			}
		}
	})

	t.Run("GetRecords accepts an iterator taken by StreamARN", func(t *testing.T) {
		desc, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		arn := desc.StreamDescriptionSummary.StreamARN
		it := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamARN: arn, ShardId: aws.String(shards[1].id), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		// moto gap: the iterator carries the stream *name* it was asked
		// for, so one taken by StreamARN is only usable when GetRecords
		// also passes StreamARN (AWS needs only the iterator).
		out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, StreamARN: arn, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatalf("GetRecords with StreamARN: %v", err)
		}
		if len(out.Records) != 1 || aws.ToString(out.Records[0].SequenceNumber) != want[shards[1].id][0].seq.String() {
			t.Errorf("got %v, want the shard's first record %s", seqs(out.Records), want[shards[1].id][0].seq)
		}
	})

	t.Run("LATEST, AT_TIMESTAMP and MillisBehindLatest", func(t *testing.T) {
		const timed = "timed"
		one := createKinesisStream(t, kc, timed, 1)[0]
		putOne := func(data string) string {
			out, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(timed), Records: []kintypes.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte(data)}}})
			if err != nil {
				t.Fatalf("PutRecords %s: %v", data, err)
			}
			return aws.ToString(out.Records[0].SequenceNumber)
		}
		putOne("old-1")
		latest := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(timed), ShardId: aws.String(one.id), ShardIteratorType: kintypes.ShardIteratorTypeLatest})
		time.Sleep(30 * time.Millisecond)
		cut := time.Now()
		time.Sleep(30 * time.Millisecond)
		putOne("new-1")
		time.Sleep(300 * time.Millisecond)
		putOne("new-2")

		if got := datas(readShard(t, kc, latest, 10)); !slices.Equal(got, []string{"new-1", "new-2"}) {
			t.Errorf("LATEST taken before new-1: read %q, want [new-1 new-2]", got)
		}
		atTS := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(timed), ShardId: aws.String(one.id), ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(cut)})
		if got := datas(readShard(t, kc, atTS, 10)); !slices.Equal(got, []string{"new-1", "new-2"}) {
			t.Errorf("AT_TIMESTAMP between old-1 and new-1: read %q, want [new-1 new-2]", got)
		}

		// new-1 arrived ~300 ms before the tip (new-2): a reader that
		// has just returned new-1 is ~300 ms behind; at the tip, 0.
		it := shardIterator(t, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(timed), ShardId: aws.String(one.id), ShardIteratorType: kintypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(cut)})
		first, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if ms := aws.ToInt64(first.MillisBehindLatest); ms < 250 || ms > 2000 {
			t.Errorf("MillisBehindLatest after new-1 = %d, want about 300", ms)
		}
		rest, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: first.NextShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(rest.Records) != 1 || aws.ToInt64(rest.MillisBehindLatest) != 0 {
			t.Errorf("at the tip: %d records, MillisBehindLatest %d; want 1 record and 0", len(rest.Records), aws.ToInt64(rest.MillisBehindLatest))
		}
		// moto gap: MillisBehindLatest is the age of the returned record
		// relative to the newest record, not to the current time, so a
		// consumer of an idle stream always looks caught up (AWS reports
		// the distance to the tip in time).
	})
}

type putRecord struct {
	seq  *big.Int
	data []byte
	key  string
}

func createKinesisStream(t testing.TB, kc *kinesis.Client, name string, shardCount int32) []kinesisShard {
	t.Helper()
	ctx := context.Background()
	if _, err := kc.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shardCount)}); err != nil {
		t.Fatalf("CreateStream %s: %v", name, err)
	}
	w := kinesis.NewStreamExistsWaiter(kc, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 500*time.Millisecond
	})
	desc, err := w.WaitForOutput(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 10*time.Second)
	if err != nil {
		t.Fatalf("waiting for %s to be ACTIVE: %v", name, err)
	}
	if st := desc.StreamDescription.StreamStatus; st != kintypes.StreamStatusActive {
		t.Fatalf("%s status %s, want ACTIVE", name, st)
	}
	ls, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatalf("ListShards %s: %v", name, err)
	}
	var out []kinesisShard
	for _, s := range ls.Shards {
		out = append(out, kinesisShard{id: aws.ToString(s.ShardId), start: mustBig(t, s.HashKeyRange.StartingHashKey), end: mustBig(t, s.HashKeyRange.EndingHashKey)})
	}
	slices.SortFunc(out, func(a, b kinesisShard) int { return a.start.Cmp(b.start) })
	return out
}

// shardForKey is where AWS puts a partition key: the shard whose inclusive
// hash key range holds the MD5 of the key read as a 128-bit unsigned integer.
func shardForKey(shards []kinesisShard, key string) string {
	sum := md5.Sum([]byte(key))
	h := new(big.Int).SetBytes(sum[:])
	for _, s := range shards {
		if s.start.Cmp(h) <= 0 && h.Cmp(s.end) <= 0 {
			return s.id
		}
	}
	return ""
}

func shardIterator(t testing.TB, kc *kinesis.Client, in *kinesis.GetShardIteratorInput) *string {
	t.Helper()
	out, err := kc.GetShardIterator(context.Background(), in)
	if err != nil {
		t.Fatalf("GetShardIterator %s: %v", in.ShardIteratorType, err)
	}
	return out.ShardIterator
}

// readShard reads from it with the given page size until a page is empty.
func readShard(t testing.TB, kc *kinesis.Client, it *string, limit int32) []kintypes.Record {
	t.Helper()
	var all []kintypes.Record
	for range 1000 {
		out, err := kc.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(limit)})
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		if len(out.Records) > int(limit) {
			t.Fatalf("GetRecords with Limit %d returned %d records", limit, len(out.Records))
		}
		all = append(all, out.Records...)
		if len(out.Records) == 0 {
			return all
		}
		it = out.NextShardIterator
	}
	t.Fatal("shard never ran dry")
	return nil
}

func mustBig(t testing.TB, s *string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(aws.ToString(s), 10)
	if !ok {
		t.Fatalf("%q is not a decimal integer", aws.ToString(s))
	}
	return v
}

func seqs(rs []kintypes.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, aws.ToString(r.SequenceNumber))
	}
	return out
}

func datas(rs []kintypes.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Data))
	}
	return out
}

// ---------------------------------------------------------------- DynamoDB

// moto gap (not asserted, it fails): updates are not atomic under
// concurrency: 8 goroutines x 200 UpdateItem ADD 1 on one item left 1599,
// not 1600. Sequential conditional writes are exact, as tested here.
func TestDynamoDBConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dynamodb.NewFromConfig(standintest.Config(t, standintest.Start(t)))
	const table = "counts"
	createTable(t, db, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("window"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("window"), KeyType: ddbtypes.KeyTypeRange}},
	})
	key := func(k, w string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"key": &ddbtypes.AttributeValueMemberS{Value: k}, "window": &ddbtypes.AttributeValueMemberS{Value: w}}
	}
	item := func(k, w string, attrs map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
		m := key(k, w)
		for a, v := range attrs {
			m[a] = v
		}
		return m
	}
	n := func(v string) *ddbtypes.AttributeValueMemberN { return &ddbtypes.AttributeValueMemberN{Value: v} }
	s := func(v string) *ddbtypes.AttributeValueMemberS { return &ddbtypes.AttributeValueMemberS{Value: v} }
	const w0 = "2026-11-29T10:41:00Z"

	// DynamoDB sizes an updated item as it will be after the update, a
	// binary value by its bytes: rewriting a 300 KB attribute is accepted,
	// an item past 400 KB is not (moto alone would refuse the first).
	t.Run("item size is the item after the update", func(t *testing.T) {
		blob := func(n int) *ddbtypes.AttributeValueMemberB {
			return &ddbtypes.AttributeValueMemberB{Value: make([]byte, n)}
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("big", w0, map[string]ddbtypes.AttributeValue{"state": blob(300 << 10)})}); err != nil {
			t.Fatalf("putting a 300 KB item: %v", err)
		}
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("big", w0),
			UpdateExpression: aws.String("SET #s = :b"), ExpressionAttributeNames: map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":b": blob(300 << 10)}}); err != nil {
			t.Fatalf("rewriting the 300 KB attribute: %v", err)
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("big", w0),
			UpdateExpression: aws.String("SET #o = :b"), ExpressionAttributeNames: map[string]string{"#o": "other"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":b": blob(120 << 10)}})
		if err == nil || !strings.Contains(err.Error(), "size") {
			t.Fatalf("adding 120 KB to a 300 KB item: err = %v, want the item size refused", err)
		}
	})

	t.Run("conditional PutItem fails with the old item", func(t *testing.T) {
		first := item("a", w0, map[string]ddbtypes.AttributeValue{"count": n("1"), "fence": s("100")})
		in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: first, ConditionExpression: aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": "key"}, ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld}
		if _, err := db.PutItem(ctx, in); err != nil {
			t.Fatalf("first conditional PutItem: %v", err)
		}
		in.Item = item("a", w0, map[string]ddbtypes.AttributeValue{"count": n("2")})
		_, err := db.PutItem(ctx, in)
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("second conditional PutItem: got %v (%T), want *types.ConditionalCheckFailedException", err, err)
		}
		if !sameItem(ccf.Item, first) {
			t.Errorf("ConditionalCheckFailedException.Item = %v, want the stored item %v", ccf.Item, first)
		}
	})

	t.Run("conditional UpdateItem fences on a number", func(t *testing.T) {
		// The fence as a number, so "99" < "100" compares numerically.
		upd := func(fence string) error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("b", w0),
				UpdateExpression:                    aws.String("SET fence = :f ADD #c :one"),
				ConditionExpression:                 aws.String("attribute_not_exists(fence) OR fence < :f"),
				ExpressionAttributeNames:            map[string]string{"#c": "count"},
				ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":f": n(fence), ":one": n("1")},
				ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
			})
			return err
		}
		tests := []struct {
			fence   string
			applied bool
		}{{"100", true}, {"99", false}, {"100", false}, {"1000", true}}
		for _, tt := range tests {
			err := upd(tt.fence)
			var ccf *ddbtypes.ConditionalCheckFailedException
			switch {
			case tt.applied && err != nil:
				t.Fatalf("fence %s: %v, want applied", tt.fence, err)
			case !tt.applied && !errors.As(err, &ccf):
				t.Fatalf("fence %s: %v, want ConditionalCheckFailedException", tt.fence, err)
			case !tt.applied:
				if f, ok := ccf.Item["fence"].(*ddbtypes.AttributeValueMemberN); !ok || f.Value != "100" {
					t.Errorf("fence %s: old item fence = %v, want 100", tt.fence, ccf.Item["fence"])
				}
			}
		}
		got := getItem(t, db, table, key("b", w0))
		if c := got["count"].(*ddbtypes.AttributeValueMemberN).Value; c != "2" {
			t.Errorf("count = %s after 2 applied updates, want 2", c)
		}
	})

	// The stand-in walks an update expression's checks that read only the
	// expression, its names and the table's keys once per (expression,
	// names): a key attribute updated, or two paths that overlap, are
	// refused every time, also after the same expression passed with other
	// names.
	t.Run("UpdateItem checks its expression every time", func(t *testing.T) {
		update := func(names map[string]string) error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("checked", w0),
				UpdateExpression: aws.String("SET #a = :v, #b = :v"), ExpressionAttributeNames: names,
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s("x")}})
			return err
		}
		for i, tc := range []struct {
			names  map[string]string
			refuse string
		}{
			{map[string]string{"#a": "window", "#b": "note"}, "window"},
			{map[string]string{"#a": "note", "#b": "other"}, ""},
			{map[string]string{"#a": "note", "#b": "other"}, ""},
			{map[string]string{"#a": "window", "#b": "note"}, "window"},
			{map[string]string{"#a": "note", "#b": "note"}, "overlap"},
			{map[string]string{"#a": "note", "#b": "note"}, "overlap"},
		} {
			err := update(tc.names)
			var api interface{ ErrorMessage() string }
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("update %d %v refused: %v", i, tc.names, err)
			case tc.refuse != "" && (!errors.As(err, &api) || !strings.Contains(strings.ToLower(api.ErrorMessage()), tc.refuse)):
				t.Fatalf("update %d %v: %v, want a refusal naming %q", i, tc.names, err, tc.refuse)
			}
		}
	})

	t.Run("UpdateItem ADD creates and increments", func(t *testing.T) {
		var last string
		for _, inc := range []string{"3", "4", "-2"} {
			out, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("c", w0),
				UpdateExpression: aws.String("ADD #c :n SET windowEnd = :e"), ExpressionAttributeNames: map[string]string{"#c": "count"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": n(inc), ":e": s("2026-11-29T10:42:00Z")},
				ReturnValues:              ddbtypes.ReturnValueUpdatedNew})
			if err != nil {
				t.Fatalf("ADD %s: %v", inc, err)
			}
			last = out.Attributes["count"].(*ddbtypes.AttributeValueMemberN).Value
		}
		if last != "5" {
			t.Errorf("count after ADD 3, 4, -2 = %s, want 5", last)
		}
	})

	t.Run("TransactWriteItems is all or nothing", func(t *testing.T) {
		tx := func(guard string) error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String(table), Item: item("t1", w0, map[string]ddbtypes.AttributeValue{"count": n("1")})}},
				{Update: &ddbtypes.Update{TableName: aws.String(table), Key: key("c", w0), UpdateExpression: aws.String("ADD #c :n"),
					ExpressionAttributeNames: map[string]string{"#c": "count"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": n("10")}}},
				{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String(table), Key: key("a", w0),
					ConditionExpression: aws.String("fence = :f"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":f": s(guard)},
					ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld}},
			}})
			return err
		}
		err := tx("stale")
		var tce *ddbtypes.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("failing transaction: got %v (%T), want *types.TransactionCanceledException", err, err)
		}
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if !slices.Equal(codes, []string{"None", "None", "ConditionalCheckFailed"}) {
			t.Errorf("CancellationReasons codes = %q, want [None None ConditionalCheckFailed]", codes)
		}
		if len(tce.CancellationReasons) == 3 {
			if f, ok := tce.CancellationReasons[2].Item["fence"].(*ddbtypes.AttributeValueMemberS); !ok || f.Value != "100" {
				t.Errorf("cancellation reason Item = %v, want the guarded item (fence 100)", tce.CancellationReasons[2].Item)
			}
		}
		if got := getItem(t, db, table, key("t1", w0)); got != nil {
			t.Errorf("cancelled transaction's Put is visible: %v", got)
		}
		if c := getItem(t, db, table, key("c", w0))["count"].(*ddbtypes.AttributeValueMemberN).Value; c != "5" {
			t.Errorf("cancelled transaction's ADD applied: count %s, want 5", c)
		}
		if err := tx("100"); err != nil {
			t.Fatalf("passing transaction: %v", err)
		}
		if got := getItem(t, db, table, key("t1", w0)); got == nil {
			t.Error("committed transaction's Put is missing")
		}
		if c := getItem(t, db, table, key("c", w0))["count"].(*ddbtypes.AttributeValueMemberN).Value; c != "15" {
			t.Errorf("committed transaction's ADD: count %s, want 15", c)
		}
	})

	t.Run("TTL is enabled and described", func(t *testing.T) {
		if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}); err != nil {
			t.Fatalf("UpdateTimeToLive: %v", err)
		}
		out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatalf("DescribeTimeToLive: %v", err)
		}
		d := out.TimeToLiveDescription
		if st := d.TimeToLiveStatus; st != ddbtypes.TimeToLiveStatusEnabled && st != ddbtypes.TimeToLiveStatusEnabling {
			t.Errorf("TimeToLiveStatus = %s, want ENABLED or ENABLING", st)
		}
		if aws.ToString(d.AttributeName) != "expiresAt" {
			t.Errorf("TTL attribute = %q, want expiresAt", aws.ToString(d.AttributeName))
		}
		// moto gap: moto never deletes expired items (nor emits the
		// service's REMOVE stream record); AWS deletes within days, so
		// readers must filter on expiresAt anyway.
	})

	t.Run("ConsumedCapacity is returned when asked", func(t *testing.T) {
		small := item("cap", w0, map[string]ddbtypes.AttributeValue{"count": n("1")})
		put, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: small, ReturnConsumedCapacity: ddbtypes.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		upd, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("cap", w0), UpdateExpression: aws.String("ADD #c :n"),
			ExpressionAttributeNames: map[string]string{"#c": "count"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": n("1")},
			ReturnConsumedCapacity: ddbtypes.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		get, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("cap", w0), ReturnConsumedCapacity: ddbtypes.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		// moto gap: the units are constants, not sizes: PutItem 1, UpdateItem
		// 0.5 (AWS: 1 WCU per started KB, so 1 here), GetItem 0.5 whatever
		// the size or ConsistentRead, BatchGetItem 1 per key asked, and
		// TransactWriteItems an empty list. Count write units client-side;
		// only PutItem and GetItem happen to match AWS for small items.
		tests := []struct {
			op   string
			cc   *ddbtypes.ConsumedCapacity
			want float64 // 0: only present, on the right table
		}{
			{"PutItem (<1 KB)", put.ConsumedCapacity, 1},
			{"UpdateItem (<1 KB)", upd.ConsumedCapacity, 0},
			{"GetItem (eventually consistent, <4 KB)", get.ConsumedCapacity, 0.5},
		}
		for _, tt := range tests {
			if tt.cc == nil {
				t.Errorf("%s: no ConsumedCapacity with ReturnConsumedCapacity TOTAL", tt.op)
				continue
			}
			got := aws.ToFloat64(tt.cc.CapacityUnits)
			if aws.ToString(tt.cc.TableName) != table || got <= 0 || (tt.want != 0 && got != tt.want) {
				t.Errorf("%s: ConsumedCapacity %s %v, want %s %v", tt.op, aws.ToString(tt.cc.TableName), got, table, tt.want)
			}
		}
	})

	t.Run("BatchGetItem returns the items that exist", func(t *testing.T) {
		out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
			table: {Keys: []map[string]ddbtypes.AttributeValue{key("a", w0), key("b", w0), key("missing", w0)}},
		}})
		if err != nil {
			t.Fatalf("BatchGetItem: %v", err)
		}
		var keys []string
		for _, it := range out.Responses[table] {
			keys = append(keys, it["key"].(*ddbtypes.AttributeValueMemberS).Value)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"a", "b"}) {
			t.Errorf("BatchGetItem keys = %q, want [a b]", keys)
		}
		if len(out.UnprocessedKeys) != 0 {
			t.Errorf("UnprocessedKeys = %v, want none", out.UnprocessedKeys)
		}
	})
}

func createTable(t testing.TB, db *dynamodb.Client, in *dynamodb.CreateTableInput) *ddbtypes.TableDescription {
	t.Helper()
	ctx := context.Background()
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatalf("CreateTable %s: %v", aws.ToString(in.TableName), err)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 500*time.Millisecond
	})
	out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 10*time.Second)
	if err != nil {
		t.Fatalf("waiting for table %s: %v", aws.ToString(in.TableName), err)
	}
	return out.Table
}

func getItem(t testing.TB, db *dynamodb.Client, table string, key map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	return out.Item
}

// sameItem compares items of S and N attributes.
func sameItem(a, b map[string]ddbtypes.AttributeValue) bool {
	flat := func(m map[string]ddbtypes.AttributeValue) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			switch v := v.(type) {
			case *ddbtypes.AttributeValueMemberS:
				out[k] = "S:" + v.Value
			case *ddbtypes.AttributeValueMemberN:
				out[k] = "N:" + v.Value
			default:
				out[k] = fmt.Sprintf("%T", v)
			}
		}
		return out
	}
	fa, fb := flat(a), flat(b)
	if len(fa) != len(fb) {
		return false
	}
	for k, v := range fa {
		if fb[k] != v {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------- DynamoDB Streams

func TestDynamoDBStreamsConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := standintest.Config(t, standintest.Start(t))
	db := dynamodb.NewFromConfig(cfg)
	ds := dynamodbstreams.NewFromConfig(cfg)
	const table = "profiles"
	desc := createTable(t, db, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	streamArn := aws.ToString(desc.LatestStreamArn)
	if streamArn == "" {
		t.Fatal("table with a StreamSpecification has no LatestStreamArn")
	}
	id := func(v string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: v}}
	}
	name := func(v string) *ddbtypes.AttributeValueMemberS { return &ddbtypes.AttributeValueMemberS{Value: v} }
	before := time.Now()
	steps := []func() error{
		func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": name("u1"), "name": name("Ada")}})
			return err
		},
		func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: id("u1"), UpdateExpression: aws.String("SET #n = :n"),
				ExpressionAttributeNames: map[string]string{"#n": "name"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": name("Grace")}})
			return err
		},
		func() error { // a failed condition writes no stream record
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": name("u1"), "name": name("X")},
				ConditionExpression: aws.String("attribute_not_exists(id)")})
			var ccf *ddbtypes.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				return nil
			}
			return fmt.Errorf("conditional put on existing item: %v, want ConditionalCheckFailedException", err)
		},
		func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": name("u2"), "name": name("Edsger")}}},
			}})
			return err
		},
		func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: id("u1")})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}

	d, err := ds.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamArn)})
	if err != nil {
		t.Fatalf("DescribeStream: %v", err)
	}
	sd := d.StreamDescription
	if sd.StreamStatus != dstypes.StreamStatusEnabled || sd.StreamViewType != dstypes.StreamViewTypeNewAndOldImages || aws.ToString(sd.TableName) != table {
		t.Errorf("DescribeStream: status %s view %s table %s, want ENABLED NEW_AND_OLD_IMAGES %s", sd.StreamStatus, sd.StreamViewType, aws.ToString(sd.TableName), table)
	}
	if len(sd.Shards) == 0 {
		t.Fatal("DescribeStream: no shards")
	}
	var recs []dstypes.Record
	for _, sh := range sd.Shards {
		it, err := ds.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamArn), ShardId: sh.ShardId, ShardIteratorType: dstypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatalf("GetShardIterator %s: %v", aws.ToString(sh.ShardId), err)
		}
		next := it.ShardIterator
		for range 100 {
			out, err := ds.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(2)})
			if err != nil {
				t.Fatalf("GetRecords: %v", err)
			}
			recs = append(recs, out.Records...)
			if len(out.Records) == 0 || out.NextShardIterator == nil {
				break
			}
			next = out.NextShardIterator
		}
	}

	type view struct{ event, key, oldName, newName string }
	imageName := func(m map[string]dstypes.AttributeValue) string {
		if v, ok := m["name"].(*dstypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	var got []view
	var prev *big.Int
	for i, r := range recs {
		sr := r.Dynamodb
		got = append(got, view{string(r.EventName), sr.Keys["id"].(*dstypes.AttributeValueMemberS).Value, imageName(sr.OldImage), imageName(sr.NewImage)})
		seq := mustBig(t, sr.SequenceNumber)
		if prev != nil && seq.Cmp(prev) <= 0 {
			t.Errorf("record %d: SequenceNumber %s not above %s", i, seq, prev)
		}
		prev = seq
		if at := aws.ToTime(sr.ApproximateCreationDateTime); at.Before(before.Add(-2*time.Second)) || at.After(time.Now().Add(2*time.Second)) {
			t.Errorf("record %d: ApproximateCreationDateTime %v, want about now", i, at)
		}
		if sr.StreamViewType != dstypes.StreamViewTypeNewAndOldImages {
			t.Errorf("record %d: StreamViewType %s", i, sr.StreamViewType)
		}
	}
	want := []view{
		{"INSERT", "u1", "", "Ada"},
		{"MODIFY", "u1", "Ada", "Grace"},
		{"INSERT", "u2", "", "Edsger"},
		{"REMOVE", "u1", "Grace", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("stream records:\n got %v\nwant %v", got, want)
	}
}

// ---------------------------------------------------------------- SQS

func TestSQSConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := sqs.NewFromConfig(standintest.Config(t, standintest.Start(t)))

	dlqURL := createQueue(t, q, "failures-dlq", nil)
	dlqArn := queueArn(t, q, dlqURL)
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, dlqArn)
	url := createQueue(t, q, "failures", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": redrive})

	receive := func(t *testing.T, url string, max int32, visibility *int32) []sqstypes.Message {
		t.Helper()
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max, VisibilityTimeout: aws.ToInt32(visibility),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		return out.Messages
	}
	send := func(t *testing.T, url, body string) {
		t.Helper()
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
			t.Fatalf("SendMessage %s: %v", body, err)
		}
	}

	t.Run("queue attributes round-trip", func(t *testing.T) {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Attributes["VisibilityTimeout"]; got != "1" {
			t.Errorf("VisibilityTimeout = %q, want 1", got)
		}
		var rp struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(out.Attributes["RedrivePolicy"]), &rp); err != nil {
			t.Fatalf("RedrivePolicy %q: %v", out.Attributes["RedrivePolicy"], err)
		}
		if rp.DeadLetterTargetArn != dlqArn || fmt.Sprint(rp.MaxReceiveCount) != "2" {
			t.Errorf("RedrivePolicy = %+v, want %s and 2", rp, dlqArn)
		}
	})

	t.Run("unacknowledged message reappears, then moves to the DLQ", func(t *testing.T) {
		send(t, url, "poison")
		for attempt := 1; attempt <= 2; attempt++ {
			msgs := receive(t, url, 10, nil)
			if len(msgs) != 1 || aws.ToString(msgs[0].Body) != "poison" {
				t.Fatalf("receive %d: got %d messages, want the poison message", attempt, len(msgs))
			}
			if got := msgs[0].Attributes["ApproximateReceiveCount"]; got != strconv.Itoa(attempt) {
				t.Errorf("receive %d: ApproximateReceiveCount = %q, want %d", attempt, got, attempt)
			}
			if again := receive(t, url, 10, nil); len(again) != 0 {
				t.Fatalf("receive %d: message visible again within its visibility timeout", attempt)
			}
			if attempt == 1 {
				time.Sleep(1100 * time.Millisecond) // the queue's VisibilityTimeout
			} else {
				// ChangeMessageVisibility 0 makes it visible at once.
				if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
					t.Fatalf("ChangeMessageVisibility: %v", err)
				}
			}
		}
		if msgs := receive(t, url, 10, nil); len(msgs) != 0 {
			t.Fatalf("after maxReceiveCount 2: source queue still delivers %q", aws.ToString(msgs[0].Body))
		}
		dead := receive(t, dlqURL, 10, nil)
		if len(dead) != 1 || aws.ToString(dead[0].Body) != "poison" {
			t.Fatalf("DLQ holds %d messages, want the poison message", len(dead))
		}
		// moto: the message keeps its receive count in the DLQ (the first
		// DLQ receive reports 3); not asserted either way.
	})

	t.Run("ChangeMessageVisibility extends the timeout", func(t *testing.T) {
		work := createQueue(t, q, "work", map[string]string{"VisibilityTimeout": "1"})
		send(t, work, "slow")
		msgs := receive(t, work, 1, nil)
		if len(msgs) != 1 {
			t.Fatal("no message")
		}
		if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(work), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 30}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		if again := receive(t, work, 1, nil); len(again) != 0 {
			t.Error("message reappeared after the queue timeout although its visibility was extended to 30 s")
		}
	})

	t.Run("DeleteMessageBatch deletes and reports bad handles", func(t *testing.T) {
		batch := createQueue(t, q, "batch", nil)
		for i := range 3 {
			send(t, batch, fmt.Sprint("m", i))
		}
		var msgs []sqstypes.Message
		for len(msgs) < 3 {
			got := receive(t, batch, 10, aws.Int32(30))
			if len(got) == 0 {
				t.Fatalf("received %d of 3 messages", len(msgs))
			}
			msgs = append(msgs, got...)
		}
		entries := []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-receipt-handle")}}
		for i, m := range msgs {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), ReceiptHandle: m.ReceiptHandle})
		}
		out, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(batch), Entries: entries})
		if err != nil {
			t.Fatalf("DeleteMessageBatch: %v", err)
		}
		if len(out.Successful) != 3 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" {
			t.Errorf("DeleteMessageBatch: %d successful, failed %+v; want 3 and [bad]", len(out.Successful), out.Failed)
		}
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(batch), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		if v, nv := attrs.Attributes["ApproximateNumberOfMessages"], attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]; v != "0" || nv != "0" {
			t.Errorf("after deleting all: %s visible, %s in flight; want 0 and 0", v, nv)
		}
	})

	t.Run("FIFO: groups in order, one in flight per group, deduplication", func(t *testing.T) {
		fifo := createQueue(t, q, "tasks.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"})
		sendFIFO := func(body, group, dedup string) {
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(fifo), MessageBody: aws.String(body),
				MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}); err != nil {
				t.Fatalf("SendMessage %s: %v", body, err)
			}
		}
		sendFIFO("a1", "A", "a1")
		sendFIFO("a2", "A", "a2")
		sendFIFO("b1", "B", "b1")
		sendFIFO("a1 again", "A", "a1") // same deduplication id: dropped
		var got []string
		var a1 *string
		for _, want := range []string{"a1", "b1", ""} {
			msgs := receive(t, fifo, 1, nil)
			body := ""
			if len(msgs) == 1 {
				body = aws.ToString(msgs[0].Body)
				if msgs[0].Attributes["SequenceNumber"] == "" || msgs[0].Attributes["MessageGroupId"] == "" {
					t.Errorf("%s: FIFO message without SequenceNumber or MessageGroupId attributes: %v", body, msgs[0].Attributes)
				}
				if body == "a1" {
					a1 = msgs[0].ReceiptHandle
				}
			}
			got = append(got, body)
			if body != want {
				t.Fatalf("FIFO receives so far %q: want %q next (group A is locked while a1 is in flight)", got, want)
			}
		}
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(fifo), ReceiptHandle: a1}); err != nil {
			t.Fatal(err)
		}
		msgs := receive(t, fifo, 10, nil)
		if len(msgs) != 1 || aws.ToString(msgs[0].Body) != "a2" {
			t.Errorf("after deleting a1: got %d messages (%v), want only a2 (the duplicate a1 was dropped)", len(msgs), bodies(msgs))
		}

		cbd := createQueue(t, q, "dedup.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
		for range 2 {
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(cbd), MessageBody: aws.String("same"), MessageGroupId: aws.String("g")}); err != nil {
				t.Fatal(err)
			}
		}
		if msgs := receive(t, cbd, 10, nil); len(msgs) != 1 {
			t.Errorf("content-based deduplication: %d copies delivered, want 1", len(msgs))
		}
	})
}

func createQueue(t testing.TB, q *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := q.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

func queueArn(t testing.TB, q *sqs.Client, url string) string {
	t.Helper()
	out, err := q.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes %s: %v", url, err)
	}
	return out.Attributes["QueueArn"]
}

func bodies(ms []sqstypes.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

// ---------------------------------------------------------------- CloudWatch

func TestCloudWatchConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := standintest.Config(t, standintest.Start(t))
	// moto gap: cloudwatch v1.75 speaks Smithy RPC v2 CBOR by default and
	// moto 5.2.5 answers that with 404; moto serves the service's other
	// two protocols, awsQuery and awsJson1_0, which a client selects with
	// Options.Protocol as below.
	protocols := []struct {
		name string
		set  func(*cloudwatch.Options)
	}{
		{"awsQuery", func(o *cloudwatch.Options) { o.Protocol = awsquery.New(cwschemas.GraniteServiceVersion20100801) }},
		{"awsJson1_0", func(o *cloudwatch.Options) { o.Protocol = awsjson.New10(cwschemas.GraniteServiceVersion20100801) }},
	}
	for _, p := range protocols {
		t.Run("PutMetricData then GetMetricData sums over "+p.name, func(t *testing.T) {
			cw := cloudwatch.NewFromConfig(cfg, p.set)
			putAndSumMetric(t, cw, "Tributary", "EventsIn-"+p.name)
		})
	}

	t.Run("CloudWatch Logs stores, reads and filters events", func(t *testing.T) {
		logs := cloudwatchlogs.NewFromConfig(cfg)
		group, stream := "/aws/lambda/aggregate", "2026/11/29/[$LATEST]0123456789abcdef"
		if _, err := logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)}); err != nil {
			t.Fatalf("CreateLogGroup: %v", err)
		}
		if _, err := logs.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream)}); err != nil {
			t.Fatalf("CreateLogStream: %v", err)
		}
		now := time.Now().UnixMilli()
		lines := []string{"START RequestId: r1", `{"level":"ERROR","msg":"bad record","seq":"7"}`, "END RequestId: r1"}
		var events []logtypes.InputLogEvent
		for i, l := range lines {
			events = append(events, logtypes.InputLogEvent{Message: aws.String(l), Timestamp: aws.Int64(now + int64(i))})
		}
		if _, err := logs.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream), LogEvents: events}); err != nil {
			t.Fatalf("PutLogEvents: %v", err)
		}
		got, err := logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream), StartFromHead: aws.Bool(true)})
		if err != nil {
			t.Fatalf("GetLogEvents: %v", err)
		}
		var msgs []string
		for _, e := range got.Events {
			msgs = append(msgs, aws.ToString(e.Message))
		}
		if !slices.Equal(msgs, lines) {
			t.Errorf("GetLogEvents = %q, want %q", msgs, lines)
		}
		tests := []struct {
			pattern string
			want    []string
		}{
			{"ERROR", lines[1:2]},
			{`"RequestId: r1"`, []string{lines[0], lines[2]}},
			{"START r1", lines[0:1]},
			// moto gap: JSON patterns ({ $.level = "ERROR" }), ?OR terms and
			// -exclusions are not parsed; moto returns every event for them.
		}
		for _, tt := range tests {
			out, err := logs.FilterLogEvents(ctx, &cloudwatchlogs.FilterLogEventsInput{LogGroupName: aws.String(group), FilterPattern: aws.String(tt.pattern)})
			if err != nil {
				t.Fatalf("FilterLogEvents %s: %v", tt.pattern, err)
			}
			var got []string
			for _, e := range out.Events {
				got = append(got, aws.ToString(e.Message))
				if aws.ToString(e.LogStreamName) != stream {
					t.Errorf("filtered event from stream %q, want %q", aws.ToString(e.LogStreamName), stream)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("FilterLogEvents %s = %q, want %q", tt.pattern, got, tt.want)
			}
		}
	})
}

// putAndSumMetric puts 3, 4 and 5 in one minute and reads back their Sum.
//
// moto gap: a GetMetricData MetricStat with Dimensions matches on metric
// name and dimensions only, ignoring Namespace: the same name and
// dimensions in two namespaces are summed together. Keep metric names
// distinct across namespaces locally.
func putAndSumMetric(t *testing.T, cw *cloudwatch.Client, namespace, metric string) {
	t.Helper()
	ctx := context.Background()
	ts := time.Now().Truncate(time.Minute)
	dims := []cwtypes.Dimension{{Name: aws.String("Function"), Value: aws.String("aggregate")}}
	var data []cwtypes.MetricDatum
	for _, v := range []float64{3, 4, 5} {
		data = append(data, cwtypes.MetricDatum{MetricName: aws.String(metric), Dimensions: dims, Value: aws.Float64(v), Unit: cwtypes.StandardUnitCount, Timestamp: aws.Time(ts)})
	}
	if _, err := cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(namespace), MetricData: data}); err != nil {
		t.Fatalf("PutMetricData: %v", err)
	}
	out, err := cw.GetMetricData(ctx, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(ts.Add(-5 * time.Minute)), EndTime: aws.Time(ts.Add(5 * time.Minute)),
		MetricDataQueries: []cwtypes.MetricDataQuery{{Id: aws.String("sum"), MetricStat: &cwtypes.MetricStat{
			Metric: &cwtypes.Metric{Namespace: aws.String(namespace), MetricName: aws.String(metric), Dimensions: dims},
			Period: aws.Int32(60), Stat: aws.String("Sum")}}},
	})
	if err != nil {
		t.Fatalf("GetMetricData: %v", err)
	}
	if len(out.MetricDataResults) != 1 {
		t.Fatalf("got %d results, want 1", len(out.MetricDataResults))
	}
	var sum float64
	for _, v := range out.MetricDataResults[0].Values {
		sum += v
	}
	if sum != 12 {
		t.Errorf("Sum = %v (values %v), want 12", sum, out.MetricDataResults[0].Values)
	}
}

// ---------------------------------------------------------------- SNS

func TestSNSToSQSConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := standintest.Config(t, standintest.Start(t))
	topics := sns.NewFromConfig(cfg)
	q := sqs.NewFromConfig(cfg)

	topic, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("changes")})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	tests := []struct {
		queue string
		raw   bool
	}{{"fanout-raw", true}, {"fanout-envelope", false}}
	urls := map[string]string{}
	for _, tt := range tests {
		urls[tt.queue] = createQueue(t, q, tt.queue, nil)
		if _, err := topics.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(queueArn(t, q, urls[tt.queue])),
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(tt.raw)}}); err != nil {
			t.Fatalf("Subscribe %s: %v", tt.queue, err)
		}
	}
	const msg = `{"key":"u1","count":3}`
	pub, err := topics.Publish(ctx, &sns.PublishInput{TopicArn: topic.TopicArn, Message: aws.String(msg)})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.queue, func(t *testing.T) {
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(urls[tt.queue]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) != 1 {
				t.Fatalf("got %d messages, want 1", len(out.Messages))
			}
			body := aws.ToString(out.Messages[0].Body)
			if tt.raw {
				if body != msg {
					t.Errorf("raw delivery body = %s, want %s", body, msg)
				}
				return
			}
			var env struct{ Type, MessageId, TopicArn, Message string }
			if err := json.Unmarshal([]byte(body), &env); err != nil {
				t.Fatalf("envelope %s: %v", body, err)
			}
			if env.Type != "Notification" || env.Message != msg || env.TopicArn != aws.ToString(topic.TopicArn) || env.MessageId != aws.ToString(pub.MessageId) {
				t.Errorf("envelope = %+v, want a Notification of %s from %s with id %s", env, msg, aws.ToString(topic.TopicArn), aws.ToString(pub.MessageId))
			}
		})
	}
}
