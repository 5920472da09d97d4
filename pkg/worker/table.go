package worker

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type tableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var _ tableCreator = (*dynamodb.Client)(nil)

// CreateResultsTable creates a results table named name (partition key
// taskId, on-demand), as the CDK stack declares it; for tests and local runs.
func CreateResultsTable(ctx context.Context, db tableCreator, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrTaskID), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrTaskID), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		return fmt.Errorf("worker: creating table %s: %w", name, err)
	}
	return nil
}
