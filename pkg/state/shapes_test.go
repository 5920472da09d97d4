package state

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/agg"
	"github.com/tributary-dev/tributary/pkg/window"
)

// The requests Views makes from its prebuilt shapes must be the ones the
// expression builder makes from the same values: the tests below build
// each form with the builder per call, as the code did before the shapes,
// and compare texts, names and values.

// recorder is an itemStore that keeps the requests and answers nothing.
type recorder struct {
	updates []*dynamodb.UpdateItemInput
	queries []*dynamodb.QueryInput
}

func (r *recorder) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.updates = append(r.updates, in)
	return &dynamodb.UpdateItemOutput{}, nil
}

func (r *recorder) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (r *recorder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (r *recorder) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.queries = append(r.queries, in)
	return &dynamodb.QueryOutput{}, nil
}

// last is the one update request made since the last call.
func (r *recorder) last(t *testing.T) *dynamodb.UpdateItemInput {
	t.Helper()
	if len(r.updates) != 1 {
		t.Fatalf("%d update requests, want 1", len(r.updates))
	}
	in := r.updates[0]
	r.updates = nil
	return in
}

var (
	shapeClock = time.Date(2026, 11, 29, 10, 0, 7, 123_456_789, time.UTC)
	shapeWin   = window.Window{Start: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)}
	shapeSpec  = func() *agg.Spec {
		s, err := agg.NewSpec([]string{"count", "sum", "min", "max", "mean", "quantiles"}, []float64{0.5, 0.99})
		if err != nil {
			panic(err)
		}
		return s
	}()
)

func shapeViews(r *recorder, opts ...Option) *Views {
	return NewViews(r, "views", shapeSpec, append([]Option{WithClock(func() time.Time { return shapeClock })}, opts...)...)
}

// sameExpr fails unless the request's expressions are ex's.
func sameExpr(t *testing.T, name string, ex expression.Expression, update, cond, keyCond *string, names map[string]string, values map[string]types.AttributeValue) {
	t.Helper()
	for _, c := range []struct {
		what      string
		got, want *string
	}{{"UpdateExpression", update, ex.Update()}, {"ConditionExpression", cond, ex.Condition()}, {"KeyConditionExpression", keyCond, ex.KeyCondition()}} {
		if aws.ToString(c.got) != aws.ToString(c.want) || (c.got == nil) != (c.want == nil) {
			t.Errorf("%s: %s\n got %q\nwant %q", name, c.what, aws.ToString(c.got), aws.ToString(c.want))
		}
	}
	if !reflect.DeepEqual(names, ex.Names()) {
		t.Errorf("%s: names\n got %v\nwant %v", name, names, ex.Names())
	}
	if !reflect.DeepEqual(values, ex.Values()) {
		t.Errorf("%s: values\n got %s\nwant %s", name, avText(values), avText(ex.Values()))
	}
}

func avText(m map[string]types.AttributeValue) string {
	s := ""
	for k, v := range m {
		s += fmt.Sprintf("%s=%#v ", k, v)
	}
	return s
}

