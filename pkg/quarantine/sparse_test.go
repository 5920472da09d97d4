package quarantine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// sparseShard is a shard whose range holds a gap: after the batch's first
// record GetRecords answers nothing, though the rest is still there (the
// shard's tip is a minute ahead). Kinesis does this ("it might take
// multiple calls to get to a portion of the shard that contains records");
// the stand-in never does.
type sparseShard struct{}

func (sparseShard) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("first")}, nil
}

func (sparseShard) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out := &kinesis.GetRecordsOutput{NextShardIterator: aws.String("next"), MillisBehindLatest: aws.Int64(60000)}
	if aws.ToString(in.ShardIterator) == "first" {
		out.Records = []kinesistypes.Record{{SequenceNumber: aws.String("100"), PartitionKey: aws.String("k"), Data: []byte("a")}}
	}
	return out, nil
}

// recordingWriter keeps the items put.
type recordingWriter struct {
	mu    sync.Mutex
	items []Item
}

func (w *recordingWriter) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	var it Item
	if err := attributevalue.UnmarshalMap(in.Item, &it); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.items = append(w.items, it)
	return &dynamodb.PutItemOutput{}, nil
}

func (w *recordingWriter) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return &dynamodb.BatchWriteItemOutput{}, nil
}

// A read that stops on empty answers short of the shard's tip says the
// records it did not copy may still be in the stream, naming them, not
// that they are gone: before, the marker told the operator the records
// were no longer in the stream while a second read would have found them.
func TestEmptyReadsBehindTheTipAreNotGone(t *testing.T) {
	w := &recordingWriter{}
	h := New(sparseShard{}, w, "quarantine")
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1",
		Body: onFailure("KinesisBatchInfo", "arn:aws:kinesis:us-east-1:123456789012:stream/events", "shardId-000000000000", "100", "900", 2)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	var marker *Item
	for i := range w.items {
		if w.items[i].Kind == "missing" {
			marker = &w.items[i]
		}
	}
	if marker == nil {
		t.Fatalf("no missing item among %d", len(w.items))
	}
	if strings.Contains(marker.Reason, "no longer in the stream") || !strings.Contains(marker.Reason, "after sequence number 100 to 900 were not copied and may still be in the stream") {
		t.Errorf("marker reason %q: want it to say the records after 100 to 900 may still be in the stream", marker.Reason)
	}
}
