package state_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/limits"
	"github.com/tributary-dev/tributary/pkg/state"
)

// finalized applies records 1..4 to the minute, finalizes it and, if
// publish, marks the final result published.
func finalized(t *testing.T, f *fixture, publish bool) state.Ref {
	t.Helper()
	ctx := context.Background()
	if _, err := f.views.Apply(ctx, "shard-0", update(entries(1, 4))); err != nil {
		t.Fatal(err)
	}
	refs := dueAt(t, f, minute.End)
	if len(refs) != 1 {
		t.Fatalf("listed windows %v, want 1", refs)
	}
	view, _, err := f.views.Finalize(ctx, refs[0])
	if err != nil || !view.Pending || view.Ref != refs[0] {
		t.Fatalf("Finalize: %+v %v, want a pending final result naming its item", view, err)
	}
	if publish {
		if first, err := f.views.UnlistRevision(ctx, refs[0], 1); err != nil || !first {
			t.Fatalf("UnlistRevision(1): first=%v %v", first, err)
		}
	}
	return refs[0]
}

// listed is 1 when the window item is listed (openIn): not final yet, or
// its result, final or a correction, not published; else 0.
func listed(t *testing.T, f *fixture) int {
	t.Helper()
	got, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: state.PartitionKey("p", "k")},
			"sk": &types.AttributeValueMemberS{Value: state.SortKey("tumbling:1m0s", minute)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Item["openIn"]; ok {
		return 1
	}
	return 0
}

// A correction is stored with its output: the write that applies it lists
// the window and keeps the value it retracts, so whoever finds it — the
// batch that made it, a redelivery of that batch, Finalize from the ticker
// — gets the same output (revision, value, previous value) until it is
// marked published at that revision.
func TestCorrectionPendingUntilPublished(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	ref := finalized(t, f, true)
	if n := listed(t, f); n != 0 {
		t.Fatalf("a published final window is listed (%d)", n)
	}
	u := update(entries(6, 7))
	u.CorrectIfFinal = true
	res, err := f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Corrected || res.Publish == nil {
		t.Fatalf("correction: %+v %v, want Corrected with a result to publish", res, err)
	}
	made := *res.Publish
	if !made.Pending || made.Revision != 2 || made.Result.Count != 6 || made.Previous == nil || made.Previous.Count != 4 || made.Ref != ref {
		t.Fatalf("correction to publish %+v, want revision 2, count 6 retracting count 4, pending, naming %v", made, ref)
	}
	if res.Previous.Count != 4 || res.Current.Count != 6 || res.Revision != 2 {
		t.Fatalf("correction result %+v: previous %+v current %+v", res, res.Previous, res.Current)
	}
	if n := listed(t, f); n != 1 {
		t.Fatalf("a pending correction is not listed for the ticker (%d)", n)
	}

	// A redelivery finds it applied and pending: the same output.
	res, err = f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Duplicate || res.Publish == nil || !reflect.DeepEqual(*res.Publish, made) {
		t.Fatalf("redelivered correction: %+v %v, want Duplicate handing back %+v", res, err, made)
	}
	// So does the ticker's Finalize.
	view, already, err := f.views.Finalize(ctx, ref)
	if err != nil || !already || !reflect.DeepEqual(view, made) {
		t.Fatalf("Finalize of a pending correction: %+v already=%v %v, want %+v", view, already, err, made)
	}

	// Marking an older revision published changes nothing.
	if first, err := f.views.UnlistRevision(ctx, ref, 1); err != nil || first {
		t.Fatalf("UnlistRevision(1) at revision 2: first=%v %v, want false", first, err)
	}
	if n := listed(t, f); n != 1 {
		t.Fatal("UnlistRevision of an older revision unlisted the pending correction")
	}
	if first, err := f.views.UnlistRevision(ctx, ref, 2); err != nil || !first {
		t.Fatalf("UnlistRevision(2): first=%v %v, want true", first, err)
	}
	if first, err := f.views.UnlistRevision(ctx, ref, 2); err != nil || first {
		t.Fatalf("UnlistRevision(2) again: first=%v %v, want false", first, err)
	}
	v := read(t, f)
	if v.Pending || v.Previous != nil || v.Revision != 2 || v.Result.Count != 6 {
		t.Fatalf("published correction reads %+v, want revision 2, count 6, nothing pending", v)
	}
	res, err = f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Duplicate || res.Publish != nil {
		t.Fatalf("redelivery after publication: %+v %v, want Duplicate with nothing to publish", res, err)
	}
}

