package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/dedupe"
)

// tableCreator is what CreateTable needs.
type tableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateTable creates a views table with the schema Views expects — the one
// the CDK stack declares: keys pk/sk (S), the sparse KEYS_ONLY index
// OpenIndex on openIn/openUntil, on-demand billing. For tests and tools.
func CreateTable(ctx context.Context, db tableCreator, name string) error {
	s := types.ScalarAttributeTypeS
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: s},
			{AttributeName: aws.String(attrSK), AttributeType: s},
			{AttributeName: aws.String(attrOpenIn), AttributeType: s},
			{AttributeName: aws.String(attrOpenUntil), AttributeType: s},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(OpenIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrOpenIn), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrOpenUntil), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		return fmt.Errorf("state: creating table %s: %w", name, err)
	}
	return nil
}

// TTLAttribute is the views table's time-to-live attribute.
const TTLAttribute = attrExpiresAt

// LedgerKey places a pipeline's dedupe ledger in its views table: partition
// key "dedupe#<pipeline>#<key>", sort key "head" or "seg#<n>", apart from
// every window item ("<pipeline>#<key>").
func LedgerKey(pipeline string) dedupe.ItemKey {
	prefix := ledgerPrefix + pipeline + "#"
	head := sharedS("head")
	return func(key string, segment int64) map[string]types.AttributeValue {
		if segment != dedupe.Head {
			return itemKey(prefix+key, fmt.Sprintf("seg#%012d", segment))
		}
		// A key's head is read at each interval and written at each
		// commit: its key values are shared (sharedS), as window keys'
		// are.
		var buf [160]byte
		pk := append(append(buf[:0], prefix...), key...)
		return map[string]types.AttributeValue{attrPK: sharedSBytes(pk), attrSK: head}
	}
}

// RangeLedgerKey places the ledgers of a pipeline's hash ranges
// (dedupe.WithRanges) in its views table: partition key
// "dedupe#~range#<pipeline>#<range>" (one hexadecimal digit), apart from
// every key's own ledger (LedgerKey), since a pipeline's name has no "~".
func RangeLedgerKey(pipeline string) dedupe.ItemKey {
	byKey := LedgerKey("~range#" + pipeline)
	return func(key string, segment int64) map[string]types.AttributeValue {
		return byKey(dedupe.RangeName(key), segment)
	}
}

// LedgerLayoutKey is the key of a pipeline's dedupe layout marker
// (dedupe.WithLayoutMarker) in its views table: partition key
// "dedupe#~layout#<pipeline>", apart from every ledger, as RangeLedgerKey's
// are.
func LedgerLayoutKey(pipeline string) map[string]types.AttributeValue {
	return itemKey(ledgerPrefix+"~layout#"+pipeline, "layout")
}

// IsLedgerItem reports whether item is a dedupe ledger item (LedgerKey)
// rather than a window, keyed state or watermark item.
func IsLedgerItem(item map[string]types.AttributeValue) bool {
	return strings.HasPrefix(stringAttr(item, attrPK), ledgerPrefix)
}

// IsListingItem reports whether item is a window listing (ListWindow): the
// finalize's bookkeeping, not a result.
func IsListingItem(item map[string]types.AttributeValue) bool {
	return strings.HasPrefix(stringAttr(item, attrPK), listingPrefix)
}

// CommittedThrough reads a shard's watermark item (CommitWatermark): the
// pipeline and shard it is of, and the fence of the last record whose
// batch the function finished, every item of it written. ok is false for
// any other item; through is "" for a watermark item written before
// positions were kept.
func CommittedThrough(item map[string]types.AttributeValue) (pipeline, shard, through string, ok bool) {
	pipeline, ok = strings.CutPrefix(stringAttr(item, attrPK), watermarkPK(""))
	if !ok {
		return "", "", "", false
	}
	return pipeline, stringAttr(item, attrSK), stringAttr(item, attrThrough), true
}

// tableScanner is what PipelinesHeld needs.
type tableScanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// PipelinesHeld names, sorted, the pipelines whose watermark items table
// holds: every windowed pipeline that has written it, a removed one's too.
// It is for tools that must not leave a pipeline out of a version (replay):
// one Scan of the whole table (filtered to the watermark items' keys, so
// little comes back, but every item is read), as no index lists them.
func PipelinesHeld(ctx context.Context, db tableScanner, table string) ([]string, error) {
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String("begins_with(#pk, :wm)"),
		ProjectionExpression:      aws.String("#pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":wm": avS(watermarkPK(""))},
	}
	seen := map[string]bool{}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("state: listing the pipelines views table %s holds: %w", table, err)
		}
		for _, it := range out.Items {
			if p, ok := strings.CutPrefix(stringAttr(it, attrPK), watermarkPK("")); ok {
				seen[p] = true
			}
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// ledgerPrefix starts every ledger item's partition key.
const ledgerPrefix = "dedupe#"
