package quarantine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var now = time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)

// env is one test's view of the shared stand-in: its own quarantine table
// and stream names (prefix), so tests do not see each other's items.
type env struct {
	kin     *kinesis.Client
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	table   string
	prefix  string
}

// TestAgainstStandIn runs the tests that need AWS on one stand-in (starting
// moto costs a second or two on a busy machine).
func TestAgainstStandIn(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	tests := []struct {
		name string
		fn   func(t *testing.T, e env)
	}{
		{"QuarantinesKinesisRecords", testQuarantinesKinesisRecords},
		{"NotesMissingRecords", testNotesMissingRecords},
		{"CopiesAFilteredBatchWhole", testCopiesAFilteredBatchWhole},
		{"QuarantinesDynamoDBStreamRecords", testQuarantinesDynamoDBStreamRecords},
		{"CopiesNoPersonalData", testCopiesNoPersonalData},
		{"ReportsWriteFailures", testReportsWriteFailures},
		{"KeepsBigRecordsWhole", testKeepsBigRecordsWhole},
		{"BoundsTheBytesOneMessageCopies", testBoundsTheBytesOneMessageCopies},
		{"LeavesRecordsSetAsideByTheirFunction", testLeavesRecordsSetAside},
		{"SetsAsideHostileMessages", testSetsAsideHostileMessages},
		{"LeavesDynamoDBRecordsSetAsideByTheirFunction", testLeavesDynamoDBRecordsSetAside},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg),
				fmt.Sprintf("quarantine%d", i), fmt.Sprintf("t%d-", i)}
			createTable(t, e.db, e.table, "source", "sequenceNumber", nil)
			tt.fn(t, e)
		})
	}
}

func createTable(t *testing.T, db *dynamodb.Client, name, hash, rng string, spec *types.StreamSpecification) *dynamodb.CreateTableOutput {
	t.Helper()
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}},
		StreamSpecification:  spec,
	}
	if rng != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(rng), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
	}
	out, err := db.CreateTable(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scan(t *testing.T, e env) []Item {
	t.Helper()
	out, err := e.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	var items []Item
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
		t.Fatal(err)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].SequenceNumber < items[j].SequenceNumber })
	return items
}

func onFailure(kind, streamArn, shard, start, end string, size int) string {
	return fmt.Sprintf(`{"requestContext":{"requestId":"req-1","functionArn":"arn:aws:lambda:us-east-1:123456789012:function:aggregate","condition":"RetryAttemptsExhausted","approximateInvokeCount":4},
"responseContext":{"statusCode":200,"executedVersion":"$LATEST","functionError":"Unhandled"},"version":"1.0","timestamp":"2026-11-29T10:43:06.021Z",
%q:{"shardId":%q,"startSequenceNumber":%q,"endSequenceNumber":%q,"approximateArrivalOfFirstRecord":"2026-11-29T10:41:04.835Z","approximateArrivalOfLastRecord":"2026-11-29T10:41:05.580Z","batchSize":%d,"streamArn":%q}}`,
		kind, shard, start, end, size, streamArn)
}