// One revision at a time: a correction that meets the window's final result
// unpublished hands it back (ErrUnpublished) and changes nothing; once it
// is published the correction applies, retracting that result. A record
// dropped as late (drop policy) hands back the unpublished result too.
func TestCorrectionWaitsForPublishedResult(t *testing.T) {
	f := newViews(t)
	ctx := context.Background()
	ref := finalized(t, f, false)

	drop := update(entries(5, 5))
	res, err := f.views.Apply(ctx, "shard-0", drop)
	if err != nil || res.Outcome != state.LateDropped || res.Publish == nil || res.Publish.Revision != 1 {
		t.Fatalf("late under drop: %+v %v, want LateDropped handing back revision 1", res, err)
	}

	u := update(entries(6, 7))
	u.CorrectIfFinal = true
	res, err = f.views.Apply(ctx, "shard-0", u)
	if !errors.Is(err, state.ErrUnpublished) || res.Publish == nil {
		t.Fatalf("correction over an unpublished result: %+v %v, want ErrUnpublished", res, err)
	}
	if p := res.Publish; p.Revision != 1 || p.Previous != nil || p.Result.Count != 4 || !p.Pending {
		t.Fatalf("handed back %+v, want the final result at revision 1, count 4", p)
	}
	if v := read(t, f); v.Revision != 1 || v.Result.Count != 4 {
		t.Fatalf("the refused correction changed the window: %+v", v)
	}
	if first, err := f.views.UnlistRevision(ctx, ref, 1); err != nil || !first {
		t.Fatalf("UnlistRevision(1): first=%v %v", first, err)
	}
	res, err = f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Corrected || res.Publish.Revision != 2 || res.Publish.Previous.Count != 4 || res.Publish.Result.Count != 6 {
		t.Fatalf("correction after publication: %+v %v", res, err)
	}
}

// A correction replaces the parts with their merge and keeps the previous
// value beside it: with the largest sketches the config allows, an item
// holding a pending correction stays within the window item budget, and
// publishing drops the previous value again.
func TestCorrectionItemWithinBudget(t *testing.T) {
	big, err := agg.NewSpec([]string{"count", "distinct", "quantiles"}, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	big.DistinctPrecision = 16 // the largest the pipeline config allows with quantiles
	mu.Lock()
	tables++
	name := "views-" + strconv.Itoa(tables)
	mu.Unlock()
	ctx := context.Background()
	if err := state.CreateTable(ctx, shared, name); err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(shared, name, big)
	seq := 0
	batch := func(b int) *state.Update {
		var es []state.Entry
		v := 1e-200
		for i := 0; i < 40000; i++ {
			seq++
			if v *= 1.02; v > 1<<53 {
				v = 1e-200
			}
			es = append(es, state.Entry{Seq: strconv.Itoa(seq), Value: v, Distinct: []byte(fmt.Sprint("u", b, "-", i))})
		}
		return &state.Update{Pipeline: "p", Key: "k", Kind: "tumbling:1m0s", Window: minute, OpenIn: "p#shard-0", Entries: es, CorrectIfFinal: true}
	}
	for b := 0; b < 3; b++ {
		if _, err := views.Apply(ctx, "shard-0", batch(b)); err != nil {
			t.Fatal(err)
		}
	}
	ref := state.Ref{PK: state.PartitionKey("p", "k"), SK: state.SortKey("tumbling:1m0s", minute)}
	if _, _, err := views.Finalize(ctx, ref); err != nil {
		t.Fatal(err)
	}
	size := func() (int, map[string]types.AttributeValue) {
		out, err := shared.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: ref.PK}, "sk": &types.AttributeValueMemberS{Value: ref.SK}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return limits.ItemSize(out.Item), out.Item
	}
	for rev := 1; rev <= 3; rev++ {
		if _, err := views.UnlistRevision(ctx, ref, rev); err != nil {
			t.Fatal(err)
		}
		res, err := views.Apply(ctx, "shard-0", batch(10+rev))
		if err != nil || res.Outcome != state.Corrected {
			t.Fatalf("correction %d: %+v %v", rev, res, err)
		}
		n, item := size()
		if n > state.WindowItemBudget {
			t.Fatalf("correction %d: item of %d bytes, over the budget of %d", rev, n, state.WindowItemBudget)
		}
		if parts := item["parts"].(*types.AttributeValueMemberL).Value; len(parts) != 1 {
			t.Fatalf("correction %d: %d parts, want their merge", rev, len(parts))
		}
		if _, ok := item["previous"]; !ok {
			t.Fatalf("correction %d: no previous value stored", rev)
		}
	}
	if _, err := views.UnlistRevision(ctx, ref, 4); err != nil {
		t.Fatal(err)
	}
	if _, item := size(); item["previous"] != nil {
		t.Fatal("a published correction keeps its previous value")
	}
}
