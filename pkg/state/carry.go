package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A shard's carry: what the per-interval flush of a pipeline whose keys
// each stay on one shard keeps of the tumbling and hopping windows it has
// not closed yet, so that a window is written once, when it closes, rather
// than at every flush it is open for (package aggregate, carry.go). Items
// under pk ~carry#<pipeline>, sk the shard or a chunk of it (package
// aggregate names them); their contents are the aggregate package's
// (opaque here), each written whole on the version read, so a flush, the
// ticker and a child shard taking over a parent's carry never both apply
// one.
const (
	carryPrefix = "~carry#" // pipeline names never start with "~"
	attrCarry   = "carry"   // the carry's contents (B)

	// MaxCarryBytes is the most a carry holds: DynamoDB's item limit is
	// 400 KB, and a write is billed by the whole item (a KB a unit), so a
	// flush whose carry would pass it writes some keys' windows instead.
	MaxCarryBytes = 300 << 10

	// CarryListingRoom is what SaveCarry takes past MaxCarryBytes: a
	// carry being written out is stored with the shard its partials are
	// listed under, a Kinesis shard id (at most 128 bytes), on top of
	// partials that filled it.
	CarryListingRoom = 130

	// carryExpiry expires a carry no flush, tick or reshard has written
	// for a week, and whose windows have ended and passed their
	// retention (Carry.KeepUntil): a shard gone without a child to take it
	// over.
	carryExpiry = 7 * 24 * time.Hour
)

// ErrCarryChanged is SaveCarry on a carry written since it was read: read
// it again.
var ErrCarryChanged = errors.New("state: the shard's carry was written since it was read")

// Carry is one carry item as stored (Shard: its sort key, a shard or a
// chunk of one): Version 0 is none. KeepUntil is
// how long SaveCarry keeps it at least (its windows' end and their
// retention): it expires a week after its last write, or then if later.
type Carry struct {
	Shard     string
	Data      []byte
	Version   int64
	KeepUntil time.Time
}

func carryPK(pipeline string) string { return carryPrefix + pipeline }

// LoadCarry reads shard's carry, consistently (a carry read stale would
// close windows without the records of its last interval).
func (v *Views) LoadCarry(ctx context.Context, pipeline, shard string) (Carry, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: v.tableName, Key: itemKey(carryPK(pipeline), shard), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Carry{}, fmt.Errorf("state: reading the carry of %s %s: %w", pipeline, shard, err)
	}
	return carryOf(shard, out.Item), nil
}

func carryOf(shard string, item map[string]types.AttributeValue) Carry {
	c := Carry{Shard: shard, Version: int64(intAttr(item, attrVersion))}
	if b, ok := item[attrCarry].(*types.AttributeValueMemberB); ok {
		c.Data = b.Value
	}
	return c
}

// SaveCarry writes c.Data as c.Shard's carry on the version c was read at
// (ErrCarryChanged if another write came first).
func (v *Views) SaveCarry(ctx context.Context, pipeline string, c Carry) error {
	if len(c.Data) == 0 || len(c.Data) > MaxCarryBytes+CarryListingRoom {
		return fmt.Errorf("state: the carry of %s %s is %d bytes, want 1 to %d", pipeline, c.Shard, len(c.Data), MaxCarryBytes+CarryListingRoom)
	}
	now := v.now()
	values := map[string]types.AttributeValue{
		":d": &types.AttributeValueMemberB{Value: c.Data},
		":n": avInt(c.Version + 1),
		":u": avS(now.UTC().Format(TimeLayout)),
		":x": avInt(max(now.Add(carryExpiry).Unix(), c.KeepUntil.Unix())),
	}
	cond := "attribute_not_exists(#v)"
	if c.Version > 0 {
		cond = "#v = :p"
		values[":p"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(c.Version, 10)}
	}
	_, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(carryPK(pipeline), c.Shard),
		UpdateExpression:          aws.String("SET #c = :d, #v = :n, #u = :u, #x = :x"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#c": attrCarry, "#v": attrVersion, "#u": attrUpdatedAt, "#x": attrExpiresAt},
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrCarryChanged
	}
	if err != nil {
		return fmt.Errorf("state: writing the carry of %s %s: %w", pipeline, c.Shard, err)
	}
	return nil
}

// Carries reads every shard's carry of pipeline, for a reader showing the
// windows still open and a replay writing them out.
func (v *Views) Carries(ctx context.Context, pipeline string) ([]Carry, error) {
	var out []Carry
	err := v.queryItems(ctx, expression.Key(attrPK).Equal(expression.Value(carryPK(pipeline))), func(it map[string]types.AttributeValue) error {
		out = append(out, carryOf(stringAttr(it, attrSK), it))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: reading the carries of %s: %w", pipeline, err)
	}
	return out, nil
}
