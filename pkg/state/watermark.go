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
	val := wm.Current().UTC().Format(TimeLayout)
	name := expression.Name(attrWMValue)
	ex, err := expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrWatermark), expression.Value(blob)).Set(name, expression.Value(val))).
		WithCondition(expression.AttributeNotExists(name).Or(expression.LessThanEqual(name, expression.Value(val)))).
		Build()
	if err != nil {
		return false, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(v.table), Key: itemKey(watermarkPK(pipeline), shard),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
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
	kc := expression.Key(attrPK).Equal(expression.Value(watermarkPK(pipeline)))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	out := map[string]*window.Watermark{}
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: aws.String(v.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
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