func sameUpdate(t *testing.T, name string, ex expression.Expression, in *dynamodb.UpdateItemInput) {
	t.Helper()
	sameExpr(t, name, ex, in.UpdateExpression, in.ConditionExpression, nil, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
}

func must(t *testing.T, b expression.Builder) expression.Expression {
	t.Helper()
	ex, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func fmtTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// builderIdentity is what identity set, built per call.
func builderIdentity(v *Views, u *Update, f expression.NameBuilder, maxF string) expression.UpdateBuilder {
	upd := expression.Set(f, expression.Value(maxF)).
		Set(expression.Name(attrPipeline), expression.Value(u.Pipeline)).
		Set(expression.Name(attrKey), expression.Value(u.Key)).
		Set(expression.Name(attrKind), expression.Value(u.Kind)).
		Set(expression.Name(attrStart), expression.Value(fmtTime(u.Window.Start))).
		Set(expression.Name(attrEnd), expression.Value(fmtTime(u.Window.End))).
		Set(expression.Name(attrUpdatedAt), expression.Value(fmtTime(v.now())))
	if v.retention > 0 {
		upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(u.Window.End.Add(v.retention).Unix()))
	}
	return upd
}

func TestWindowUpdateShapesEqualTheBuilder(t *testing.T) {
	blob := []byte{1, 2, 3}
	minF, maxF := mustFence(t, "49600000000000000000000000001"), mustFence(t, "49600000000000000000000000009")
	for _, retention := range []time.Duration{0, 48 * time.Hour} {
		for _, openIn := range []string{"", "pageviews#shardId-000000000000", "close", "fresh"} {
			for _, fc := range []struct {
				known      bool
				knownFence string
			}{{false, ""}, {true, ""}, {true, mustFence(t, "49600000000000000000000000004")}} {
				name := fmt.Sprintf("retention=%v openIn=%q fenceKnown=%v fence=%q", retention, openIn, fc.known, fc.knownFence)
				v := shapeViews(&recorder{}, WithRetention(retention))
				u := &Update{Pipeline: "pageviews", Key: "user-7", Kind: "hopping:5m0s/1m0s", Window: shapeWin, OpenIn: openIn}
				closes, fresh := openIn == "close" || openIn == "fresh", openIn == "fresh"
				if closes {
					// A flush whose watermark passes the window's end.
					openIn = "pageviews#shardId-000000000000"
					u.OpenIn, u.CloseBy, u.Fresh = openIn, shapeWin.End, fresh
				}
				in, err := v.updateInput("shardId-000000000000", u, blob, 7, minF, maxF, fc.knownFence, fc.known, map[bool]int64{true: 4242}[fresh])
				if err != nil {
					t.Fatal(err)
				}
				// The form as updateInput built it per call.
				f := expression.Name(fenceAttr("shardId-000000000000"))
				upd := builderIdentity(v, u, f, maxF).
					Set(expression.Name(attrParts), expression.ListAppend(
						expression.IfNotExists(expression.Name(attrParts), expression.Value([]any{})),
						expression.Value([]any{blob}))).
					Add(expression.Name(attrCount), expression.Value(7)).
					Add(expression.Name(attrNParts), expression.Value(1)).
					Add(expression.Name(attrVersion), expression.Value(1))
				var fenceCond expression.ConditionBuilder
				switch {
				case !fc.known:
					fenceCond = expression.AttributeNotExists(f).Or(expression.LessThan(f, expression.Value(minF)))
				case fc.knownFence == "":
					fenceCond = expression.AttributeNotExists(f)
				default:
					fenceCond = expression.Equal(f, expression.Value(fc.knownFence))
				}
				status := expression.Name(attrStatus)
				cond := fenceCond.And(expression.AttributeNotExists(status).Or(expression.Equal(status, expression.Value(statusOpen))))
				if fresh {
					// Created, final, unlisted and marked fresh, or not
					// written at all.
					cond = expression.AttributeNotExists(status)
					upd = upd.Set(expression.Name(attrFresh), expression.Value(4242))
					openIn = ""
				}
				if closes && !fresh {
					// A window a carry's flush spilled is Finalize's to
					// close (it may be in a result page).
					cond = cond.And(expression.AttributeNotExists(expression.Name(attrSpill)))
				}
				if closes {
					upd = upd.Set(status, expression.Value(statusFinal)).
						Set(expression.Name(attrRevision), expression.Value(1)).
						Set(expression.Name(attrFinalAt), expression.Value(fmtTime(v.now())))
				} else {
					upd = upd.Set(status, expression.Value(statusOpen)).
						Set(expression.Name(attrRevision), expression.IfNotExists(expression.Name(attrRevision), expression.Value(0)))
				}
				if openIn != "" {
					upd = upd.Set(expression.Name(attrOpenIn), expression.Value(openIn))
				}
				sameUpdate(t, name, must(t, expression.NewBuilder().WithUpdate(upd).WithCondition(cond)), in)
				if wantRV := map[bool]types.ReturnValue{false: types.ReturnValueUpdatedNew, true: types.ReturnValueAllNew}[closes]; in.ReturnValues != wantRV {
					t.Errorf("%s: ReturnValues %s, want %s", name, in.ReturnValues, wantRV)
				}
				if got, want := in.Key, itemKey("pageviews#user-7", "hopping:5m0s/1m0s|"+shapeWin.ID()); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: key %v, want %v", name, got, want)
				}
			}
		}
	}
}