func failedIDs(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func testQuarantinesKinesisRecords(t *testing.T, e env) {
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.prefix + "events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, err := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.prefix + "events")})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	var seqs []string
	shard := ""
	for i := range 5 {
		out, err := e.kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.prefix + "events"), PartitionKey: aws.String(fmt.Sprintf("user-%d", i)), Data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
		shard = aws.ToString(out.ShardId)
	}

	h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }), WithDynamoDBStreams(e.streams), WithFunction("tributary-quarantine"))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-good", Body: onFailure("KinesisBatchInfo", arn, shard, seqs[1], seqs[3], 3), EventSourceARN: failuresArn},
		{MessageId: "m-junk", Body: `{"hello":"world"}`, EventSourceARN: failuresArn},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(resp); len(got) != 0 {
		t.Errorf("batch item failures %v, want none: the junk message is set aside, not retried", got)
	}
	var items []Item
	var junk *Item
	for _, it := range scan(t, e) {
		if it.Source == failuresArn {
			junk = &it
			continue
		}
		items = append(items, it)
	}
	if junk == nil || junk.Kind != "set-aside" || junk.SequenceNumber != "m-junk" || string(junk.Data) != `{"hello":"world"}` ||
		junk.Field != "KinesisBatchInfo" || junk.Category != "unparseable" || junk.Function != "tributary-quarantine" || !strings.Contains(junk.Reason, "not a Lambda on-failure record") {
		t.Errorf("junk message item = %+v; want it set aside with its body and the field at fault", junk)
	}
	if len(items) != 3 {
		t.Fatalf("%d items, want 3 (records 1..3): %+v", len(items), items)
	}
	for i, it := range items {
		n := i + 1
		if it.Kind != "record" || it.SequenceNumber != seqs[n] || string(it.Data) != fmt.Sprintf(`{"n":%d}`, n) || it.PartitionKey != fmt.Sprintf("user-%d", n) {
			t.Errorf("item %d = %+v", i, it)
		}
		if !strings.Contains(it.Reason, "batch retries exhausted (RetryAttemptsExhausted; function error Unhandled)") || !strings.Contains(it.Reason, "may have been applied already") {
			t.Errorf("item %d reason %q: want it to say the batch's retries ran out and the record may have been applied", i, it.Reason)
		}
		if it.Source != arn+"/"+shard || it.Condition != "RetryAttemptsExhausted" || it.FunctionError != "Unhandled" ||
			it.FunctionArn != "arn:aws:lambda:us-east-1:123456789012:function:aggregate" || it.FailedAt != "2026-11-29T10:43:06.021Z" || it.RequestID != "req-1" {
			t.Errorf("item %d metadata = %+v", i, it)
		}
		if it.ExpiresAt != now.Add(14*24*time.Hour).Unix() {
			t.Errorf("expiresAt %d, want 14 days from now", it.ExpiresAt)
		}
		if _, err := time.Parse(time.RFC3339Nano, it.ApproximateArrival); err != nil {
			t.Errorf("approximateArrival %q: %v", it.ApproximateArrival, err)
		}
	}

	// Redelivery of the same message writes the same items again, no more.
	if resp, _ := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-good", Body: onFailure("KinesisBatchInfo", arn, shard, seqs[1], seqs[3], 3)}}}); len(resp.BatchItemFailures) != 0 {
		t.Errorf("redelivery failed: %v", resp)
	}
	if n := len(scan(t, e)); n != 4 {
		t.Errorf("%d items after redelivery, want 4", n)
	}
}

// testCopiesAFilteredBatchWhole: a mapping with filter criteria (join's
// data.type, a stream handler's EventTypes) delivers only the records that
// match, so its batch's range in the shard holds many more records than its
// batchSize. Every record of the range is still there and must be copied;
// none may be written off as "no longer in the stream".
func testCopiesAFilteredBatchWhole(t *testing.T, e env) {
	ctx := context.Background()
	name := e.prefix + "events"
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, err := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	const n = 200
	var entries []kinesistypes.PutRecordsRequestEntry
	for i := range n {
		entries = append(entries, kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	out, err := e.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v, %d failed", err, aws.ToInt32(out.FailedRecordCount))
	}
	first, last := out.Records[0], out.Records[n-1]
	shard := aws.ToString(first.ShardId)
	// The filter let 3 of the 200 through: batchSize 3.
	body := onFailure("KinesisBatchInfo", arn, shard, aws.ToString(first.SequenceNumber), aws.ToString(last.SequenceNumber), 3)
	h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: body, EventSourceARN: failuresArn}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v; want success", resp, err)
	}
	records := 0
	for _, it := range scan(t, e) {
		switch it.Kind {
		case "record":
			records++
		case "missing":
			t.Errorf("marker %q: every record of the range is in the stream", it.Reason)
		}
	}
	if records != n {
		t.Errorf("%d records copied, want all %d of the range", records, n)
	}
}

const failuresArn = "arn:aws:sqs:us-east-1:123456789012:Tributary-Failures"

