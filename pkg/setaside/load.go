package setaside

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// querier is what Load needs of DynamoDB.
type querier interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ querier = (*dynamodb.Client)(nil)

// Load reads the item of the record (source, sequence) from the quarantine
// table with its data reassembled from its chunks (DataChunks is then 0).
// It returns nil, nil when there is no such item, and an error when chunks
// are missing.
func Load(ctx context.Context, db querier, table, source, sequence string) (*Item, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key("source").Equal(expression.Value(source)).
		And(expression.Key("sequenceNumber").BeginsWith(sequence))).Build()
	if err != nil {
		return nil, fmt.Errorf("setaside: building the query of %s/%s: %w", source, sequence, err)
	}
	var head *Item
	chunks := map[string][]byte{}
	var start map[string]types.AttributeValue
	for {
		out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: expr.KeyCondition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true),
			ExclusiveStartKey: start})
		if err != nil {
			return nil, fmt.Errorf("setaside: reading %s/%s from %s: %w", source, sequence, table, err)
		}
		var items []Item
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
			return nil, fmt.Errorf("setaside: decoding %s/%s: %w", source, sequence, err)
		}
		for i := range items {
			switch {
			case items[i].SequenceNumber == sequence:
				head = &items[i]
			case strings.HasPrefix(items[i].SequenceNumber, sequence+"#") && items[i].Kind == ItemChunk:
				chunks[items[i].SequenceNumber] = items[i].Data
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	if head == nil || head.DataChunks <= 1 {
		return head, nil
	}
	data := append([]byte(nil), head.Data...)
	for i := 1; i < head.DataChunks; i++ {
		c, ok := chunks[ChunkKey(sequence, i)]
		if !ok {
			return nil, fmt.Errorf("setaside: %s/%s: chunk %d of %d is missing", source, sequence, i, head.DataChunks-1)
		}
		data = append(data, c...)
	}
	head.Data, head.DataChunks = data, 0
	return head, nil
}
