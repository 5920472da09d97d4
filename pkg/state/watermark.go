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

const (
	attrWatermark = "wm"
	attrWMValue   = "wmValue"
	// attrCounted is the fence of the last record of the last interval
	// whose flush counted records it made no write for (FirstToCount).
	attrCounted = "counted"
	// attrThrough is the fence of the last record of the shard whose
	// effects the function committed with the watermark (CommitWatermark):
	// records after it are still to be processed, so the ticker does not
	// take the shard for idle while the stream holds one (Shards).
	attrThrough = "through"
)

func watermarkPK(pipeline string) string { return "watermark#" + pipeline }

// SaveWatermark stores shard's watermark for pipeline unless a later one is
// stored already (watermarks never go back, also under duplicate invocations).
// It reports whether it stored it.
func (v *Views) SaveWatermark(ctx context.Context, pipeline, shard string, wm *window.Watermark) (bool, error) {
	blob, err := wm.MarshalBinary()
	if err != nil {
		return false, err
	}
	slots := [2]types.AttributeValue{avB(blob), avS(timeText(wm.Current()))}
	stored, err := v.updateShardItem(ctx, pipeline, shard, &watermarkShape, slots[:])
	if err != nil {
		return false, fmt.Errorf("state: saving watermark of %s %s: %w", pipeline, shard, err)
	}
	return stored, nil
}

// AdvanceWatermark stores shard's watermark for pipeline, as SaveWatermark
// does, and when a later one is stored already (the ticker's idle advance,
// a duplicate invocation) merges that one into wm, so that wm is the
// shard's watermark as stored. The stored one comes back with the refused
// write itself: no read of the shard items.
func (v *Views) AdvanceWatermark(ctx context.Context, pipeline, shard string, wm *window.Watermark) error {
	blob, err := wm.MarshalBinary()
	if err != nil {
		return err
	}
	slots := [2]types.AttributeValue{avB(blob), avS(timeText(wm.Current()))}
	s, err := watermarkShape.get(0)
	if err != nil {
		return err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		b, ok := ccf.Item[attrWatermark].(*types.AttributeValueMemberB)
		if !ok {
			return fmt.Errorf("state: saving watermark of %s %s: refused, and the stored item has no watermark", pipeline, shard)
		}
		stored := &window.Watermark{}
		if err := stored.UnmarshalBinary(b.Value); err != nil {
			return fmt.Errorf("state: watermark of %s %s: %w", pipeline, shard, err)
		}
		wm.Merge(stored)
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: saving watermark of %s %s: %w", pipeline, shard, err)
	}
	return nil
}

// CommitWatermark is AdvanceWatermark for a function that has processed
// shard's records through the record at seq: it stores seq with the
// watermark in the same write, so the ticker can tell a shard with nothing
// left to read (idle) from one whose records wait for a function that is
// failing or throttled (Shards). Neither moves back: when a later
// watermark or a later seq is stored already, each is stored on its own,
// only if it is the later one (two writes, on that rare path only).
func (v *Views) CommitWatermark(ctx context.Context, pipeline, shard string, wm *window.Watermark, seq string) error {
	if seq == "" {
		return v.AdvanceWatermark(ctx, pipeline, shard, wm)
	}
	f, err := Fence(seq)
	if err != nil {
		return fmt.Errorf("state: saving watermark of %s %s: %w", pipeline, shard, err)
	}
	blob, err := wm.MarshalBinary()
	if err != nil {
		return err
	}
	slots := [3]types.AttributeValue{avB(blob), avS(timeText(wm.Current())), avS(f)}
	stored, err := v.updateShardItem(ctx, pipeline, shard, &committedShape, slots[:])
	if err != nil {
		return fmt.Errorf("state: saving watermark of %s %s: %w", pipeline, shard, err)
	}
	if stored {
		return nil
	}
	if err := v.AdvanceWatermark(ctx, pipeline, shard, wm); err != nil {
		return err
	}
	// Not applied: a later record is stored (a duplicate invocation of an
	// earlier batch ran last).
	if _, err := v.updateShardItem(ctx, pipeline, shard, &throughShape, slots[2:]); err != nil {
		return fmt.Errorf("state: saving the position of %s %s: %w", pipeline, shard, err)
	}
	return nil
}

