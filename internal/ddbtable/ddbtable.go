// Package ddbtable creates a DynamoDB table keyed by strings, on demand,
// as the CDK stack declares the stack's simple tables: for tests, tools
// and local runs, so that each package's CreateTable names only its keys.
package ddbtable

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Creator is what Create needs of DynamoDB.
type Creator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var _ Creator = (*dynamodb.Client)(nil)

// Create creates the table name with the string partition key hash and,
// when sort is not "", the string sort key sort, billed on demand.
func Create(ctx context.Context, db Creator, name, hash, sort string) error {
	keys := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
	attrs := []types.AttributeDefinition{{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS}}
	if sort != "" {
		keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(sort), KeyType: types.KeyTypeRange})
		attrs = append(attrs, types.AttributeDefinition{AttributeName: aws.String(sort), AttributeType: types.ScalarAttributeTypeS})
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema: keys, AttributeDefinitions: attrs})
	if err != nil {
		return fmt.Errorf("creating table %s: %w", name, err)
	}
	return nil
}
