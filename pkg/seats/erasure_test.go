package seats_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tributary-dev/tributary/pkg/es"
	"github.com/tributary-dev/tributary/pkg/quarantine"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestErasureNeverWritesIntoAShow: a show whose id looks like an erasure
// trail ("erasure:cust-5") is an ordinary show; erasing cust-5 appends its
// audit event elsewhere, and the show keeps taking commands. The erasure
// trail's own id cannot be named by a command (400 naming showId).
func TestErasureNeverWritesIntoAShow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	show := `{"id":"c-1","type":"ScheduleShow","showId":"erasure:cust-5","data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`
	if a := f.command(t, show); a.status != 200 {
		t.Fatalf("schedule erasure:cust-5: %+v", a)
	}
	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule show-1: %+v", a)
	}
	if a := f.command(t, `{"id":"c-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-1","customerId":"cust-5","seats":["A1"],"holder":{"name":"Grace Hopper","email":"grace@example.com"}}}`); a.status != 200 {
		t.Fatalf("reserve: %+v", a)
	}
	res, err := es.Erase(ctx, f.db, f.store.Tables(), es.Erasure{Subject: "cust-5", Reason: "request 17", By: "ops"}, time.Now(), false)
	if err != nil || res.Audit == nil {
		t.Fatalf("erase: %+v %v", res, err)
	}
	if res.Audit.AggregateID == "erasure:cust-5" {
		t.Errorf("the audit event went into the show erasure:cust-5")
	}
	evs, err := f.store.Events(ctx, "erasure:cust-5", 0, 0)
	if err != nil || len(evs) != 1 || evs[0].AggregateType != "show" {
		t.Fatalf("show erasure:cust-5 holds %+v (%v), want its ShowScheduled only", evs, err)
	}
	if a := f.command(t, `{"id":"c-3","type":"ReserveSeats","showId":"erasure:cust-5","data":{"reservationId":"r-2","customerId":"cust-6","seats":["A1"]}}`); a.status != 200 {
		t.Errorf("a command on show erasure:cust-5 after the erasure: %+v, want 200", a)
	}
	for _, id := range []string{res.Audit.AggregateID, "erasure#cust-6"} {
		body := fmt.Sprintf(`{"id":"c-4","type":"ScheduleShow","showId":%q,"data":{"title":"Hamlet","startsAt":"2026-12-05T19:30:00Z","rows":2,"seatsPerRow":5}}`, id)
		if a := f.command(t, body); a.status != 400 || !strings.Contains(a.body, `"field":"showId"`) {
			t.Errorf("a command naming the erasure trail %s: %+v, want 400 naming showId", id, a)
		}
	}
}

