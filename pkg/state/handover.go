package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A replay fills a new version of the views table while the live functions
// publish window results from the current one, and the readers move to the
// new version mid-stream. Which results are already on the output stream
// is known only to the version that published them, so the replay writes
// into the version it fills an item naming the version the readers used
// before it (SetHandover); a publisher on the new version asks that one
// (PublishedRevision) before it sends a result again.
const (
	handoverPK       = "~handover" // pipeline names never start with "~"
	handoverSK       = "previous"
	attrPreviousView = "previousTable"
	attrHandoverAt   = "at"
)

// Handover is what a version of the views table knows of the version the
// readers used before it.
type Handover struct {
	// Previous is that version's table name.
	Previous string
	// At is when the replay that filled this version started to.
	At time.Time
}

// SetHandover records in v's table that previous is the version the
// readers used before it (one write; a later replay into the same table
// overwrites it).
func (v *Views) SetHandover(ctx context.Context, previous string, at time.Time) error {
	if previous == "" || previous == v.table {
		return fmt.Errorf("state: handover of %s: the previous version %q is not another table", v.table, previous)
	}
	_, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(handoverPK, handoverSK),
		UpdateExpression:         aws.String("SET #p = :p, #a = :a"),
		ExpressionAttributeNames: map[string]string{"#p": attrPreviousView, "#a": attrHandoverAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: previous},
			":a": &types.AttributeValueMemberS{Value: at.UTC().Format(TimeLayout)},
		},
	})
	if err != nil {
		return fmt.Errorf("state: recording in %s that %s was the previous version: %w", v.table, previous, err)
	}
	return nil
}

// Handover reads what v's table knows of the version before it; ok is
// false when no replay filled it (the stack's own table, or one made by
// hand).
func (v *Views) Handover(ctx context.Context) (h Handover, ok bool, err error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: itemKey(handoverPK, handoverSK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Handover{}, false, fmt.Errorf("state: reading the handover item of %s: %w", v.table, err)
	}
	prev := stringAttr(out.Item, attrPreviousView)
	if prev == "" {
		return Handover{}, false, nil
	}
	at, err := itemTime(out.Item, attrHandoverAt)
	if err != nil {
		return Handover{}, false, err
	}
	return Handover{Previous: prev, At: at}, true, nil
}

// IsHandoverItem reports whether item is the handover item (SetHandover):
// bookkeeping, not a result.
func IsHandoverItem(item map[string]types.AttributeValue) bool {
	return stringAttr(item, attrPK) == handoverPK
}

// PublishedRevision is the last revision of ref's result known to be on
// the output stream from v's table: the window's revision once it is
// final and published, one less while its latest revision is still listed
// (revisions are published in order), 0 while it is open. A session or
// sliding window's item (PutWindow: final, or retracted) is written just
// before its result is sent, so its revision counts as sent. exists is false
// when the table holds no item for ref. A table that does not exist (a
// previous version deleted since) holds none.
func (v *Views) PublishedRevision(ctx context.Context, ref Ref) (revision int, exists bool, err error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: itemKey(ref.PK, ref.SK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#s, #r, #o"),
		ExpressionAttributeNames: map[string]string{"#s": attrStatus, "#r": attrRevision, "#o": attrOpenIn}})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("state: reading %s %s in %s: %w", ref.PK, ref.SK, v.table, err)
	}
	if out.Item == nil {
		return v.pagedRevision(ctx, ref)
	}
	if st := stringAttr(out.Item, attrStatus); st != statusFinal && st != statusRetracted {
		return 0, true, nil
	}
	rev := intAttr(out.Item, attrRevision)
	if stringAttr(out.Item, attrOpenIn) != "" {
		rev--
	}
	return rev, true, nil
}
