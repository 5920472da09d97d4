package state

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// Ref names one window item.
type Ref struct{ PK, SK string }

// OpenWindows lists the windows under openIn that end at or before until:
// the ones a watermark at until makes final.
func (v *Views) OpenWindows(ctx context.Context, openIn string, until time.Time) ([]Ref, error) {
	s, err := openWindowsShape.get(0)
	if err != nil {
		return nil, err
	}
	slots := [2]types.AttributeValue{avS(openIn), avS(timeText(until))}
	var refs []Ref
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: v.tableName, IndexName: aws.String(OpenIndex),
		KeyConditionExpression: s.keyCondition, ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
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

	// Ref names the item (zero for a view not read from an item).
	Ref Ref
	// Pending: the window is final and still listed in the open-windows
	// index, so its result (final, or a correction) is not known to be on
	// the output stream yet; whoever publishes it calls UnlistRevision.
	Pending bool
	// Previous is a pending correction's previous value, the one it
	// retracts (nil for a final result, and once published).
	Previous *agg.Result
	// Fresh: the window was created final and marked published, by a fresh
	// write or in a result page, and nothing changed it since: its
	// creator logged it, and sent it, unless it died first. A finalize
	// that meets it sends it again, under the same id, without a line.
	Fresh bool
}

// Finalize makes a window final and returns its view: one conditional
// UpdateItem (status final, revision 1), no read — the parts are merged from
// the item the write returns. The window stays listed in the open-windows
// index until UnlistRevision, so a caller that fails to emit the final
// result finds it again on retry. Finalizing a final window changes nothing
// and reports already=true (with the window as it is: Pending if its result,
// final or a pending correction, is still to be published), so the ticker
// and the handler may race.
//
// A window a carry's flush wrote open before storing its carry
// (Update.Spill) is made final only if no result page holds it: if one
// does (the flush died and the one sent again kept the window in the carry
// and closed it in a page), the item becomes the page's result, already
// published, and Finalize reports it already final.
func (v *Views) Finalize(ctx context.Context, ref Ref) (view View, already bool, err error) {
	return v.finalize(ctx, ref, 0)
}

