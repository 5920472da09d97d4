package state

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Interval overflow. What an interval of the per-interval path carries to
// its flush (the dedupe claims it made, the session and sliding points)
// rides in the window state Lambda passes between its invocations, 1 MB at
// most. At 5,000 keys a shard the partials leave too little of it, and
// what did not fit was written at once, per key (a ledger write and a
// keyed state write for every key with some, at most invocations): 1.6
// write units an event where the flush alone writes 0.4. The part that
// does not fit is now written as overflow: one item per part, the bytes of
// many keys together, billed by their size, named in the state and read
// back by the invocations after it (a warm process keeps them) and by the
// flush, which writes each key once as before. An overflow item is written
// once and never changed (its name carries a hash of its bytes); it
// expires by its TTL, read or not: an invocation that failed after writing
// one leaves it named by no state.

const (
	overflowPrefix = "~ovf#"
	attrOverflow   = "b"

	// MaxOverflowBytes bounds one overflow item's bytes: the item,
	// keys and names included, stays inside DynamoDB's 400 KB.
	MaxOverflowBytes = limits.DynamoDBItemBytes - 16<<10

	// overflowExpiry is how long an overflow item is kept: an interval
	// is at most 15 minutes, and its flush may be retried for as long
	// as the hold lasts.
	overflowExpiry = 24 * time.Hour
)

func overflowPK(pipeline, shard string) string {
	return overflowPrefix + pipeline + "#" + shard
}

// PutOverflow writes one overflow item of pipeline's shard under name.
func (v *Views) PutOverflow(ctx context.Context, pipeline, shard, name string, data []byte) error {
	if len(data) == 0 || len(data) > MaxOverflowBytes {
		return fmt.Errorf("state: overflow %s of %s %s is %d bytes, want 1 to %d", name, pipeline, shard, len(data), MaxOverflowBytes)
	}
	_, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        v.tableName,
		Key:              itemKey(overflowPK(pipeline, shard), name),
		UpdateExpression: aws.String("SET #b = :b, #x = :x"),
		ExpressionAttributeNames: map[string]string{
			"#b": attrOverflow, "#x": attrExpiresAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":b": &types.AttributeValueMemberB{Value: data},
			":x": avInt(v.now().Add(overflowExpiry).Unix()),
		},
	})
	if err != nil {
		return fmt.Errorf("state: writing overflow %s of %s %s: %w", name, pipeline, shard, err)
	}
	return nil
}

// Overflow reads the overflow item name of pipeline's shard (a strongly
// consistent read). An item that is not there is an error: a state names
// only what an invocation wrote before returning it.
func (v *Views) Overflow(ctx context.Context, pipeline, shard, name string) ([]byte, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: v.tableName, Key: itemKey(overflowPK(pipeline, shard), name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("state: reading overflow %s of %s %s: %w", name, pipeline, shard, err)
	}
	b, ok := out.Item[attrOverflow].(*types.AttributeValueMemberB)
	if !ok || len(b.Value) == 0 {
		return nil, fmt.Errorf("state: overflow %s of %s %s is not in the table (expired, or deleted): the interval's state names it", name, pipeline, shard)
	}
	return b.Value, nil
}

// IsOverflowItem reports whether a views item is interval overflow.
func IsOverflowItem(pk string) bool { return strings.HasPrefix(pk, overflowPrefix) }
