package quarantine

import (
	"context"
	"fmt"
	"slices"
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

func (w *recordingWriter) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
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

// expiringShard holds records 100, 200 and 300; the iterator of the first
// read expires after it answered 100 (an iterator lives five minutes, and
// a throttled read can outlive it), which the stand-in never does.
type expiringShard struct{ asked []string }

func (s *expiringShard) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	s.asked = append(s.asked, string(in.ShardIteratorType)+" "+aws.ToString(in.StartingSequenceNumber))
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("it-%d", len(s.asked)))}, nil
}

func (s *expiringShard) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	rec := func(seq string) kinesistypes.Record {
		return kinesistypes.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte("d" + seq)}
	}
	switch aws.ToString(in.ShardIterator) {
	case "it-1":
		return &kinesis.GetRecordsOutput{Records: []kinesistypes.Record{rec("100")}, NextShardIterator: aws.String("stale"), MillisBehindLatest: aws.Int64(1000)}, nil
	case "stale":
		return nil, &kinesistypes.ExpiredIteratorException{Message: aws.String("Iterator expired")}
	case "it-2":
		return &kinesis.GetRecordsOutput{Records: []kinesistypes.Record{rec("200"), rec("300")}, NextShardIterator: aws.String("tip"), MillisBehindLatest: aws.Int64(0)}, nil
	}
	return &kinesis.GetRecordsOutput{NextShardIterator: aws.String("tip"), MillisBehindLatest: aws.Int64(0)}, nil
}

// A read whose iterator expires goes on just after the last record it
// copied, and copies the batch whole, each record once.
func TestExpiredIteratorReadsOnAfterTheLastRecord(t *testing.T) {
	w := &recordingWriter{}
	shard := &expiringShard{}
	h := New(shard, w, "quarantine")
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1",
		Body: onFailure("KinesisBatchInfo", "arn:aws:kinesis:us-east-1:123456789012:stream/events", "shardId-000000000000", "100", "300", 3)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v", resp, err)
	}
	if want := []string{"AT_SEQUENCE_NUMBER 100", "AFTER_SEQUENCE_NUMBER 100"}; !slices.Equal(shard.asked, want) {
		t.Errorf("iterators asked %v, want %v", shard.asked, want)
	}
	var seqs []string
	for _, it := range w.items {
		if it.Kind == "missing" {
			t.Errorf("a missing marker: %s", it.Reason)
		}
		if it.Kind == "record" {
			seqs = append(seqs, it.SequenceNumber)
		}
	}
	slices.Sort(seqs)
	if want := []string{"100", "200", "300"}; !slices.Equal(seqs, want) {
		t.Errorf("records copied %v, want %v", seqs, want)
	}
}
