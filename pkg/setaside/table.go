package setaside

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// tableCreator is what CreateTable needs.
type tableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateTable creates a quarantine table with the schema the stack
// declares (partition key source, sort key sequenceNumber, on demand), for
// tests and tools.
func CreateTable(ctx context.Context, db tableCreator, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("source"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sequenceNumber"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("source"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sequenceNumber"), KeyType: types.KeyTypeRange}},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("setaside: creating table %s: %w", name, err)
	}
	return nil
}
