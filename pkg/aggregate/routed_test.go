package aggregate_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

// tableRecorder records the table each request named when it reached the
// store.
type tableRecorder struct{ got []string }

func (r *tableRecorder) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.got = append(r.got, aws.ToString(in.TableName))
	return &dynamodb.UpdateItemOutput{}, nil
}

func (r *tableRecorder) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.got = append(r.got, aws.ToString(in.TableName))
	return &dynamodb.GetItemOutput{}, nil
}

func (r *tableRecorder) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.got = append(r.got, aws.ToString(in.TableName))
	return &dynamodb.QueryOutput{}, nil
}

func (r *tableRecorder) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.got = append(r.got, aws.ToString(in.TableName))
	return &dynamodb.DeleteItemOutput{}, nil
}

func (r *tableRecorder) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{}, nil
}

func (r *tableRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.got = append(r.got, aws.ToString(in.TableName))
	return &dynamodb.PutItemOutput{}, nil
}

func (r *tableRecorder) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// Every request goes to the current views table, whether it names that
// one (passed on as it is) or an earlier one (sent with the current name),
// and the caller's request keeps the name it had.
func TestRoutedStoresSendEveryRequestToTheCurrentTable(t *testing.T) {
	ctx := context.Background()
	for _, named := range []string{"views-current", "views-before-the-swap"} {
		rec := &tableRecorder{}
		table := aggregate.FixedViewsTable("views-current")
		store, ledger := aggregate.RoutedStore(rec, table), aggregate.RoutedLedgerStore(rec, table)
		up := &dynamodb.UpdateItemInput{TableName: aws.String(named)}
		get := &dynamodb.GetItemInput{TableName: aws.String(named)}
		put := &dynamodb.PutItemInput{TableName: aws.String(named)}
		if _, err := store.UpdateItem(ctx, up); err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetItem(ctx, get); err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.PutItem(ctx, put); err != nil {
			t.Fatal(err)
		}
		for i, got := range rec.got {
			if got != "views-current" {
				t.Errorf("naming %s: request %d reached table %q, want views-current", named, i, got)
			}
		}
		if len(rec.got) != 3 {
			t.Errorf("naming %s: %d requests reached the store, want 3", named, len(rec.got))
		}
		for _, n := range []*string{up.TableName, get.TableName, put.TableName} {
			if *n != named {
				t.Errorf("naming %s: the caller's request now names %q", named, *n)
			}
		}
	}
}