func testNotesMissingRecords(t *testing.T, e env) {
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.prefix + "events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, _ := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.prefix + "events")})
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	out, err := e.kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.prefix + "events"), PartitionKey: aws.String("k"), Data: []byte("only")})
	if err != nil {
		t.Fatal(err)
	}
	seq, shard := aws.ToString(out.SequenceNumber), aws.ToString(out.ShardId)
	n, _ := strconv.Atoi(seq) // moto numbers records 1, 2, ...; a real stream's are longer
	later := strconv.Itoa(n + 5)

	tests := []struct {
		name        string
		body        string
		wantRecords int
		wantFound   int
		wantSource  string
	}{
		{
			name:        "end of the batch is not in the shard",
			body:        onFailure("KinesisBatchInfo", arn, shard, seq, later, 3),
			wantRecords: 1, wantFound: 1, wantSource: arn + "/" + shard,
		},
		{
			name:        "stream deleted",
			body:        onFailure("KinesisBatchInfo", "arn:aws:kinesis:us-east-1:123456789012:stream/deleted", "shardId-000000000000", "1", "2", 2),
			wantRecords: 0, wantFound: 0, wantSource: "arn:aws:kinesis:us-east-1:123456789012:stream/deleted/shardId-000000000000",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }))
			resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: tt.body}}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v; want success (the marker is the outcome)", resp, err)
			}
			var records, markers []Item
			for _, it := range scan(t, e) {
				if it.Source != tt.wantSource {
					continue
				}
				if it.Kind == "missing" {
					markers = append(markers, it)
				} else {
					records = append(records, it)
				}
			}
			if len(records) != tt.wantRecords || len(markers) != 1 {
				t.Fatalf("%d records and %d markers, want %d and 1", len(records), len(markers), tt.wantRecords)
			}
			m := markers[0]
			if m.RecordsFound == nil || *m.RecordsFound != tt.wantFound || m.Reason == "" || m.StartSequenceNumber == "" || m.EndSequenceNumber == "" ||
				m.SequenceNumber != m.StartSequenceNumber+"-"+m.EndSequenceNumber || m.ApproximateArrivalOfFirstRecord == "" || m.Condition != "RetryAttemptsExhausted" || m.ExpiresAt == 0 {
				t.Errorf("marker %+v", m)
			}
		})
	}
}

func testQuarantinesDynamoDBStreamRecords(t *testing.T, e env) {
	ctx := context.Background()
	streamArn, sh, recs := profileChanges(t, e)
	first, last := aws.ToString(recs.Records[0].Dynamodb.SequenceNumber), aws.ToString(recs.Records[2].Dynamodb.SequenceNumber)

	h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }), WithDynamoDBStreams(e.streams))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-ddb", Body: onFailure("DDBStreamBatchInfo", streamArn, aws.ToString(sh.ShardId), first, last, 3)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	items := scan(t, e)
	if len(items) != 3 {
		t.Fatalf("%d items, want 3: %+v", len(items), items)
	}
	for _, it := range items {
		var rec events.DynamoDBEventRecord
		if err := jsonUnmarshal(it.Data, &rec); err != nil {
			t.Fatalf("data is not a Lambda DynamoDB stream record: %v: %s", err, it.Data)
		}
		if it.Kind != "record" || it.EventName != "INSERT" || rec.EventName != "INSERT" || rec.Change.SequenceNumber != it.SequenceNumber ||
			rec.Change.NewImage["plan"].String() != "pro" || rec.Change.Keys["id"].String() == "" || it.Source != streamArn {
			t.Errorf("item %+v, record %+v", it, rec)
		}
	}
}

// testCopiesNoPersonalData: the copies of a failed range of a table's
// stream keep no "personal" attribute (the events table's personal data):
// not the INSERT's new image, not the old image of the change that erased
// it. They keep the keys that find the item, and say what was removed.
func testCopiesNoPersonalData(t *testing.T, e env) {
	ctx := context.Background()
	name := e.prefix + "events"
	tbl := createTable(t, e.db, name, "aggregateId", "", &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages})
	streamArn := aws.ToString(tbl.TableDescription.LatestStreamArn)
	key := map[string]types.AttributeValue{"aggregateId": &types.AttributeValueMemberS{Value: "show-1"}}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
		"aggregateId": key["aggregateId"], "subject": &types.AttributeValueMemberS{Value: "cust-5"},
		"personal": &types.AttributeValueMemberS{Value: `{"name":"Grace Hopper","email":"grace@example.com"}`},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: key, UpdateExpression: aws.String("REMOVE personal")}); err != nil {
		t.Fatal(err)
	}
	sh, recs := streamRecords(t, e, streamArn, 2)
	first, last := aws.ToString(recs.Records[0].Dynamodb.SequenceNumber), aws.ToString(recs.Records[1].Dynamodb.SequenceNumber)
	h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }), WithDynamoDBStreams(e.streams))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-ddb", Body: onFailure("DDBStreamBatchInfo", streamArn, aws.ToString(sh.ShardId), first, last, 2)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	items := scan(t, e)
	if len(items) != 2 {
		t.Fatalf("%d items, want 2: %+v", len(items), items)
	}
	for i, want := range []string{"dynamodb.NewImage.personal", "dynamodb.OldImage.personal"} {
		it := items[i]
		for _, s := range []string{"Grace Hopper", "grace@example.com"} {
			if strings.Contains(string(it.Data), s) {
				t.Errorf("copy %s (%s) holds %q: %s", it.SequenceNumber, it.EventName, s, it.Data)
			}
		}
		var rec events.DynamoDBEventRecord
		if err := jsonUnmarshal(it.Data, &rec); err != nil || rec.Change.Keys["aggregateId"].String() != "show-1" {
			t.Errorf("copy %s lost the keys that find its item: %v: %s", it.SequenceNumber, err, it.Data)
		}
		if !strings.HasPrefix(it.Reason, "batch retries exhausted") || !strings.Contains(it.Reason, "Personal data removed from this copy ("+want+")") {
			t.Errorf("copy %s reason %q: want it to say %s was removed", it.SequenceNumber, it.Reason, want)
		}
	}
}

