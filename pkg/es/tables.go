package es

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// tableAdmin is what CreateTables needs.
type tableAdmin interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTables creates the store's tables with the schema the CDK stack
// declares (infra/eventsourcing.go): for tests and tools.
func CreateTables(ctx context.Context, db tableAdmin, t Tables) error {
	s, n := types.ScalarAttributeTypeS, types.ScalarAttributeTypeN
	key := func(name string, kt types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: kt}
	}
	attr := func(name string, at types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: at}
	}
	ins := []*dynamodb.CreateTableInput{
		{
			TableName:            aws.String(t.Events),
			KeySchema:            []types.KeySchemaElement{key(AttrAggregateID, types.KeyTypeHash), key(AttrVersion, types.KeyTypeRange)},
			AttributeDefinitions: []types.AttributeDefinition{attr(AttrAggregateID, s), attr(AttrVersion, n), attr(AttrSubject, s)},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
				IndexName:  aws.String(SubjectIndex),
				KeySchema:  []types.KeySchemaElement{key(AttrSubject, types.KeyTypeHash)},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			}},
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		},
		{
			TableName:            aws.String(t.Snapshots),
			KeySchema:            []types.KeySchemaElement{key(AttrAggregateID, types.KeyTypeHash)},
			AttributeDefinitions: []types.AttributeDefinition{attr(AttrAggregateID, s)},
		},
		{
			TableName:            aws.String(t.Commands),
			KeySchema:            []types.KeySchemaElement{key(AttrCommandRecordID, types.KeyTypeHash)},
			AttributeDefinitions: []types.AttributeDefinition{attr(AttrCommandRecordID, s)},
		},
	}
	for _, in := range ins {
		in.BillingMode = types.BillingModePayPerRequest
		if _, err := db.CreateTable(ctx, in); err != nil {
			return fmt.Errorf("es: creating table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(t.Commands),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrExpiresAt), Enabled: aws.Bool(true)}}); err != nil {
		return fmt.Errorf("es: time to live of %s: %w", t.Commands, err)
	}
	return nil
}

// scanner is the call that reads a whole table.
type scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ scanner = (*dynamodb.Client)(nil)

// ScanLog reads the whole log, from the start, with a consistent Scan of
// the events table, handing fn each run of consecutive events of one
// aggregate (in version order within a run). A Scan returns one
// aggregate's events together and in order, but nothing here relies on it:
// an aggregate may come in several runs, and a consumer that fences by
// version (package projection) takes them in any split.
func ScanLog(ctx context.Context, db scanner, table string, fn func(run []Event) error) (events int, err error) {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	var run []Event
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := fn(run)
		run = nil
		return err
	}
	for {
		page, err := db.Scan(ctx, in)
		if err != nil {
			return events, fmt.Errorf("es: reading the log (%s): %w", table, err)
		}
		for _, it := range page.Items {
			e, err := EventFromItem(it)
			if err != nil {
				return events, fmt.Errorf("es: reading the log (%s): %w", table, err)
			}
			events++
			if n := len(run); n > 0 && (run[n-1].AggregateID != e.AggregateID || run[n-1].Version+1 != e.Version) {
				if err := flush(); err != nil {
					return events, err
				}
			}
			run = append(run, e)
		}
		if page.LastEvaluatedKey == nil {
			return events, flush()
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
