package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Ref names one window item.
type Ref struct{ PK, SK string }

// OpenWindows lists the windows under openIn that end at or before until:
// the ones a watermark at until makes final.
func (v *Views) OpenWindows(ctx context.Context, openIn string, until time.Time) ([]Ref, error) {
	kc := expression.Key(attrOpenIn).Equal(expression.Value(openIn)).
		And(expression.Key(attrOpenUntil).LessThanEqual(expression.Value(until.UTC().Format(TimeLayout))))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	var refs []Ref
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: aws.String(v.table), IndexName: aws.String(OpenIndex),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("state: open windows of %s: %w", openIn, err)
		}
		for _, it := range page.Items {
			refs = append(refs, Ref{PK: stringAttr(it, attrPK), SK: stringAttr(it, attrSK)})
		}
	}
	return refs, nil
}

// View is a window result as stored.
type View struct {
	Pipeline, Key, Kind string
	Window              window.Window
	Final               bool
	Revision            int
	Result              agg.Result
	UpdatedAt           string
}

// Finalize makes a window final and returns its view: one conditional
// UpdateItem (status final, revision 1), no read — the parts are merged from
// the item the write returns. The window stays listed in the open-windows
// index until Unlist, so a caller that fails to emit the final result finds
// it again on retry. Finalizing a final window changes nothing and reports
// already=true (with the window as it is), so the ticker and the handler may
// race.
func (v *Views) Finalize(ctx context.Context, ref Ref) (view View, already bool, err error) {
	ex, err := expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrStatus), expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(1)).
			Set(expression.Name(attrFinalAt), expression.Value(v.now().UTC().Format(TimeLayout))).
			Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(expression.Equal(expression.Name(attrStatus), expression.Value(statusOpen))).
		Build()
	if err != nil {
		return View{}, false, err
	}
	out, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(v.table), Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return View{}, false, fmt.Errorf("state: finalize %s %s: no such window", ref.PK, ref.SK)
		}
		view, err := v.view(ccf.Item)
		return view, true, err
	}
	if err != nil {
		return View{}, false, fmt.Errorf("state: finalize %s %s: %w", ref.PK, ref.SK, err)
	}
	view, err = v.view(out.Attributes)
	return view, false, err
}

// Unlist takes a final window off the open-windows index, once its final
// result has been emitted.
func (v *Views) Unlist(ctx context.Context, ref Ref) error {
	_, err := v.UnlistOnce(ctx, ref)
	return err
}

// UnlistOnce is Unlist that reports whether this call took the window off
// the index (first) or found it off already: the ticker and the handler may
// both finalize and emit one window, or a retry emit it again, and exactly
// one of them is first — the one that logs the final result (package
// aggregate), so a log line is not repeated by the race.
func (v *Views) UnlistOnce(ctx context.Context, ref Ref) (first bool, err error) {
	ex, err := expression.NewBuilder().
		WithUpdate(expression.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil))).
		WithCondition(expression.Equal(expression.Name(attrStatus), expression.Value(statusFinal)).
			And(expression.AttributeExists(expression.Name(attrOpenIn)))).
		Build()
	if err != nil {
		return false, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(v.table), Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && stringAttr(ccf.Item, attrStatus) == statusFinal {
		return false, nil // unlisted before
	}
	if err != nil {
		return false, fmt.Errorf("state: unlist %s %s: %w", ref.PK, ref.SK, err)
	}
	return true, nil
}

// Query returns key's windows of one kind that start in [from, to), merged.
func (v *Views) Query(ctx context.Context, pipeline, key, kind string, from, to time.Time) ([]View, error) {
	lo := kind + "|" + from.UTC().Format(TimeLayout)
	hi := kind + "|" + to.UTC().Format(TimeLayout)
	kc := expression.Key(attrPK).Equal(expression.Value(PartitionKey(pipeline, key))).
		And(expression.Key(attrSK).Between(expression.Value(lo), expression.Value(hi)))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	var views []View
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: aws.String(v.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("state: query %s/%s: %w", pipeline, key, err)
		}
		for _, it := range page.Items {
			if stringAttr(it, attrSK) >= hi || stringAttr(it, attrStatus) == statusRetracted {
				continue // Between is inclusive, [from, to) is not; a retracted session is no result
			}
			view, err := v.view(it)
			if err != nil {
				return nil, err
			}
			views = append(views, view)
		}
	}
	return views, nil
}

func (v *Views) view(item map[string]types.AttributeValue) (View, error) {
	merged, err := v.merged(item)
	if err != nil {
		return View{}, err
	}
	start, err := time.Parse(TimeLayout, stringAttr(item, attrStart))
	if err != nil {
		return View{}, fmt.Errorf("state: item %s %s: windowStart: %w", stringAttr(item, attrPK), stringAttr(item, attrSK), err)
	}
	end, err := time.Parse(TimeLayout, stringAttr(item, attrEnd))
	if err != nil {
		return View{}, fmt.Errorf("state: item %s %s: windowEnd: %w", stringAttr(item, attrPK), stringAttr(item, attrSK), err)
	}
	return View{
		Pipeline:  stringAttr(item, attrPipeline),
		Key:       stringAttr(item, attrKey),
		Kind:      stringAttr(item, attrKind),
		Window:    window.Window{Start: start, End: end},
		Final:     stringAttr(item, attrStatus) == statusFinal,
		Revision:  intAttr(item, attrRevision),
		Result:    merged.Result(),
		UpdatedAt: stringAttr(item, attrUpdatedAt),
	}, nil
}
