package standin_test

// Throughput of the moto stand-in for the calls Tributary makes most, so a
// local run's numbers can be read against what the stand-in itself can do.
// Run: go test -run x -bench . -benchtime 3s ./emulator/standin/
// One stand-in serves every sub-benchmark; each run gets fresh resources.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// benchRun numbers the resources of each benchmark run.
var benchRun atomic.Int64

func benchName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, benchRun.Add(1)) }

func BenchmarkStandin(b *testing.B) {
	ctx := context.Background()
	cfg := standintest.Config(b, standintest.Start(b))
	kc := kinesis.NewFromConfig(cfg)
	db := dynamodb.NewFromConfig(cfg)
	q := sqs.NewFromConfig(cfg)

	// A 500-record batch of ~100-byte envelopes over 1000 keys.
	batch := func(round int) []kintypes.PutRecordsRequestEntry {
		es := make([]kintypes.PutRecordsRequestEntry, 500)
		for i := range es {
			k := fmt.Sprintf("device-%d", (round*500+i)%1000)
			es[i] = kintypes.PutRecordsRequestEntry{PartitionKey: aws.String(k),
				Data: fmt.Appendf(nil, `{"id":"%d-%d","type":"click","key":%q,"occurredAt":"2026-11-29T10:41:00Z"}`, round, i, k)}
		}
		return es
	}

	b.Run("KinesisPutRecords500", func(b *testing.B) {
		stream := benchName("put")
		createKinesisStream(b, kc, stream, 2)
		batches := make([][]kintypes.PutRecordsRequestEntry, 8)
		for i := range batches {
			batches[i] = batch(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			out, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batches[i%len(batches)]})
			if err != nil {
				b.Fatal(err)
			}
			if n := aws.ToInt32(out.FailedRecordCount); n != 0 {
				b.Fatalf("%d records failed", n)
			}
		}
		reportRate(b, 500, "records/s")
	})

	b.Run("KinesisGetRecords", func(b *testing.B) {
		// A 1-shard stream of 5000 records, read in pages of 1000 from
		// TRIM_HORIZON over and over; one op is one GetRecords call.
		const total, page = 5000, 1000
		stream := benchName("get")
		shard := createKinesisStream(b, kc, stream, 1)[0].id
		for r := range total / 500 {
			if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch(r)}); err != nil {
				b.Fatal(err)
			}
		}
		var it *string
		read := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if it == nil {
				it = shardIterator(b, kc, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
			}
			out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(page)})
			if err != nil {
				b.Fatal(err)
			}
			read += len(out.Records)
			it = out.NextShardIterator
			if len(out.Records) < page {
				it = nil
			}
		}
		b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
		reportRate(b, 1, "calls/s")
	})

	newTable := func(b *testing.B) string {
		name := benchName("counts")
		createTable(b, db, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: ddbtypes.ScalarAttributeTypeS}, {AttributeName: aws.String("window"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("window"), KeyType: ddbtypes.KeyTypeRange}},
		})
		return name
	}
	// The aggregate function's write: ADD count for a (key, minute).
	update := func(table string, i int) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key: map[string]ddbtypes.AttributeValue{
				"key":    &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("device-%d", i%1000)},
				"window": &ddbtypes.AttributeValueMemberS{Value: "2026-11-29T10:41:00Z"},
			},
			UpdateExpression:         aws.String("ADD #c :n SET windowEnd = :e, updatedAt = :u"),
			ExpressionAttributeNames: map[string]string{"#c": "count"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":n": &ddbtypes.AttributeValueMemberN{Value: "1"},
				":e": &ddbtypes.AttributeValueMemberS{Value: "2026-11-29T10:42:00Z"},
				":u": &ddbtypes.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
			},
		})
		return err
	}

	b.Run("DynamoDBUpdateItem/sequential", func(b *testing.B) {
		table := newTable(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := update(table, i); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, 1, "calls/s")
	})

	b.Run("DynamoDBUpdateItem/8goroutines", func(b *testing.B) {
		table := newTable(b)
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		b.ResetTimer()
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= b.N {
						return
					}
					if err := update(table, i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		reportRate(b, 1, "calls/s")
	})

	// One op is one message through Send, Receive and Delete.
	b.Run("SQSSendReceiveDelete/single", func(b *testing.B) {
		url := createQueue(b, q, benchName("tasks"), nil)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprint(`{"n":`, i, `}`))}); err != nil {
				b.Fatal(err)
			}
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1})
			if err != nil {
				b.Fatal(err)
			}
			if len(out.Messages) != 1 {
				b.Fatalf("received %d messages, want 1", len(out.Messages))
			}
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, 1, "messages/s")
	})

	// One op is ten messages through SendMessageBatch, ReceiveMessage (10)
	// and DeleteMessageBatch: the shape of Lambda's SQS poller.
	b.Run("SQSSendReceiveDelete/batch10", func(b *testing.B) {
		url := createQueue(b, q, benchName("tasks"), nil)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var send []sqstypes.SendMessageBatchRequestEntry
			for j := range 10 {
				send = append(send, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprint(`{"n":`, i*10+j, `}`))})
			}
			if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: send}); err != nil {
				b.Fatal(err)
			}
			var del []sqstypes.DeleteMessageBatchRequestEntry
			for len(del) < 10 {
				out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
				if err != nil {
					b.Fatal(err)
				}
				if len(out.Messages) == 0 {
					b.Fatalf("received %d of 10 messages", len(del))
				}
				for _, m := range out.Messages {
					del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(len(del))), ReceiptHandle: m.ReceiptHandle})
				}
			}
			if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, 10, "messages/s")
	})
}

// reportRate reports perOp units per op per second of timed work.
func reportRate(b *testing.B, perOp float64, unit string) {
	b.Helper()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(perOp*float64(b.N)/s, unit)
	}
}
