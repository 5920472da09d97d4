package events

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/pkg/replay"
)

// snapshotConsoleTest runs snapshot/console-test.json: the table it names
// (prefixed with the case's name) holds two profiles → 2 published, the
// table's stream position, AT_TIMESTAMP at or before the invocation.
func snapshotConsoleTest(t *testing.T, e env, raw []byte) {
	var req replay.SnapshotRequest
	decode(t, raw, &req)
	if req.Table == "" {
		t.Fatal(`the sample has no "table"`)
	}
	ctx := context.Background()
	table := e.name + "-" + req.Table
	created, err := e.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("userId"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("userId"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"user-42", "user-7"} {
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"userId": &ddbtypes.AttributeValueMemberS{Value: u}, "version": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	o := e.db.Options()
	streams := dynamodbstreams.New(dynamodbstreams.Options{Region: o.Region, Credentials: o.Credentials, BaseEndpoint: o.BaseEndpoint, HTTPClient: o.HTTPClient})
	before := time.Now()
	res, err := replay.NewSnapshotter(e.db, streams, e.kin, e.name).Handle(ctx, replay.SnapshotRequest{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	if res.Published != 2 || res.StartingPosition != "AT_TIMESTAMP" || res.StartAt.After(before) ||
		res.Position == nil || res.Position.StreamArn != aws.ToString(created.TableDescription.LatestStreamArn) {
		t.Errorf("result %s: want 2 published, the table's stream position, AT_TIMESTAMP no later than the invocation", out)
	}
}
