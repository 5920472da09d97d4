package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// ItemKey is the partition and sort key of the ref's item, for messages
// that send a person to it.
func (r KeyedRef) ItemKey() (pk, sk string) {
	return PartitionKey(r.Pipeline, r.Key), r.Kind + keyedSuffix
}

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
	// ListedIn and ListedUntil are the item's entry in the open-windows
	// index (openIn, openUntil); zero when it is not listed.
	ListedIn    string
	ListedUntil time.Time
}

// LoadKeyed reads a keyed state item (a strongly consistent read: the cold or
// conflict path).
func (v *Views) LoadKeyed(ctx context.Context, ref KeyedRef, shard string) (KeyedState, error) {
	return v.loadKeyed(ctx, itemKey(ref.ItemKey()), shard)
}

// LoadKeyedRef reads the keyed state item an open-windows ref points at.
func (v *Views) LoadKeyedRef(ctx context.Context, ref Ref, shard string) (KeyedState, KeyedRef, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: itemKey(ref.PK, ref.SK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return KeyedState{}, KeyedRef{}, fmt.Errorf("state: loading %s %s: %w", ref.PK, ref.SK, err)
	}
	kind, _ := IsKeyed(ref)
	return keyedFrom(out.Item, shard), KeyedRef{Pipeline: stringAttr(out.Item, attrPipeline), Key: stringAttr(out.Item, attrKey), Kind: kind}, nil
}

func (v *Views) loadKeyed(ctx context.Context, key map[string]types.AttributeValue, shard string) (KeyedState, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: key, ConsistentRead: aws.Bool(true)})
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
	if in, until := stringAttr(item, attrOpenIn), stringAttr(item, attrOpenUntil); in != "" && until != "" {
		if t, err := time.Parse(TimeLayout, until); err == nil {
			ks.ListedIn, ks.ListedUntil = in, t
		}
	}
	return ks
}

// ErrKeyedConflict means the keyed state changed since it was loaded (a
// concurrent duplicate or the ticker): load it again and redo.
var ErrKeyedConflict = errors.New("state: keyed state changed since it was loaded")