func testReportsWriteFailures(t *testing.T, e env) {
	h := New(e.kin, e.db, "no-such-table")
	resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: onFailure("KinesisBatchInfo", "arn:aws:kinesis:us-east-1:123456789012:stream/gone", "shardId-000000000000", "1", "2", 2)},
		{MessageId: "m-2", Body: "junk", EventSourceARN: failuresArn},
	}})
	if got := failedIDs(resp); fmt.Sprint(got) != "[m-1 m-2]" {
		t.Errorf("failures %v, want [m-1 m-2]: a batch or a junk message that could not be written must come back", got)
	}
}

// testKeepsBigRecordsWhole: a record of a failed range bigger than a
// DynamoDB item holds is kept whole, over chunk items.
func testKeepsBigRecordsWhole(t *testing.T, e env) {
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.prefix + "events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, _ := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.prefix + "events")})
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	big := []byte(strings.Repeat("0123456789abcdef", (1<<20-16)/16)) // 1 MiB with its partition key
	out, err := e.kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.prefix + "events"), PartitionKey: aws.String("k"), Data: big})
	if err != nil {
		t.Fatal(err)
	}
	seq, shard := aws.ToString(out.SequenceNumber), aws.ToString(out.ShardId)
	h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: onFailure("KinesisBatchInfo", arn, shard, seq, seq, 1)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	it, err := setaside.Load(ctx, e.db, e.table, arn+"/"+shard, seq)
	if err != nil || it == nil {
		t.Fatalf("Load = %v, %v", it, err)
	}
	if !bytes.Equal(it.Data, big) || it.DataTruncated || it.DataBytes != len(big) || it.Kind != "record" {
		t.Errorf("kept %d bytes (truncated %v, dataBytes %d, kind %s), want all %d", len(it.Data), it.DataTruncated, it.DataBytes, it.Kind, len(big))
	}
}