// CommitPosition stores seq as the last record a function processed on
// shard, unless a later one is stored, and leaves the stored watermark as
// it is: for a batch whose records moved no event time (a type its
// function skips). Storing the batch's copy of the watermark with it, as
// CommitWatermark does, erased the ticker's idle clock, and the shard
// never advanced as idle while such records kept coming. The stored
// watermark comes back with the write (applied or not) and is merged into
// wm, as AdvanceWatermark merges a later one.
func (v *Views) CommitPosition(ctx context.Context, pipeline, shard, seq string, wm *window.Watermark) error {
	f, err := Fence(seq)
	if err != nil {
		return fmt.Errorf("state: saving the position of %s %s: %w", pipeline, shard, err)
	}
	s, err := throughShape.get(0)
	if err != nil {
		return err
	}
	out, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor([]types.AttributeValue{avS(f)}),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	item := map[string]types.AttributeValue(nil)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		item = ccf.Item // a later position is stored: a duplicate of an earlier batch ran last
	case err != nil:
		return fmt.Errorf("state: saving the position of %s %s: %w", pipeline, shard, err)
	default:
		item = out.Attributes
	}
	if b, ok := item[attrWatermark].(*types.AttributeValueMemberB); ok {
		stored := &window.Watermark{}
		if err := stored.UnmarshalBinary(b.Value); err != nil {
			return fmt.Errorf("state: watermark of %s %s: %w", pipeline, shard, err)
		}
		wm.Merge(stored)
	}
	return nil
}

// updateShardItem makes one conditional write of shape to pipeline's item
// of shard; applied is false when its condition did not hold.
func (v *Views) updateShardItem(ctx context.Context, pipeline, shard string, shape *shapeSet, slots []types.AttributeValue) (applied bool, err error) {
	s, err := shape.get(0)
	if err != nil {
		return false, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return err == nil, err
}

// FirstToCount reports whether this call is the first to count the records
// of shard's interval that ends with the record at lastSeq: a conditional
// write of the shard's item, which takes the first call and refuses its
// repeats (a final invocation Lambda sends again). A flush that makes no
// window write counts the records it dropped this way; one that writes
// knows a repeat by its writes, which find the records applied.
func (v *Views) FirstToCount(ctx context.Context, pipeline, shard, lastSeq string) (bool, error) {
	f, err := Fence(lastSeq)
	if err != nil {
		return false, err
	}
	slots := [1]types.AttributeValue{avS(f)}
	first, err := v.updateShardItem(ctx, pipeline, shard, &countedShape, slots[:])
	if err != nil {
		return false, fmt.Errorf("state: marking the records of %s %s up to %s counted: %w", pipeline, shard, lastSeq, err)
	}
	return first, nil
}

// countedShape is FirstToCount's write: the fence (slot 0), if no later or
// equal one is stored.
var countedShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrCounted)
	return expression.NewBuilder().
		WithUpdate(expression.Set(name, slot(0))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThan(name, slot(0))))
}}

// Watermarks loads every shard's watermark of pipeline.
func (v *Views) Watermarks(ctx context.Context, pipeline string) (map[string]*window.Watermark, error) {
	sh, err := v.Shards(ctx, pipeline, time.Time{})
	return sh.Watermarks, err
}

// Watermark is shard's stored watermark for pipeline (nil: none stored),
// read consistently: the ticker's idle advance is stored, never told to the
// functions that keep a copy.
func (v *Views) Watermark(ctx context.Context, pipeline, shard string) (*window.Watermark, error) {
	out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("#w"), ExpressionAttributeNames: map[string]string{"#w": attrWatermark}})
	if err != nil {
		return nil, fmt.Errorf("state: reading the watermark of %s %s: %w", pipeline, shard, err)
	}
	b, ok := out.Item[attrWatermark].(*types.AttributeValueMemberB)
	if !ok {
		return nil, nil
	}
	wm := &window.Watermark{}
	if err := wm.UnmarshalBinary(b.Value); err != nil {
		return nil, fmt.Errorf("state: watermark of %s %s: %w", pipeline, shard, err)
	}
	return wm, nil
}

// Shards is what pipeline's shard items hold, read at once (a ticker needs
// all of it each tick).
type Shards struct {
	// Watermarks: each shard's watermark (a shard with only a hold has
	// none).
	Watermarks map[string]*window.Watermark
	// Holds: the holds (Hold) that have not expired at the time asked.
	Holds map[string]time.Time
	// Positions: the sequence number of the last record the function
	// processed on each shard whose function committed one
	// (CommitWatermark).
	Positions map[string]string
}

// Shards loads pipeline's shard items: watermarks, the holds not expired
// at now, and positions, in one strongly consistent read.
func (v *Views) Shards(ctx context.Context, pipeline string, now time.Time) (Shards, error) {
	out := Shards{Watermarks: map[string]*window.Watermark{}, Holds: map[string]time.Time{}, Positions: map[string]string{}}
	err := v.eachShardItem(ctx, pipeline, "shard items", func(shard string, it map[string]types.AttributeValue) error {
		if b, ok := it[attrWatermark].(*types.AttributeValueMemberB); ok {
			wm := &window.Watermark{}
			if err := wm.UnmarshalBinary(b.Value); err != nil {
				return fmt.Errorf("state: watermark of %s %s: %w", pipeline, shard, err)
			}
			out.Watermarks[shard] = wm
		}
		at, err1 := time.Parse(TimeLayout, stringAttr(it, attrHold))
		expires, err2 := time.Parse(TimeLayout, stringAttr(it, attrHoldExpires))
		if err1 == nil && err2 == nil && now.Before(expires) {
			out.Holds[shard] = at
		}
		if f := stringAttr(it, attrThrough); f != "" {
			seq := strings.TrimLeft(f, "0")
			if seq == "" {
				seq = "0"
			}
			out.Positions[shard] = seq
		}
		return nil
	})
	return out, err
}