// SaveKeyed writes a keyed state item if it is still at version ks.Version,
// with fence (padded by Fence) and listed in the open-windows index under
// openIn until openUntil (zero: unlisted, nothing open).
func (v *Views) SaveKeyed(ctx context.Context, ref KeyedRef, shard string, ks KeyedState, fence string, openIn string, openUntil window.Window) (int, error) {
	var (
		slots   [keyedSlots]types.AttributeValue
		variant uint
	)
	slots[keyedSlotBlob] = avB(ks.Blob)
	slots[keyedSlotPipeline] = sharedS(ref.Pipeline)
	slots[keyedSlotKey] = sharedS(ref.Key)
	slots[keyedSlotKind] = sharedS(ref.Kind)
	slots[keyedSlotVersion] = avInt(int64(ks.Version + 1))
	slots[keyedSlotUpdatedAt] = timeAV(v.now())
	if v.keyedExpiry > 0 {
		variant |= keyedExpires
		slots[keyedSlotExpiresAt] = avInt(v.now().Add(v.keyedExpiry).Unix())
	}
	if fence != "" {
		f, err := Fence(fence)
		if err != nil {
			return 0, err
		}
		variant |= keyedFenced
		slots[keyedSlotFence] = avS(f)
	}
	if openIn != "" && !openUntil.End.IsZero() {
		variant |= keyedOpen
		slots[keyedSlotOpenIn] = sharedS(openIn)
		slots[keyedSlotOpenUntil] = timeAV(openUntil.End)
	}
	if ks.Version > 0 {
		variant |= keyedVersioned
		slots[keyedSlotVersionWas] = avInt(int64(ks.Version))
	}
	s, err := keyedShapes.get(variant)
	if err != nil {
		return 0, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(ref.ItemKey()),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.namesFor(shard), ExpressionAttributeValues: s.valuesFor(slots[:]),
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
// the same revision again changes nothing a reader sees; a lower revision
// than the item holds is not written (two finalizes at once, the slower
// one's final result after the other's retraction), and is no error.
func (v *Views) PutWindow(ctx context.Context, ref KeyedRef, w window.Window, blob []byte, count uint64, revision int, retracted bool) error {
	status := statusFinal
	if retracted {
		status = statusRetracted
	}
	var (
		slots   [putSlots]types.AttributeValue
		variant uint
	)
	slots[putSlotPipeline] = sharedS(ref.Pipeline)
	slots[putSlotKey] = sharedS(ref.Key)
	slots[putSlotKind] = sharedS(ref.Kind)
	slots[putSlotStart] = timeAV(w.Start)
	slots[putSlotEnd] = timeAV(w.End)
	slots[putSlotParts] = avList1(blob)
	slots[putSlotCount] = avUint(count)
	slots[putSlotStatus] = sharedS(status)
	slots[putSlotRevision] = avInt(int64(revision))
	slots[putSlotUpdatedAt] = timeAV(v.now())
	if v.retention > 0 {
		variant = 1
		slots[putSlotExpiresAt] = avInt(w.End.Add(v.retention).Unix())
	}
	s, err := putWindowShapes.get(variant)
	if err != nil {
		return err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: windowKey(ref.Pipeline, ref.Key, ref.Kind, w),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // a later revision is stored
	}
	if err != nil {
		return fmt.Errorf("state: writing window %s/%s %s: %w", ref.Pipeline, ref.Key, SortKey(ref.Kind, w), err)
	}
	return nil
}

// Slots and variant bits of SaveKeyed's shapes.
const (
	keyedSlotBlob = iota
	keyedSlotPipeline
	keyedSlotKey
	keyedSlotKind
	keyedSlotVersion
	keyedSlotUpdatedAt
	keyedSlotExpiresAt
	keyedSlotFence
	keyedSlotOpenIn
	keyedSlotOpenUntil
	keyedSlotVersionWas
	keyedSlots

	keyedExpires   = 1 // sets the TTL attribute (WithKeyedExpiry)
	keyedFenced    = 2 // moves the shard's fence
	keyedOpen      = 4 // lists the item in the open-windows index (else unlists it)
	keyedVersioned = 8 // the item exists, at the version in keyedSlotVersionWas
)

// keyedShapes are the forms of SaveKeyed's write.
var keyedShapes = shapeSet{build: func(variant uint) expression.Builder {
	upd := expression.Set(expression.Name(attrBlob), slot(keyedSlotBlob)).
		Set(expression.Name(attrPipeline), slot(keyedSlotPipeline)).
		Set(expression.Name(attrKey), slot(keyedSlotKey)).
		Set(expression.Name(attrKind), slot(keyedSlotKind)).
		Set(expression.Name(attrVersion), slot(keyedSlotVersion)).
		Set(expression.Name(attrUpdatedAt), slot(keyedSlotUpdatedAt))
	if variant&keyedExpires != 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), slot(keyedSlotExpiresAt))
	}
	if variant&keyedFenced != 0 {
		upd = upd.Set(fenceName, slot(keyedSlotFence))
	}
	if variant&keyedOpen != 0 {
		upd = upd.Set(expression.Name(attrOpenIn), slot(keyedSlotOpenIn)).
			Set(expression.Name(attrOpenUntil), slot(keyedSlotOpenUntil))
	} else {
		upd = upd.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil))
	}
	cond := expression.AttributeNotExists(expression.Name(attrVersion))
	if variant&keyedVersioned != 0 {
		cond = expression.Equal(expression.Name(attrVersion), slot(keyedSlotVersionWas))
	}
	return expression.NewBuilder().WithUpdate(upd).WithCondition(cond)
}}

// Slots of PutWindow's shapes (variant 1: with the TTL attribute).
const (
	putSlotPipeline = iota
	putSlotKey
	putSlotKind
	putSlotStart
	putSlotEnd
	putSlotParts
	putSlotCount
	putSlotStatus
	putSlotRevision
	putSlotUpdatedAt
	putSlotExpiresAt
	putSlots
)

// putWindowShapes are the forms of PutWindow's write.
var putWindowShapes = shapeSet{build: func(variant uint) expression.Builder {
	upd := expression.Set(expression.Name(attrPipeline), slot(putSlotPipeline)).
		Set(expression.Name(attrKey), slot(putSlotKey)).
		Set(expression.Name(attrKind), slot(putSlotKind)).
		Set(expression.Name(attrStart), slot(putSlotStart)).
		Set(expression.Name(attrEnd), slot(putSlotEnd)).
		Set(expression.Name(attrParts), slot(putSlotParts)).
		Set(expression.Name(attrNParts), expression.Value(1)).
		Set(expression.Name(attrCount), slot(putSlotCount)).
		Set(expression.Name(attrStatus), slot(putSlotStatus)).
		Set(expression.Name(attrRevision), slot(putSlotRevision)).
		Set(expression.Name(attrUpdatedAt), slot(putSlotUpdatedAt))
	if variant != 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), slot(putSlotExpiresAt))
	}
	rev := expression.Name(attrRevision)
	return expression.NewBuilder().WithUpdate(upd).
		WithCondition(expression.AttributeNotExists(rev).Or(expression.LessThanEqual(rev, slot(putSlotRevision))))
}}