// testBoundsTheBytesOneMessageCopies: a failed range can hold many MB (a
// filtered batch's range holds every record between its first and last).
// One message copies at most maxBytes of it; the rest is not dropped
// silently: the marker names the range not copied by its sequence numbers,
// and RecordsMissing counts it (at least 1 when the batch's size, a
// filtered batch's, is below what was copied), so its alarm fires. A range
// under the bound is copied whole, as before.
func testBoundsTheBytesOneMessageCopies(t *testing.T, e env) {
	ctx := context.Background()
	name := e.prefix + "events"
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, _ := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	var entries []kinesistypes.PutRecordsRequestEntry
	for i := range 10 {
		entries = append(entries, kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 1000)))})
	}
	out, err := e.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v, %d failed", err, aws.ToInt32(out.FailedRecordCount))
	}
	var seqs []string
	for _, r := range out.Records {
		seqs = append(seqs, aws.ToString(r.SequenceNumber))
	}
	shard, source := aws.ToString(out.Records[0].ShardId), arn+"/"+aws.ToString(out.Records[0].ShardId)
	tests := []struct {
		name        string
		maxBytes    int
		start, end  int
		batchSize   int
		wantCopied  int
		wantMissing float64
	}{
		{"under the bound: whole", 1 << 20, 0, 9, 10, 10, 0},
		{"over the bound", 3500, 0, 9, 10, 3, 7},
		{"over the bound, filtered batch", 3500, 2, 9, 2, 3, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := fmt.Sprintf("%sbound%d", e.prefix, i)
			createTable(t, e.db, table, "source", "sequenceNumber", nil)
			var emf bytes.Buffer
			h := New(e.kin, e.db, table, WithClock(func() time.Time { return now }), WithMetrics(metrics.New(&emf, "quarantine")))
			h.maxBytes = tt.maxBytes
			body := onFailure("KinesisBatchInfo", arn, shard, seqs[tt.start], seqs[tt.end], tt.batchSize)
			resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: body, EventSourceARN: failuresArn}}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v; want success (the marker is the outcome)", resp, err)
			}
			var copied []string
			var markers []Item
			for _, it := range scan(t, env{db: e.db, table: table}) {
				switch {
				case it.Source != source:
				case it.Kind == "record":
					copied = append(copied, it.SequenceNumber)
				case it.Kind == "missing":
					markers = append(markers, it)
				}
			}
			sort.Slice(copied, func(i, j int) bool {
				return len(copied[i]) < len(copied[j]) || len(copied[i]) == len(copied[j]) && copied[i] < copied[j]
			})
			if want := seqs[tt.start : tt.start+tt.wantCopied]; fmt.Sprint(copied) != fmt.Sprint(want) {
				t.Errorf("copied %v, want %v", copied, want)
			}
			var doc map[string]any
			if err := json.Unmarshal(emf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc["RecordsMissing"] != tt.wantMissing || doc["RecordsQuarantined"] != float64(tt.wantCopied) {
				t.Errorf("RecordsMissing %v, RecordsQuarantined %v; want %v and %v", doc["RecordsMissing"], doc["RecordsQuarantined"], tt.wantMissing, tt.wantCopied)
			}
			if tt.wantMissing == 0 {
				if len(markers) != 0 {
					t.Errorf("markers %+v, want none", markers)
				}
				return
			}
			if len(markers) != 1 {
				t.Fatalf("%d markers, want 1", len(markers))
			}
			m := markers[0]
			left := fmt.Sprintf("from sequence number %s to %s were not copied", seqs[tt.start+tt.wantCopied], seqs[tt.end])
			if !strings.Contains(m.Reason, left) || !strings.Contains(m.Reason, fmt.Sprint(tt.maxBytes)) || m.RecordsFound == nil || *m.RecordsFound != tt.wantCopied {
				t.Errorf("marker reason %q (found %v): want it to say the records %s, and the bound", m.Reason, m.RecordsFound, left)
			}
		})
	}
}

// testLeavesRecordsSetAside: the function set its poison record aside
// itself; when the range reaches the failures queue anyway (a later
// transient failure, a crash), quarantine keeps the function's item, whose
// reason is the precise one, and adds the others.
func testLeavesRecordsSetAside(t *testing.T, e env) {
	ctx := context.Background()
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.prefix + "events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	desc, _ := e.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.prefix + "events")})
	arn := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	var seqs []string
	var shard string
	for i := range 3 {
		out, err := e.kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.prefix + "events"), PartitionKey: aws.String("k"), Data: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		seqs, shard = append(seqs, aws.ToString(out.SequenceNumber)), aws.ToString(out.ShardId)
	}
	rec := setaside.Record{Function: "aggregate", Source: arn, Shard: shard, Sequence: seqs[1], Data: []byte("1"),
		Field: "data.ms", Kind: setaside.KindOverflow, Reason: "data.ms would make the sum +Inf"}
	if err := setaside.New(e.db, e.table).SetAside(ctx, []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	h := New(e.kin, e.db, e.table)
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: onFailure("KinesisBatchInfo", arn, shard, seqs[0], seqs[2], 3)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	items := scan(t, e)
	if len(items) != 3 {
		t.Fatalf("%d items, want 3", len(items))
	}
	for i, it := range items {
		wantKind := "record"
		if i == 1 {
			wantKind = "set-aside"
		}
		if it.Kind != wantKind || it.SequenceNumber != seqs[i] {
			t.Errorf("item %d: kind %s seq %s, want %s %s", i, it.Kind, it.SequenceNumber, wantKind, seqs[i])
		}
	}
	if items[1].Reason != rec.Reason || items[1].Field != "data.ms" || items[1].Condition != "" {
		t.Errorf("the set-aside item was replaced: %+v", items[1])
	}
}

