package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/window"
)

const (
	attrWatermark = "wm"
	attrWMValue   = "wmValue"
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
	s, err := watermarkShape.get(0)
	if err != nil {
		return false, err
	}
	slots := [2]types.AttributeValue{avB(blob), avS(timeText(wm.Current()))}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(watermarkPK(pipeline), shard),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state: saving watermark of %s %s: %w", pipeline, shard, err)
	}
	return true, nil
}

// Watermarks loads every shard's watermark of pipeline.
func (v *Views) Watermarks(ctx context.Context, pipeline string) (map[string]*window.Watermark, error) {
	s, err := watermarksShape.get(0)
	if err != nil {
		return nil, err
	}
	slots := [1]types.AttributeValue{avS(watermarkPK(pipeline))}
	out := map[string]*window.Watermark{}
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: v.tableName, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: s.keyCondition, ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("state: watermarks of %s: %w", pipeline, err)
		}
		for _, it := range page.Items {
			b, ok := it[attrWatermark].(*types.AttributeValueMemberB)
			if !ok {
				continue
			}
			wm := &window.Watermark{}
			if err := wm.UnmarshalBinary(b.Value); err != nil {
				return nil, fmt.Errorf("state: watermark of %s %s: %w", pipeline, stringAttr(it, attrSK), err)
			}
			out[stringAttr(it, attrSK)] = wm
		}
	}
	return out, nil
}

// watermarkShape is SaveWatermark's write: the encoded watermark (slot 0)
// and its value (slot 1), unless a later value is stored.
var watermarkShape = shapeSet{build: func(uint) expression.Builder {
	name := expression.Name(attrWMValue)
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrWatermark), slot(0)).Set(name, slot(1))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThanEqual(name, slot(1))))
}}

// watermarksShape is Watermarks' key condition (slot 0: the partition).
var watermarksShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(slot(0)))
}}
