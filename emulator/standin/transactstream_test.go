package standin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	dstypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// TestStreamSurvivesACancelledTransaction: a DynamoDB Streams consumer that
// keeps following its shard iterator sees the writes after a cancelled
// TransactWriteItems, and none of the cancelled one's — as on AWS. (moto
// 5.2.5 alone swaps the table's stream for a copy on rollback, and the
// iterators consumers hold never see another record: the launcher keeps
// the live stream.)
func TestStreamSurvivesACancelledTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := standintest.Config(t, standintest.Start(t))
	db, ds := dynamodb.NewFromConfig(cfg), dynamodbstreams.NewFromConfig(cfg)
	out, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("log"), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage}})
	if err != nil {
		t.Fatal(err)
	}
	arn := out.TableDescription.LatestStreamArn
	put := func(k string) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String("log"),
			Item:                map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: k}},
			ConditionExpression: aws.String("attribute_not_exists(k)")}}
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put("a")}}); err != nil {
		t.Fatal(err)
	}
	desc, err := ds.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		t.Fatal(err)
	}
	it, err := ds.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: desc.StreamDescription.Shards[0].ShardId, ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	read := func() []string {
		t.Helper()
		page, err := ds.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		it.ShardIterator = page.NextShardIterator
		var keys []string
		for _, r := range page.Records {
			keys = append(keys, r.Dynamodb.Keys["k"].(*dstypes.AttributeValueMemberS).Value)
		}
		return keys
	}
	if got := read(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("first read %v, want [a]", got)
	}
	// b is written, then a's condition fails: the transaction is cancelled.
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put("b"), put("a")}})
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("got %v, want the transaction cancelled", err)
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{put("c")}}); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 1 || got[0] != "c" {
		t.Fatalf("after a cancelled transaction the held iterator reads %v, want [c] (not b, which was never written)", got)
	}
}