// testSetsAsideHostileMessages: a message that can never be quarantined —
// a field over its bound, a key twice or in another case — is set aside
// itself on its first delivery: acknowledged (no batch item failure), its
// body kept whole, the field at fault named, counted in RecordsSetAside and
// UnparseableMessages. Before, the first two ended in the failures queue's
// DLQ after every retry failed with no write (a sort key over 1,024 bytes;
// an item over 400 KB), and the third was read as version "1.0".
func testSetsAsideHostileMessages(t *testing.T, e env) {
	ctx := context.Background()
	digits := strings.Repeat("7", 600)
	good := onFailure("KinesisBatchInfo", "arn:aws:kinesis:us-east-1:123456789012:stream/events", "shardId-000000000000", "1", "2", 2)
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q is not in the message", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := []struct {
		name      string
		body      string
		wantField string
	}{
		{"600-digit sequence numbers", replace(`"startSequenceNumber":"1","endSequenceNumber":"2"`,
			`"startSequenceNumber":"`+digits+`","endSequenceNumber":"`+digits+`"`), "KinesisBatchInfo.startSequenceNumber"},
		{"600-digit end sequence number", replace(`"endSequenceNumber":"2"`, `"endSequenceNumber":"`+digits+`"`), "KinesisBatchInfo.endSequenceNumber"},
		{"450 KB timestamp", replace(`"timestamp":"2026-11-29T10:43:06.021Z"`, `"timestamp":"2026-11-29T10:43:06.021Z`+strings.Repeat(" ", 450<<10)+`"`), "timestamp"},
		{"450 KB arrival time", replace(`"approximateArrivalOfLastRecord":"2026-11-29T10:41:05.580Z"`,
			`"approximateArrivalOfLastRecord":"`+strings.Repeat("2", 450<<10)+`"`), "KinesisBatchInfo.approximateArrivalOfLastRecord"},
		{"version twice and in another case", replace(`"version":"1.0",`, `"version":"1.0","version":"2.0","VERSION":"3",`), "version"},
		{"version in another case", replace(`"version":"1.0",`, `"VERSION":"1.0",`), "VERSION"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var emf bytes.Buffer
			h := New(e.kin, e.db, e.table, WithClock(func() time.Time { return now }), WithFunction("tributary-quarantine"),
				WithMetrics(metrics.New(&emf, "quarantine")))
			id := fmt.Sprintf("m-hostile-%d", i)
			resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: tt.body, EventSourceARN: failuresArn}}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v; want the message acknowledged: it can never succeed", resp, err)
			}
			it, err := setaside.Load(ctx, e.db, e.table, failuresArn, id)
			if err != nil || it == nil {
				t.Fatalf("Load = %v, %v; want the message set aside", it, err)
			}
			if it.Kind != setaside.ItemSetAside || it.Category != setaside.KindUnparseable || it.Field != tt.wantField ||
				!strings.Contains(it.Reason, tt.wantField) || it.Function != "tributary-quarantine" {
				t.Errorf("item kind %s category %s field %q reason %.300q; want set aside, unparseable, field %s named in the reason",
					it.Kind, it.Category, it.Field, it.Reason, tt.wantField)
			}
			if string(it.Data) != tt.body || it.DataTruncated {
				t.Errorf("kept %d bytes of the body (truncated %v), want all %d", len(it.Data), it.DataTruncated, len(tt.body))
			}
			if len(it.Reason) > 1024 {
				t.Errorf("reason is %d bytes: it must not repeat the value whole", len(it.Reason))
			}
			var doc map[string]any
			if err := json.Unmarshal(emf.Bytes(), &doc); err != nil || doc["RecordsSetAside"] != 1.0 || doc["UnparseableMessages"] != 1.0 {
				t.Errorf("EMF %.500s: want RecordsSetAside 1 and UnparseableMessages 1 (%v)", emf.String(), err)
			}
		})
	}
	for _, it := range scan(t, e) {
		if it.Source != failuresArn {
			t.Errorf("item %s/%.40s: a hostile message wrote more than itself", it.Source, it.SequenceNumber)
		}
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// throttledWriter fails every BatchWriteItem and UpdateItem (the writes
// of a record set aside) as DynamoDB does under throttling (after the
// SDK's own retries).
type throttledWriter struct{ *dynamodb.Client }

func (throttledWriter) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
}

