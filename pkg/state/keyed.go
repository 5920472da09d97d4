package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/window"
)

// Keyed state: windows whose bounds depend on the records (session and
// sliding windows) are computed from a per-(key, window kind) buffer kept in
// one item, written whole with optimistic concurrency (the version) and fenced
// by the shard's sequence numbers like window items: Fence says which records
// it already holds, so a redelivered record is never folded in twice.

const (
	keyedSuffix = "|~state" // sorts after every window id of the kind
	attrBlob    = "state"

	statusRetracted = "retracted"
)

// KeyedRef names one keyed state item.
type KeyedRef struct{ Pipeline, Key, Kind string }

// IsKeyed reports whether an open-windows ref is a keyed state item, and which.
func IsKeyed(ref Ref) (kind string, ok bool) {
	if !strings.HasSuffix(ref.SK, keyedSuffix) {
		return "", false
	}
	return strings.TrimSuffix(ref.SK, keyedSuffix), true
}

// KeyedState is a keyed state item as loaded.
type KeyedState struct {
	Blob    []byte // the caller's encoding of its buffer
	Fence   string // highest sequence number folded in from the shard ("" if none)
	Version int    // 0 when the item does not exist yet
}

// LoadKeyed reads a keyed state item (a strongly consistent read: the cold or
// conflict path).
func (v *Views) LoadKeyed(ctx context.Context, ref KeyedRef, shard string) (KeyedState, error) {
	return v.loadKeyed(ctx, itemKey(PartitionKey(ref.Pipeline, ref.Key), ref.Kind+keyedSuffix), shard)
}

// LoadKeyedRef reads the keyed state item an open-windows ref points at.
func (v *Views) LoadKeyedRef(ctx context.Context, ref Ref, shard string) (KeyedState, KeyedRef, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(v.table), Key: itemKey(ref.PK, ref.SK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return KeyedState{}, KeyedRef{}, fmt.Errorf("state: loading %s %s: %w", ref.PK, ref.SK, err)
	}
	kind, _ := IsKeyed(ref)
	return keyedFrom(out.Item, shard), KeyedRef{Pipeline: stringAttr(out.Item, attrPipeline), Key: stringAttr(out.Item, attrKey), Kind: kind}, nil
}

func (v *Views) loadKeyed(ctx context.Context, key map[string]types.AttributeValue, shard string) (KeyedState, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(v.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return KeyedState{}, fmt.Errorf("state: loading keyed state: %w", err)
	}
	return keyedFrom(out.Item, shard), nil
}

func keyedFrom(item map[string]types.AttributeValue, shard string) KeyedState {
	var ks KeyedState
	if b, ok := item[attrBlob].(*types.AttributeValueMemberB); ok {
		ks.Blob = b.Value
	}
	ks.Fence = stringAttr(item, fenceAttr(shard))
	ks.Version = intAttr(item, attrVersion)
	return ks
}

// ErrKeyedConflict means the keyed state changed since it was loaded (a
// concurrent duplicate or the ticker): load it again and redo.
var ErrKeyedConflict = errors.New("state: keyed state changed since it was loaded")

// SaveKeyed writes a keyed state item if it is still at version ks.Version,
// with fence (padded by Fence) and listed in the open-windows index under
// openIn until openUntil (zero: unlisted, nothing open).
func (v *Views) SaveKeyed(ctx context.Context, ref KeyedRef, shard string, ks KeyedState, fence string, openIn string, openUntil window.Window) (int, error) {
	upd := expression.Set(expression.Name(attrBlob), expression.Value(ks.Blob)).
		Set(expression.Name(attrPipeline), expression.Value(ref.Pipeline)).
		Set(expression.Name(attrKey), expression.Value(ref.Key)).
		Set(expression.Name(attrKind), expression.Value(ref.Kind)).
		Set(expression.Name(attrVersion), expression.Value(ks.Version+1)).
		Set(expression.Name(attrUpdatedAt), expression.Value(v.now().UTC().Format(TimeLayout)))
	if v.keyedExpiry > 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(v.now().Add(v.keyedExpiry).Unix()))
	}
	if fence != "" {
		f, err := Fence(fence)
		if err != nil {
			return 0, err
		}
		upd = upd.Set(expression.Name(fenceAttr(shard)), expression.Value(f))
	}
	if openIn != "" && !openUntil.End.IsZero() {
		upd = upd.Set(expression.Name(attrOpenIn), expression.Value(openIn)).
			Set(expression.Name(attrOpenUntil), expression.Value(openUntil.End.UTC().Format(TimeLayout)))
	} else {
		upd = upd.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil))
	}
	cond := expression.AttributeNotExists(expression.Name(attrVersion))
	if ks.Version > 0 {
		cond = expression.Equal(expression.Name(attrVersion), expression.Value(ks.Version))
	}
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return 0, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(v.table), Key: itemKey(PartitionKey(ref.Pipeline, ref.Key), ref.Kind+keyedSuffix),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return 1, ErrKeyedConflict
	}
	if err != nil {
		return 1, fmt.Errorf("state: saving keyed state %s/%s %s: %w", ref.Pipeline, ref.Key, ref.Kind, err)
	}
	return 1, nil
}

// PutWindow stores a computed window's value as a window item: final with
// its revision, or retracted (a session merged into a larger one). Writing
// the same revision again changes nothing a reader sees.
func (v *Views) PutWindow(ctx context.Context, ref KeyedRef, w window.Window, blob []byte, count uint64, revision int, retracted bool) error {
	status := statusFinal
	if retracted {
		status = statusRetracted
	}
	upd := expression.Set(expression.Name(attrPipeline), expression.Value(ref.Pipeline)).
		Set(expression.Name(attrKey), expression.Value(ref.Key)).
		Set(expression.Name(attrKind), expression.Value(ref.Kind)).
		Set(expression.Name(attrStart), expression.Value(w.Start.UTC().Format(TimeLayout))).
		Set(expression.Name(attrEnd), expression.Value(w.End.UTC().Format(TimeLayout))).
		Set(expression.Name(attrParts), expression.Value([]any{blob})).
		Set(expression.Name(attrNParts), expression.Value(1)).
		Set(expression.Name(attrCount), expression.Value(count)).
		Set(expression.Name(attrStatus), expression.Value(status)).
		Set(expression.Name(attrRevision), expression.Value(revision)).
		Set(expression.Name(attrUpdatedAt), expression.Value(v.now().UTC().Format(TimeLayout)))
	if v.retention > 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(w.End.Add(v.retention).Unix()))
	}
	ex, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(v.table), Key: itemKey(PartitionKey(ref.Pipeline, ref.Key), SortKey(ref.Kind, w)),
		UpdateExpression: ex.Update(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	if err != nil {
		return fmt.Errorf("state: writing window %s/%s %s: %w", ref.Pipeline, ref.Key, SortKey(ref.Kind, w), err)
	}
	return nil
}
