package cdc_test

import (
	"bytes"
	"context"
	"io"
	"sort"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/metrics"
	"github.com/tributary-dev/tributary/pkg/stream"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// lambdaRecord is r in the shape Lambda hands a DynamoDB Streams consumer.
func lambdaRecord(r *streamtypes.Record, streamArn string) events.DynamoDBEventRecord {
	return stream.FromStreamsRecord(r, streamArn)
}

func unmarshalItem(av map[string]ddbtypes.AttributeValue, v any) error {
	return attributevalue.UnmarshalMap(av, v)
}

func newMetrics(w io.Writer) *metrics.Logger { return metrics.New(w, "cdc") }

func throttle() error {
	return &kintypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard shardId-000000000000")}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// rawKinesis is the data of every record of the stream by partition key.
func rawKinesis(t *testing.T, kin *kinesis.Client, name string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, sh := range shards.Shards {
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs.Records {
			out[aws.ToString(r.PartitionKey)] = r.Data
		}
	}
	return out
}

// standIn starts a moto of the test's own and returns its DynamoDB,
// DynamoDB Streams and Kinesis clients.
func standIn(t *testing.T) (*dynamodb.Client, *dynamodbstreams.Client, *kinesis.Client) {
	t.Helper()
	cfg := standintest.Config(t, standintest.Start(t))
	return dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg), kinesis.NewFromConfig(cfg)
}