// eachShardItem calls fn with each of pipeline's per-shard items (the
// watermark and the hold), read strongly consistent; what names the read
// in errors.
func (v *Views) eachShardItem(ctx context.Context, pipeline, what string, fn func(shard string, item map[string]types.AttributeValue) error) error {
	s, err := watermarksShape.get(0)
	if err != nil {
		return err
	}
	slots := [1]types.AttributeValue{avS(watermarkPK(pipeline))}
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: v.tableName, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: s.keyCondition, ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("state: %s of %s: %w", what, pipeline, err)
		}
		for _, it := range page.Items {
			if err := fn(stringAttr(it, attrSK), it); err != nil {
				return err
			}
		}
	}
	return nil
}

// watermarkShape is SaveWatermark's write: the encoded watermark (slot 0)
// and its value (slot 1), unless a later value is stored.
var watermarkShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrWMValue)
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrWatermark), slot(0)).Set(name, slot(1))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThanEqual(name, slot(1))))
}}

// committedShape is CommitWatermark's write: the watermark (slots 0 and 1,
// as watermarkShape) and the position (slot 2), unless a later watermark
// or a later position is stored.
var committedShape = shapeSet{build: func(uint) expression.Builder {
	name, through := expression.Name(attrWMValue), expression.Name(attrThrough)
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrWatermark), slot(0)).Set(name, slot(1)).Set(through, slot(2))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThanEqual(name, slot(1))).
			And(expression.AttributeNotExists(through).Or(expression.LessThanEqual(through, slot(2)))))
}}

// throughShape is CommitWatermark's write of the position alone (slot 0),
// unless a later one is stored.
var throughShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrThrough)
	return expression.NewBuilder().
		WithUpdate(expression.Set(name, slot(0))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThan(name, slot(0))))
}}

// watermarksShape is Watermarks' key condition (slot 0: the partition).
var watermarksShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(slot(0)))
}}

// A shard's hold lives on its watermark item: the earliest window start of
// records a per-interval invocation has read and carries in Lambda's
// tumbling window state, not yet written (attrHold), and when the hold
// stops counting (attrHoldExpires, processing time): a flush that never
// comes (a mapping disabled mid-interval) cannot keep the shard's windows
// open for ever.
const (
	attrHold        = "hold"
	attrHoldExpires = "holdExpires"
)

// Hold keeps shard's idle watermark at or below at until ClearHold or until
// expires, whichever is first; a hold already stored at an earlier time
// stays (holds only move back until cleared) unless it has expired.
func (v *Views) Hold(ctx context.Context, pipeline, shard string, at, expires time.Time) error {
	slots := [3]types.AttributeValue{timeAV(at), timeAV(expires), timeAV(v.now())}
	// Not applied: an earlier hold is stored, and it covers this one.
	if _, err := v.updateShardItem(ctx, pipeline, shard, &holdShape, slots[:]); err != nil {
		return fmt.Errorf("state: holding the watermark of %s %s at %s: %w", pipeline, shard, timeText(at), err)
	}
	return nil
}

// ClearHold removes shard's hold if it is still at (a later interval's
// hold, stored since, stays).
func (v *Views) ClearHold(ctx context.Context, pipeline, shard string, at time.Time) error {
	slots := [1]types.AttributeValue{timeAV(at)}
	// Not applied: a later interval's hold is stored.
	if _, err := v.updateShardItem(ctx, pipeline, shard, &clearHoldShape, slots[:]); err != nil {
		return fmt.Errorf("state: clearing the watermark hold of %s %s: %w", pipeline, shard, err)
	}
	return nil
}

// holdShape is Hold's write: the hold (slot 0) and its expiry (slot 1),
// unless an earlier hold is stored that has not expired at slot 2 (now).
var holdShape = shapeSet{build: func(uint) expression.Builder {
	name, expires := expression.Name(attrHold), expression.Name(attrHoldExpires)
	return expression.NewBuilder().
		WithUpdate(expression.Set(name, slot(0)).Set(expires, slot(1))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.GreaterThan(name, slot(0))).Or(expression.LessThanEqual(expires, slot(2))))
}}

// clearHoldShape is ClearHold's write: remove the hold if it is slot 0.
var clearHoldShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrHold)
	return expression.NewBuilder().
		WithUpdate(expression.Remove(name).Remove(expression.Name(attrHoldExpires))).
		WithCondition(expression.Equal(name, slot(0)))
}}
