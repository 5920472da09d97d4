package idempotency

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

// CreateTable creates an idempotency table named name (partition key id,
// on-demand), as the CDK stack declares it; for tests and local runs. The
// TTL on expiration is the stack's business: Do does not rely on it, since it
// compares expiration itself.
func CreateTable(ctx context.Context, db tableCreator, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrID), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrID), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		return fmt.Errorf("idempotency: creating table %s: %w", name, err)
	}
	return nil
}