func (throttledWriter) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
}

func TestThrottledTableIsRetried(t *testing.T) {
	h := New(nil, throttledWriter{}, "quarantine")
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-junk", Body: "junk", EventSourceARN: failuresArn}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(resp); fmt.Sprint(got) != "[m-junk]" {
		t.Errorf("failures %v, want [m-junk]: a message that could not be set aside comes back, it is not dropped", got)
	}
}

// testLeavesDynamoDBRecordsSetAside: a DynamoDB stream record its function
// set aside (source: the stream ARN, as the Lambda event names no shard)
// that is also in a range Lambda gave up on stays one item, the function's,
// and the range's other records are found where the set-aside ones are, by
// the stream ARN. Before, quarantine wrote its copies under
// "<stream ARN>/<shard>": the set-aside record was kept a second time with
// a reason saying it was not found bad, and a query by the stream ARN (as
// docs/set-aside.md says) found none of the copies.
func testLeavesDynamoDBRecordsSetAside(t *testing.T, e env) {
	ctx := context.Background()
	streamArn, sh, recs := profileChanges(t, e)
	var seqs []string
	for _, r := range recs.Records {
		seqs = append(seqs, aws.ToString(r.Dynamodb.SequenceNumber))
	}
	bad := stream.FromStreamsRecord(&recs.Records[1], streamArn)
	rec := setaside.FromDynamoDB(&bad)
	rec.Function, rec.Field, rec.Kind, rec.Reason = "cdc", "dynamodb.NewImage.plan", setaside.KindInvalid, "plan: not a known plan"
	if err := setaside.New(e.db, e.table).SetAside(ctx, []setaside.Record{rec}); err != nil {
		t.Fatal(err)
	}
	h := New(e.kin, e.db, e.table, WithDynamoDBStreams(e.streams))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-ddb",
		Body: onFailure("DDBStreamBatchInfo", streamArn, aws.ToString(sh.ShardId), seqs[0], seqs[2], 3)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	items := scan(t, e)
	if len(items) != 3 {
		for _, it := range items {
			t.Logf("%s %s %s", it.Kind, it.Source, it.SequenceNumber)
		}
		t.Fatalf("%d items, want 3 (the set-aside record kept once)", len(items))
	}
	for i, it := range items {
		wantKind := "record"
		if i == 1 {
			wantKind = "set-aside"
		}
		if it.Kind != wantKind || it.SequenceNumber != seqs[i] || it.Source != streamArn {
			t.Errorf("item %d: kind %s source %s seq %s, want %s %s %s", i, it.Kind, it.Source, it.SequenceNumber, wantKind, streamArn, seqs[i])
		}
	}
	if items[1].Reason != rec.Reason || items[1].Field != rec.Field || items[1].Condition != "" {
		t.Errorf("the set-aside item was replaced: %+v", items[1])
	}
}

// profileChanges writes three items to a profiles table with a stream and
// reads back their stream records: the stream's ARN, its shard and the
// records.
func profileChanges(t *testing.T, e env) (string, streamtypes.Shard, *dynamodbstreams.GetRecordsOutput) {
	t.Helper()
	ctx := context.Background()
	tbl := createTable(t, e.db, e.prefix+"profiles", "id", "", &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages})
	streamArn := aws.ToString(tbl.TableDescription.LatestStreamArn)
	for i := range 3 {
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.prefix + "profiles"), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("user-%d", i)}, "plan": &types.AttributeValueMemberS{Value: "pro"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	sh, recs := streamRecords(t, e, streamArn, 3)
	return streamArn, sh, recs
}

// streamRecords reads the n records of a table's stream from its first
// shard's start: the shard and the records.
func streamRecords(t *testing.T, e env, streamArn string, n int) (streamtypes.Shard, *dynamodbstreams.GetRecordsOutput) {
	t.Helper()
	ctx := context.Background()
	d, err := e.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamArn)})
	if err != nil {
		t.Fatal(err)
	}
	sh := d.StreamDescription.Shards[0]
	it, err := e.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamArn), ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(recs.Records) != n {
		t.Fatalf("stream records %d, want %d (%v)", len(recs.Records), n, err)
	}
	return sh, recs
}