func TestCorrectionShapesEqualTheBuilder(t *testing.T) {
	part := shapeSpec.New()
	part.Add(12, nil)
	partBlob, err := part.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]types.AttributeValue{attrParts: &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: partBlob}}}}
	late := shapeSpec.New()
	late.Add(40, nil)
	maxF := mustFence(t, "49600000000000000000000000009")
	for _, retention := range []time.Duration{0, time.Hour} {
		for _, knownFence := range []string{"", mustFence(t, "49600000000000000000000000004")} {
			name := fmt.Sprintf("retention=%v fence=%q", retention, knownFence)
			v := shapeViews(&recorder{}, WithRetention(retention))
			u := &Update{Pipeline: "pageviews", Key: "user-7", Kind: "tumbling:1m0s", Window: shapeWin, OpenIn: "pageviews#shardId-000000000001"}
			in, err := v.correctionInput("shardId-000000000001", u, old, late, maxF, knownFence, 2)
			if err != nil {
				t.Fatal(err)
			}
			prev, _ := v.merged(old)
			prevBlob, _ := prev.MarshalBinary()
			cur := prev.Clone()
			if err := cur.Merge(late); err != nil {
				t.Fatal(err)
			}
			curBlob, _ := cur.MarshalBinary()
			f := expression.Name(fenceAttr("shardId-000000000001"))
			upd := builderIdentity(v, u, f, maxF).
				Set(expression.Name(attrParts), expression.Value([]any{curBlob})).
				Set(expression.Name(attrNParts), expression.Value(1)).
				Set(expression.Name(attrPrevious), expression.Value(prevBlob)).
				Set(expression.Name(attrRevision), expression.Value(3)).
				Set(expression.Name(attrOpenIn), expression.Value(u.OpenIn)).
				Remove(expression.Name(attrFresh)).
				Add(expression.Name(attrCount), expression.Value(late.Count())).
				Add(expression.Name(attrVersion), expression.Value(1))
			fenceCond := expression.AttributeNotExists(f)
			if knownFence != "" {
				fenceCond = expression.Equal(f, expression.Value(knownFence))
			}
			cond := fenceCond.And(expression.Equal(expression.Name(attrStatus), expression.Value(statusFinal))).
				And(expression.Equal(expression.Name(attrRevision), expression.Value(2))).
				And(expression.AttributeNotExists(expression.Name(attrOpenIn)))
			sameUpdate(t, name, must(t, expression.NewBuilder().WithUpdate(upd).WithCondition(cond)), in)
		}
	}
}