// TestErasureReachesEveryCopy: a holder's name and e-mail go through the
// commands API into the log, are set aside by the publisher (a tampered
// event) and copied by quarantine from a failed range of the events
// table's stream (before and after the erasure); after the erasure, a
// search of every store the stack keeps — the quarantine table, the
// failure queue, the published stream and every table of the event store
// and its views — finds neither. The events table's own DynamoDB stream is
// not searched: AWS keeps each change there for 24 hours and nothing can
// remove it sooner (docs/event-sourcing.md says so).
func TestErasureReachesEveryCopy(t *testing.T) {
	const name, email = "Grace Hopper", "grace.hopper@example.com"
	f := newFixture(t)
	ctx := context.Background()
	tables := f.store.Tables()
	kin := kinesis.NewFromConfig(awsCfg)
	q := sqs.NewFromConfig(awsCfg)
	streams := dynamodbstreams.NewFromConfig(awsCfg)
	published, quarantineTable := tables.Events+"-published", tables.Events+"-quarantine"
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(published), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, f.db, quarantineTable); err != nil {
		t.Fatal(err)
	}
	qu, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(tables.Events + "-failures")})
	if err != nil {
		t.Fatal(err)
	}

	if a := f.command(t, schedule); a.status != 200 {
		t.Fatalf("schedule: %+v", a)
	}
	reserve := fmt.Sprintf(`{"id":"cmd-2","type":"ReserveSeats","showId":"show-1","data":{"reservationId":"r-1","customerId":"cust-5","seats":["A1"],"holder":{"name":%q,"email":%q}}}`, name, email)
	if a := f.command(t, reserve); a.status != 200 {
		t.Fatalf("reserve: %+v", a)
	}
	// A hand outside the code changes the event's data: a MODIFY whose
	// old and new images both hold the personal data, which the publisher
	// sets aside.
	if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tables.Events),
		Key:              map[string]types.AttributeValue{es.AttrAggregateID: &types.AttributeValueMemberS{Value: "show-1"}, es.AttrVersion: &types.AttributeValueMemberN{Value: "2"}},
		UpdateExpression: aws.String("SET #c = :c"), ExpressionAttributeNames: map[string]string{"#c": es.AttrCommandID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: "edited"}}}); err != nil {
		t.Fatal(err)
	}

	pub := es.NewPublisher(kin, published, es.PublishWithSetAside(setaside.New(f.db, quarantineTable)))
	quar := quarantine.New(kin, f.db, quarantineTable, quarantine.WithDynamoDBStreams(streams))
	seen := 0
	// deliver hands the stream records not delivered yet to the publisher,
	// then has quarantine copy their range as if their batch had failed:
	// the on-failure record goes through the failure queue.
	deliver := func() {
		t.Helper()
		arn, shard, recs := eventStream(t, f.db, streams, tables.Events)
		recs = recs[seen:]
		seen += len(recs)
		resp, err := pub.Handle(ctx, events.DynamoDBEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("publish: %+v %v", resp, err)
		}
		body := fmt.Sprintf(`{"requestContext":{"requestId":"req-%d","functionArn":"arn:aws:lambda:us-east-1:123456789012:function:publish","condition":"RetryAttemptsExhausted","approximateInvokeCount":4},
"responseContext":{"statusCode":200,"executedVersion":"$LATEST","functionError":"Unhandled"},"version":"1.0","timestamp":"2026-11-29T10:43:06.021Z",
"DDBStreamBatchInfo":{"shardId":%q,"startSequenceNumber":%q,"endSequenceNumber":%q,"batchSize":%d,"streamArn":%q}}`,
			seen, shard, recs[0].Change.SequenceNumber, recs[len(recs)-1].Change.SequenceNumber, len(recs), arn)
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: qu.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		msgs, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil || len(msgs.Messages) != 1 {
			t.Fatalf("failure queue: %d messages, %v", len(msgs.Messages), err)
		}
		m := msgs.Messages[0]
		qr, err := quar.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)}}})
		if err != nil || len(qr.BatchItemFailures) != 0 {
			t.Fatalf("quarantine: %+v %v", qr, err)
		}
		// Lambda deletes a message its function handled.
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: qu.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	deliver()
	if _, err := es.Erase(ctx, f.db, tables, es.Erasure{Subject: "cust-5", Reason: "request 17", By: "ops"}, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	deliver() // the erasure's MODIFY (its old image held the data) and the audit event

	items := scanAll(t, f.db, quarantineTable)
	if len(items) != 5 {
		t.Fatalf("%d quarantine items, want the 5 records of the two ranges, the tampered one as the publisher set it aside", len(items))
	}
	var redacted int
	for _, it := range items {
		if strings.Contains(fmt.Sprint(it["reason"]), "Personal data removed from this copy") {
			redacted++
		}
	}
	// Set aside by the publisher: the tampered MODIFY (quarantine leaves
	// that item as it is). Copied by quarantine: the reservation's INSERT,
	// the erasure's MODIFY.
	if redacted != 3 {
		t.Errorf("%d quarantine items say personal data was removed from them, want 3", redacted)
	}

	stores := map[string][]map[string]types.AttributeValue{"quarantine table": items}
	for _, tbl := range []string{tables.Events, tables.Commands, tables.Snapshots, f.views} {
		stores["table "+tbl] = scanAll(t, f.db, tbl)
	}
	for store, items := range stores {
		for _, it := range items {
			for _, s := range []string{name, email} {
				if containsText(&types.AttributeValueMemberM{Value: it}, s) {
					t.Errorf("%s: item %s still holds %q", store, keyOf(it), s)
				}
			}
		}
	}
	for _, r := range kinesisRecords(t, kin, published) {
		if bytes.Contains(r.Data, []byte("Grace")) || bytes.Contains(r.Data, []byte(email)) {
			t.Errorf("published record %s holds personal data", aws.ToString(r.SequenceNumber))
		}
	}
	left, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range left.Messages {
		if strings.Contains(aws.ToString(m.Body), "Grace") || strings.Contains(aws.ToString(m.Body), email) {
			t.Errorf("failure queue message %s holds personal data", aws.ToString(m.MessageId))
		}
	}
}

// eventStream is the events table's stream ARN, its (one) shard and every
// record on it, as Lambda delivers them.
func eventStream(t *testing.T, db *dynamodb.Client, ds *dynamodbstreams.Client, table string) (string, string, []events.DynamoDBEventRecord) {
	t.Helper()
	ctx := context.Background()
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(d.Table.LatestStreamArn)
	sd, err := ds.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil || len(sd.StreamDescription.Shards) != 1 {
		t.Fatalf("stream of %s: %+v %v", table, sd, err)
	}
	shard := sd.StreamDescription.Shards[0].ShardId
	it, err := ds.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard, ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ds.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]events.DynamoDBEventRecord, len(recs.Records))
	for i := range recs.Records {
		out[i] = stream.FromStreamsRecord(&recs.Records[i], arn)
	}
	return arn, aws.ToString(shard), out
}

func scanAll(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table)}
	for {
		page, err := db.Scan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// keyOf names an item by its string keys, for a failure message.
func keyOf(item map[string]types.AttributeValue) string {
	var parts []string
	for _, k := range []string{"source", "sequenceNumber", es.AttrAggregateID, es.AttrCommandRecordID, "pk", "sk"} {
		if s, ok := item[k].(*types.AttributeValueMemberS); ok {
			parts = append(parts, k+"="+s.Value)
		}
	}
	if v, ok := item[es.AttrVersion].(*types.AttributeValueMemberN); ok {
		parts = append(parts, "version="+v.Value)
	}
	return strings.Join(parts, " ")
}

// containsText says whether s is in any string or binary value within av.
func containsText(av types.AttributeValue, s string) bool {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return strings.Contains(v.Value, s)
	case *types.AttributeValueMemberB:
		return bytes.Contains(v.Value, []byte(s))
	case *types.AttributeValueMemberSS:
		return strings.Contains(strings.Join(v.Value, "\x00"), s)
	case *types.AttributeValueMemberL:
		for _, e := range v.Value {
			if containsText(e, s) {
				return true
			}
		}
	case *types.AttributeValueMemberM:
		for _, e := range v.Value {
			if containsText(e, s) {
				return true
			}
		}
	}
	return false
}

func kinesisRecords(t *testing.T, kin *kinesis.Client, name string) []kintypes.Record {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []kintypes.Record
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs.Records...)
	}
	return out
}