func (v *Views) finalize(ctx context.Context, ref Ref, variant uint) (view View, already bool, err error) {
	s, err := finalizeShape.get(variant)
	if err != nil {
		return View{}, false, err
	}
	slots := [1]types.AttributeValue{timeAV(v.now())}
	out, err := v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return View{}, false, fmt.Errorf("state: finalize %s %s: %w", ref.PK, ref.SK, ErrNoWindow)
		}
		if variant == 0 && stringAttr(ccf.Item, attrStatus) == statusOpen {
			return v.finalizeSpilled(ctx, ref, ccf.Item)
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

// Unlist takes a final window off its listing (openIn), once its final
// result has been emitted.
func (v *Views) Unlist(ctx context.Context, ref Ref) error {
	_, err := v.UnlistOnce(ctx, ref)
	return err
}

// UnlistOnce is Unlist that reports whether this call took the window off
// the index (first) or found it off already: the ticker and the handler may
// both finalize and emit one window, or a retry emit it again, and exactly
// one of them is first — the one that logs the final result (package
// aggregate), so a log line is not repeated by the race. It unlists whatever
// revision the window is at; a publisher uses UnlistRevision.
func (v *Views) UnlistOnce(ctx context.Context, ref Ref) (first bool, err error) {
	return v.unlist(ctx, ref, 0)
}

// UnlistRevision marks a final window's result at revision published once
// it is on the output stream: one conditional UpdateItem takes the window
// off its listing, openIn (and drops a correction's previous value),
// only if the window is still listed at that revision. It reports whether
// this call did it (first): of the ticker, the handler and retries
// publishing one result, exactly one is first, the one that logs it. A
// publisher that finds the window at a later revision (a correction applied
// after another publisher unlisted this one) unlists nothing, so the newer
// result stays pending until it is published itself. The write leaves a
// number it drew in the item (attrUnlistedBy): when its answer is lost and
// the SDK sends it again, the second attempt meets the window unlisted by
// that number — also when a correction has listed it again at the next
// revision since — and the call is still first.
func (v *Views) UnlistRevision(ctx context.Context, ref Ref, revision int) (first bool, err error) {
	if revision < 1 {
		return false, fmt.Errorf("state: unlist %s %s: revision %d, want 1 or more", ref.PK, ref.SK, revision)
	}
	return v.unlist(ctx, ref, revision)
}

// unlist is UnlistOnce (revision 0: any) and UnlistRevision.
func (v *Views) unlist(ctx context.Context, ref Ref, revision int) (first bool, err error) {
	var (
		variant uint
		slots   [2]types.AttributeValue
	)
	by := drawMark()
	slots[1] = avInt(by)
	if revision > 0 {
		variant, slots[0] = 1, avInt(int64(revision))
	}
	s, err := unlistShapes.get(variant)
	if err != nil {
		return false, err
	}
	_, err = v.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: v.tableName, Key: itemKey(ref.PK, ref.SK),
		UpdateExpression: s.update, ConditionExpression: s.condition,
		ExpressionAttributeNames: s.names, ExpressionAttributeValues: s.valuesFor(slots[:]),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && stringAttr(ccf.Item, attrStatus) == statusFinal {
		// This call's own write, sent again by the SDK (its number: it
		// applied, at its revision, whatever a correction did since), or
		// another's before it (or, by revision, a later one).
		return markedBy(ccf.Item, attrUnlistedBy, by), nil
	}
	if err != nil {
		return false, fmt.Errorf("state: unlist %s %s: %w", ref.PK, ref.SK, err)
	}
	return true, nil
}

// MaxQueryWindows is the most windows Query returns: a range holding more
// is an error (ErrTooManyWindows) rather than a read of all of it. A year of
// one-minute windows is half a million items; whoever shows a person part of
// such a range reads it with QueryBounded.
const MaxQueryWindows = 10000

// ErrTooManyWindows means a range holds more windows than Query returns
// (MaxQueryWindows): narrow it, or read part of it with QueryBounded.
var ErrTooManyWindows = errors.New("state: more windows in the range than a query returns")

// Bound is how much of a range QueryBounded reads.
type Bound struct {
	// Limit is the most windows returned; 0 returns none and only says
	// whether the range holds any.
	Limit int
	// Latest takes the range's last Limit windows instead of its first
	// (they are returned in start order all the same).
	Latest bool
}

// maxBoundLimit keeps Limit+1 a DynamoDB Query Limit (int32).
const maxBoundLimit = math.MaxInt32 - 1

// Query returns key's windows of one kind that start in [from, to), merged,
// in start order (then end): all of them, or, when the range holds more
// than MaxQueryWindows, an error wrapping ErrTooManyWindows, having read no
// more than MaxQueryWindows+1 items.
func (v *Views) Query(ctx context.Context, pipeline, key, kind string, from, to time.Time) ([]View, error) {
	views, more, err := v.QueryBounded(ctx, pipeline, key, kind, from, to, Bound{Limit: MaxQueryWindows})
	if err != nil {
		return nil, err
	}
	if more {
		return nil, fmt.Errorf("state: query %s/%s %s from %s to %s: %w (%d)", pipeline, key, kind,
			from.UTC().Format(TimeLayout), to.UTC().Format(TimeLayout), ErrTooManyWindows, MaxQueryWindows)
	}
	return views, nil
}

// QueryBounded returns at most b.Limit of key's windows of one kind that
// start in [from, to), merged, in start order (then end): the range's first
// ones, or its last with b.Latest; more says whether the range holds others.
// It reads b.Limit+1 window items and stops (a Query Limit per page, and no
// page after the one that fills it), besides the items it skips: retracted
// sessions, which are no result.
func (v *Views) QueryBounded(ctx context.Context, pipeline, key, kind string, from, to time.Time, b Bound) (views []View, more bool, err error) {
	if b.Limit < 0 || b.Limit > maxBoundLimit {
		return nil, false, fmt.Errorf("state: query %s/%s: limit %d, want 0 to %d", pipeline, key, b.Limit, maxBoundLimit)
	}
	lo := kind + "|" + from.UTC().Format(TimeLayout)
	hi := kind + "|" + to.UTC().Format(TimeLayout)
	kc := expression.Key(attrPK).Equal(expression.Value(PartitionKey(pipeline, key))).
		And(expression.Key(attrSK).Between(expression.Value(lo), expression.Value(hi)))
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, false, err
	}
	in := &dynamodb.QueryInput{
		TableName: v.tableName, ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(!b.Latest),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	want := b.Limit + 1 // the one past the limit says there are more
	for len(views) < want {
		// Each page asks for what is still wanted: items skipped below
		// are made up for by the next page, not read ahead.
		in.Limit = aws.Int32(int32(want - len(views)))
		page, err := v.db.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("state: query %s/%s: %w", pipeline, key, err)
		}
		for _, it := range page.Items {
			if len(views) == want {
				break
			}
			if stringAttr(it, attrSK) >= hi || stringAttr(it, attrStatus) == statusRetracted {
				continue // Between is inclusive, [from, to) is not; a retracted session is no result
			}
			view, err := v.view(it)
			if err != nil {
				return nil, false, fmt.Errorf("state: query %s/%s: %w", pipeline, key, err)
			}
			views = append(views, view)
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if views, more, err = v.withPages(ctx, views, pipeline, key, kind, from, to, b); err != nil {
		return nil, false, err
	}
	if b.Latest {
		slices.Reverse(views)
	}
	return views, more, nil
}

// queryItems calls each with every item of the table kc selects, read
// consistently, page by page; it stops at each's first error.
func (v *Views) queryItems(ctx context.Context, kc expression.KeyConditionBuilder, each func(map[string]types.AttributeValue) error) error {
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return err
	}
	p := dynamodb.NewQueryPaginator(v.db, &dynamodb.QueryInput{
		TableName: v.tableName, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if err := each(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// itemTime reads a window item's time attribute (windowStart, windowEnd);
// an error names the item and quotes what it holds, bounded.
func itemTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	s := stringAttr(item, name)
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("state: item %s: %s %s is not a time as %s", itemName(item), name, strictjson.QuoteCut(s, 64), TimeLayout)
	}
	return t, nil
}

// view reads a window item; an error names the item (itemName).
func (v *Views) view(item map[string]types.AttributeValue) (View, error) {
	merged, err := v.merged(item)
	if err != nil {
		return View{}, err
	}
	start, err := itemTime(item, attrStart)
	if err != nil {
		return View{}, err
	}
	end, err := itemTime(item, attrEnd)
	if err != nil {
		return View{}, err
	}
	final := stringAttr(item, attrStatus) == statusFinal
	view := View{
		Pipeline:  stringAttr(item, attrPipeline),
		Key:       stringAttr(item, attrKey),
		Kind:      stringAttr(item, attrKind),
		Window:    window.Window{Start: start, End: end},
		Final:     final,
		Revision:  intAttr(item, attrRevision),
		Result:    merged.Result(),
		UpdatedAt: stringAttr(item, attrUpdatedAt),
		Ref:       Ref{PK: stringAttr(item, attrPK), SK: stringAttr(item, attrSK)},
		Pending:   final && stringAttr(item, attrOpenIn) != "",
	}
	if _, fresh := item[attrFresh]; fresh && final && !view.Pending {
		view.Fresh = true
	}
	if b, ok := item[attrPrevious].(*types.AttributeValueMemberB); ok {
		prev, err := v.spec.Decode(b.Value)
		if err != nil {
			return View{}, fmt.Errorf("state: item %s: previous: %w", itemName(item), err)
		}
		r := prev.Result()
		view.Previous = &r
	}
	return view, nil
}

// unpublished returns the result of the final window item describes if it
// is not yet known to be on the output stream (listed), else nil.
func (v *Views) unpublished(item map[string]types.AttributeValue) (*View, error) {
	if stringAttr(item, attrStatus) != statusFinal || stringAttr(item, attrOpenIn) == "" {
		return nil, nil
	}
	view, err := v.view(item)
	if err != nil {
		return nil, err
	}
	return &view, nil
}

// openWindowsShape is OpenWindows' key condition: the partition (slot 0),
// windows ending by the watermark (slot 1).
var openWindowsShape = shapeSet{build: func(uint) expression.Builder {
	return expression.NewBuilder().WithKeyCondition(expression.Key(attrOpenIn).Equal(slot(0)).
		And(expression.Key(attrOpenUntil).LessThanEqual(slot(1))))
}}

// finalizeShape is Finalize's write (slot 0: finalAt): of an open window
// not marked spilled (variant 0), or of any open window (finalizeAnyOpen).
var finalizeShape = shapeSet{build: func(variant uint) expression.Builder {
	cond := expression.Equal(expression.Name(attrStatus), expression.Value(statusOpen))
	if variant == 0 {
		cond = cond.And(expression.AttributeNotExists(expression.Name(attrSpill)))
	}
	return expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrStatus), expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(1)).
			Set(expression.Name(attrFinalAt), slot(0)).
			Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(cond)
}}

// finalizeAnyOpen is finalizeShape's variant for a window marked spilled.
const finalizeAnyOpen = 1

// unlistShapes are unlist's write: at any revision (variant 0) or at the
// one in slot 0 (variant 1), leaving the number in slot 1.
var unlistShapes = shapeSet{build: func(variant uint) expression.Builder {
	cond := expression.Equal(expression.Name(attrStatus), expression.Value(statusFinal)).
		And(expression.AttributeExists(expression.Name(attrOpenIn)))
	if variant != 0 {
		cond = cond.And(expression.Equal(expression.Name(attrRevision), slot(0)))
	}
	return expression.NewBuilder().
		WithUpdate(expression.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil)).
			Remove(expression.Name(attrPrevious)).Set(expression.Name(attrUnlistedBy), slot(1))).
		WithCondition(cond)
}}