func TestKeyedStateShapesEqualTheBuilder(t *testing.T) {
	ref := KeyedRef{Pipeline: "pageviews", Key: "user-7", Kind: "session:30s"}
	for variant := range 16 {
		expiry, fenced, open, versioned := variant&1 != 0, variant&2 != 0, variant&4 != 0, variant&8 != 0
		name := fmt.Sprintf("expiry=%v fenced=%v open=%v versioned=%v", expiry, fenced, open, versioned)
		r := &recorder{}
		var opts []Option
		if expiry {
			opts = append(opts, WithKeyedExpiry(25*time.Hour))
		}
		v := shapeViews(r, opts...)
		ks := KeyedState{Blob: []byte("buffer")}
		if versioned {
			ks.Version = 4
		}
		fence, openIn, until := "", "", window.Window{}
		if fenced {
			fence = "49600000000000000000000000009"
		}
		if open {
			openIn, until = "pageviews#shardId-000000000000", shapeWin
		}
		if _, err := v.SaveKeyed(context.Background(), ref, "shardId-000000000000", ks, fence, openIn, until); err != nil {
			t.Fatal(err)
		}
		in := r.last(t)
		upd := expression.Set(expression.Name(attrBlob), expression.Value(ks.Blob)).
			Set(expression.Name(attrPipeline), expression.Value(ref.Pipeline)).
			Set(expression.Name(attrKey), expression.Value(ref.Key)).
			Set(expression.Name(attrKind), expression.Value(ref.Kind)).
			Set(expression.Name(attrVersion), expression.Value(ks.Version+1)).
			Set(expression.Name(attrUpdatedAt), expression.Value(fmtTime(v.now())))
		if v.keyedExpiry > 0 {
			upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(v.now().Add(v.keyedExpiry).Unix()))
		}
		if fence != "" {
			upd = upd.Set(expression.Name(fenceAttr("shardId-000000000000")), expression.Value(mustFence(t, fence)))
		}
		if open {
			upd = upd.Set(expression.Name(attrOpenIn), expression.Value(openIn)).
				Set(expression.Name(attrOpenUntil), expression.Value(fmtTime(until.End)))
		} else {
			upd = upd.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil))
		}
		cond := expression.AttributeNotExists(expression.Name(attrVersion))
		if ks.Version > 0 {
			cond = expression.Equal(expression.Name(attrVersion), expression.Value(ks.Version))
		}
		sameUpdate(t, name, must(t, expression.NewBuilder().WithUpdate(upd).WithCondition(cond)), in)
	}
}

