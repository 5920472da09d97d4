package state_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/state"
)

// TestDamagedWindowItemErrorNamesItsKeys: a window item that cannot be
// read (a part that is not binary or does not decode, a previous value
// that does not decode, a window start that is not a time) fails a query and a finalize with an error that
// quotes the item's pk and sk, so an operator can find it in the table.
// Before, the error said "state: item part 0: ..." and nothing of the item.
func TestDamagedWindowItemErrorNamesItsKeys(t *testing.T) {
	tests := []struct {
		name   string
		attr   string
		value  types.AttributeValue
		reason string // what the error says besides the item's keys
	}{
		{"part not binary", "parts", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}}, "part 0 is not binary"},
		{"part does not decode", "parts", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: []byte{0xff, 0xfe, 0xfd}}}}, "part 0:"},
		{"previous does not decode", "previous", &types.AttributeValueMemberB{Value: []byte{0xff, 0xfe, 0xfd}}, "previous:"},
		{"windowStart not a time", "windowStart", &types.AttributeValueMemberS{Value: strings.Repeat("x", 5000)}, `windowStart "xxxx`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newViews(t)
			if _, err := f.views.Apply(ctx, "shard-0", update(entries(1, 3))); err != nil {
				t.Fatal(err)
			}
			pk, sk := state.PartitionKey("p", "k"), state.SortKey("tumbling:1m0s", minute)
			if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(f.table),
				Key: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
				},
				UpdateExpression:          aws.String("SET #a = :v"),
				ExpressionAttributeNames:  map[string]string{"#a": tt.attr},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": tt.value},
			}); err != nil {
				t.Fatal(err)
			}
			names := "pk " + strconv.Quote(pk) + " sk " + strconv.Quote(sk)
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s read the damaged item without an error", what)
				}
				if !strings.Contains(err.Error(), names) || !strings.Contains(err.Error(), tt.reason) || len(err.Error()) > 1000 {
					t.Errorf("%s: error %q\n  does not name the item (%s) and say %q in at most 1000 bytes", what, err, names, tt.reason)
				}
			}
			_, err := f.views.Query(ctx, "p", "k", "tumbling:1m0s", minute.Start, minute.End)
			check("Query", err)
			_, _, err = f.views.Finalize(ctx, state.Ref{PK: pk, SK: sk})
			check("Finalize", err)
		})
	}
}

// TestDamagedItemErrorIsBounded: an item whose pk is far longer than any
// pipeline and key make (a table written by hand) is named cut, so the
// error stays a log line.
func TestDamagedItemErrorIsBounded(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	pk, sk := strings.Repeat("p", 2000), strings.Repeat("s", 1000)
	if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(f.table),
		Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"parts": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.views.Finalize(ctx, state.Ref{PK: pk, SK: sk})
	if err == nil {
		t.Fatal("Finalize read the damaged item without an error")
	}
	if n := len(err.Error()); n > 2500 || !strings.Contains(err.Error(), `pk "pppp`) || !strings.Contains(err.Error(), `sk "ssss`) {
		t.Errorf("error of %d bytes (want at most 2500, naming pk and sk): %.300q", n, err)
	}
}