func TestOtherWriteShapesEqualTheBuilder(t *testing.T) {
	ctx := context.Background()
	ref := Ref{PK: "pageviews#user-7", SK: "tumbling:1m0s|" + shapeWin.ID()}
	blob := []byte{9, 8, 7}
	for _, retention := range []time.Duration{0, time.Hour} {
		for _, retracted := range []bool{false, true} {
			name := fmt.Sprintf("PutWindow retention=%v retracted=%v", retention, retracted)
			r := &recorder{}
			v := shapeViews(r, WithRetention(retention))
			kref := KeyedRef{Pipeline: "pageviews", Key: "user-7", Kind: "session:30s"}
			if err := v.PutWindow(ctx, kref, shapeWin, blob, 17, 2, retracted); err != nil {
				t.Fatal(err)
			}
			status := statusFinal
			if retracted {
				status = statusRetracted
			}
			upd := expression.Set(expression.Name(attrPipeline), expression.Value(kref.Pipeline)).
				Set(expression.Name(attrKey), expression.Value(kref.Key)).
				Set(expression.Name(attrKind), expression.Value(kref.Kind)).
				Set(expression.Name(attrStart), expression.Value(fmtTime(shapeWin.Start))).
				Set(expression.Name(attrEnd), expression.Value(fmtTime(shapeWin.End))).
				Set(expression.Name(attrParts), expression.Value([]any{blob})).
				Set(expression.Name(attrNParts), expression.Value(1)).
				Set(expression.Name(attrCount), expression.Value(uint64(17))).
				Set(expression.Name(attrStatus), expression.Value(status)).
				Set(expression.Name(attrRevision), expression.Value(2)).
				Set(expression.Name(attrUpdatedAt), expression.Value(fmtTime(v.now())))
			if v.retention > 0 {
				upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(shapeWin.End.Add(v.retention).Unix()))
			}
			rev := expression.Name(attrRevision)
			sameUpdate(t, name, must(t, expression.NewBuilder().WithUpdate(upd).
				WithCondition(expression.AttributeNotExists(rev).Or(expression.LessThanEqual(rev, expression.Value(2))))), r.last(t))
		}
	}

	r := &recorder{}
	v := shapeViews(r)

	_, _, _ = v.Finalize(ctx, ref) // the recorder answers no item: only the request matters
	sameUpdate(t, "Finalize", must(t, expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrStatus), expression.Value(statusFinal)).
			Set(expression.Name(attrRevision), expression.Value(1)).
			Set(expression.Name(attrFinalAt), expression.Value(fmtTime(v.now()))).
			Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(expression.Equal(expression.Name(attrStatus), expression.Value(statusOpen)).
			And(expression.AttributeNotExists(expression.Name(attrSpill))))), r.last(t))

	for _, revision := range []int{0, 3} {
		if _, err := v.unlist(ctx, ref, revision); err != nil {
			t.Fatal(err)
		}
		cond := expression.Equal(expression.Name(attrStatus), expression.Value(statusFinal)).
			And(expression.AttributeExists(expression.Name(attrOpenIn)))
		if revision > 0 {
			cond = cond.And(expression.Equal(expression.Name(attrRevision), expression.Value(revision)))
		}
		in := r.last(t)
		// The number the write drew, its last value.
		by, ok := in.ExpressionAttributeValues[fmt.Sprintf(":%d", len(in.ExpressionAttributeValues)-1)].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("unlist revision=%d: no number among %v", revision, in.ExpressionAttributeValues)
		}
		sameUpdate(t, fmt.Sprintf("unlist revision=%d", revision), must(t, expression.NewBuilder().
			WithUpdate(expression.Remove(expression.Name(attrOpenIn)).Remove(expression.Name(attrOpenUntil)).
				Remove(expression.Name(attrPrevious)).Set(expression.Name(attrUnlistedBy), expression.Value(by))).
			WithCondition(cond)), in)
	}

	part := shapeSpec.New()
	part.Add(1, nil)
	pb, _ := part.MarshalBinary()
	item := map[string]types.AttributeValue{
		attrParts:   &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: pb}, &types.AttributeValueMemberB{Value: pb}}},
		attrVersion: &types.AttributeValueMemberN{Value: "5"},
	}
	v.forceCompact(ctx, itemKey(ref.PK, ref.SK), item)
	merged, _ := v.merged(item)
	mb, _ := merged.MarshalBinary()
	sameUpdate(t, "forceCompact", must(t, expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrParts), expression.Value([]any{mb})).
			Set(expression.Name(attrNParts), expression.Value(1)).
			Set(expression.Name(attrVersion), expression.Value(6))).
		WithCondition(expression.Equal(expression.Name(attrVersion), expression.Value(5)))), r.last(t))

	for _, retention := range []time.Duration{0, time.Hour} {
		v := shapeViews(r, WithRetention(retention))
		keys := []string{"user-7", "user-8"}
		if err := v.addToListing(ctx, "~open#pageviews#shardId-000000000000", "sk", keys, 12, shapeWin); err != nil {
			t.Fatal(err)
		}
		upd := expression.Add(expression.Name(attrKeys), expression.Value(&types.AttributeValueMemberSS{Value: keys})).
			Add(expression.Name(attrAdds), expression.Value(1)).
			Add(expression.Name(attrBytes), expression.Value(12))
		if retention > 0 {
			upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(shapeWin.End.Add(retention).Unix()))
		}
		room := expression.AttributeNotExists(expression.Name(attrBytes)).
			Or(expression.LessThanEqual(expression.Name(attrBytes), expression.Value(listingFullBytes-12)))
		sameUpdate(t, fmt.Sprintf("addToListing retention=%v", retention), must(t, expression.NewBuilder().WithUpdate(upd).WithCondition(room)), r.last(t))
	}

	wm := window.NewWatermark(5 * time.Second)
	wm.Observe(shapeClock)
	if _, err := v.SaveWatermark(ctx, "pageviews", "shardId-000000000000", wm); err != nil {
		t.Fatal(err)
	}
	wmBlob, _ := wm.MarshalBinary()
	val := fmtTime(wm.Current())
	wmName := expression.Name(attrWMValue)
	sameUpdate(t, "SaveWatermark", must(t, expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attrWatermark), expression.Value(wmBlob)).Set(wmName, expression.Value(val))).
		WithCondition(expression.AttributeNotExists(wmName).Or(expression.LessThanEqual(wmName, expression.Value(val))))), r.last(t))

	if _, err := v.FirstToCount(ctx, "pageviews", "shardId-000000000000", "49600000000000000000000000009"); err != nil {
		t.Fatal(err)
	}
	counted, fence := expression.Name(attrCounted), expression.Value(mustFence(t, "49600000000000000000000000009"))
	sameUpdate(t, "FirstToCount", must(t, expression.NewBuilder().
		WithUpdate(expression.Set(counted, fence)).
		WithCondition(expression.AttributeNotExists(counted).Or(expression.LessThan(counted, fence)))), r.last(t))

	if _, err := v.OpenWindows(ctx, "pageviews#shardId-000000000000", shapeClock); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Watermarks(ctx, "pageviews"); err != nil {
		t.Fatal(err)
	}
	if len(r.queries) != 2 {
		t.Fatalf("%d queries, want 2", len(r.queries))
	}
	for i, want := range []expression.Expression{
		must(t, expression.NewBuilder().WithKeyCondition(expression.Key(attrOpenIn).Equal(expression.Value("pageviews#shardId-000000000000")).
			And(expression.Key(attrOpenUntil).LessThanEqual(expression.Value(fmtTime(shapeClock)))))),
		must(t, expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(watermarkPK("pageviews"))))),
	} {
		q := r.queries[i]
		sameExpr(t, []string{"OpenWindows", "Watermarks"}[i], want, nil, nil, q.KeyConditionExpression, q.ExpressionAttributeNames, q.ExpressionAttributeValues)
	}
}

// TestTimeTextIsTheLayout checks the cached texts of instants against
// formatting them, for instants that share a cache entry or a millisecond.
func TestTimeTextIsTheLayout(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i := range 5000 {
		for _, at := range []time.Time{
			base.Add(time.Duration(i) * time.Minute),
			base.Add(time.Duration(i) * 999_999 * time.Nanosecond),
			base.Add(-time.Duration(i) * 1_000_001 * time.Nanosecond).In(time.FixedZone("x", 3600)),
		} {
			if got, want := timeText(at), at.UTC().Format(TimeLayout); got != want {
				t.Fatalf("timeText(%v) = %q, want %q", at, got, want)
			}
		}
	}
}

func mustFence(t *testing.T, seq string) string {
	t.Helper()
	f, err := Fence(seq)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// nopStore accepts every write and keeps nothing.
type nopStore struct{ recorder }

func (*nopStore) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

// TestWindowWriteAllocations bounds what one window write of a batch
// allocates on the store's side of the call: its request (input, key,
// values) and the batch's partial, not its expressions, which are built
// once per form. Building them per write, as before, took 458.
func TestWindowWriteAllocations(t *testing.T) {
	v := NewViews(&nopStore{}, "views", shapeSpec, WithRetention(48*time.Hour))
	u := &Update{Pipeline: "pageviews", Key: "user-7", Kind: "hopping:5m0s/1m0s", Window: shapeWin, OpenIn: "pageviews#shardId-000000000000",
		Entries: []Entry{{Seq: "49600000000000000000000000001", Value: 12}, {Seq: "49600000000000000000000000002", Value: 40}}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := v.Apply(ctx, "shardId-000000000000", u); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 16 {
		t.Errorf("a window write allocates %.0f times, want at most 16", allocs)
	}
	t.Logf("%.0f allocations per window write", allocs)
}
