package state_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// freshUpdate is the closing write of key's window w that a shard's carry
// held, with the records from..to (their sequence numbers and values).
func freshUpdate(key string, w window.Window, from, to int) *state.Update {
	st := spec.New()
	for i := from; i <= to; i++ {
		st.Add(float64(i), nil)
	}
	return &state.Update{Pipeline: "p", Key: key, Kind: "tumbling:1m0s", Window: w, OpenIn: "p#shard-0",
		Partial: st, MinSeq: strconv.Itoa(from), MaxSeq: strconv.Itoa(to), CloseBy: w.End, Fresh: true}
}

// pageItems counts the table's result pages.
func pageItems(t *testing.T, f *fixture) int {
	t.Helper()
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, it := range out.Items {
		if state.IsPageItem(it) {
			n++
		}
	}
	return n
}

func keysOfBuckets(n int) []string {
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(seen) < n; i++ {
		k := "key-" + strconv.Itoa(i)
		keys = append(keys, k)
		seen[state.PageBucket(k)] = true
	}
	return keys
}

func TestFreshWindowsOfManyKeysAreOneWriteABucket(t *testing.T) {
	ctx := context.Background()
	f := newViews(t, state.WithRetention(48*time.Hour))
	keys := keysOfBuckets(state.PageBuckets) // at least one key in every bucket, most with several
	var us []*state.Update
	for i, k := range keys {
		us = append(us, freshUpdate(k, minute, 10*i+1, 10*i+1+i%4))
	}
	res, err := f.views.ApplyFresh(ctx, "shard-0", us)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for i, r := range res {
		writes += r.Writes
		want := uint64(1 + i%4)
		if r.Outcome != state.Applied || !r.Closed || !r.Marked || r.Publish == nil || r.Publish.Result.Count != want || r.Publish.Revision != 1 || r.Publish.Pending {
			t.Fatalf("key %s: %+v (publish %+v), want created final with %d records, marked published", keys[i], r, r.Publish, want)
		}
		if r.Publish.Ref != (state.Ref{PK: state.PartitionKey("p", keys[i]), SK: state.SortKey("tumbling:1m0s", minute)}) {
			t.Fatalf("key %s: ref %+v, want the per-key item's name", keys[i], r.Publish.Ref)
		}
	}
	if pages := pageItems(t, f); writes != state.PageBuckets || pages != state.PageBuckets {
		t.Fatalf("%d keys' windows took %d writes and left %d pages, want one write and one page a bucket (%d)", len(keys), writes, pages, state.PageBuckets)
	}
	for i, k := range keys {
		vs, err := f.views.Query(ctx, "p", k, "tumbling:1m0s", minute.Start, minute.End)
		if err != nil || len(vs) != 1 || vs[0].Result.Count != uint64(1+i%4) || !vs[0].Final || vs[0].Revision != 1 {
			t.Fatalf("Query %s: %+v %v, want its window, final at revision 1", k, vs, err)
		}
		rev, exists, err := f.views.PublishedRevision(ctx, vs[0].Ref)
		if err != nil || !exists || rev != 1 {
			t.Fatalf("PublishedRevision %s: %d %v %v, want revision 1 published", k, rev, exists, err)
		}
	}
	// The flush sent again (its carry not saved): every result is a
	// duplicate to send again, none logged again, no page written.
	again, err := f.views.ApplyFresh(ctx, "shard-0", us)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Outcome != state.Duplicate || r.Marked || r.Publish != nil || r.Resend == nil || r.Resend.Result.Count != uint64(1+i%4) {
			t.Fatalf("again, key %s: %+v, want a duplicate handing back its result to send again", keys[i], r)
		}
	}
	if pages := pageItems(t, f); pages != state.PageBuckets {
		t.Fatalf("%d pages after the retry, want %d", pages, state.PageBuckets)
	}
}

func TestAPageMetWithSomeOfTheRecordsIsAnOverlap(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	if _, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("k", minute, 1, 4)}); err != nil {
		t.Fatal(err)
	}
	_, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("k", minute, 1, 6)})
	if !errors.Is(err, state.ErrPartialOverlap) {
		t.Fatalf("a close of the window with more records: %v, want ErrPartialOverlap", err)
	}
	// Another shard's page of the same window and bucket is its own.
	res, err := f.views.ApplyFresh(ctx, "shard-1", []*state.Update{freshUpdate("k2", minute, 1, 2)})
	if err != nil || !res[0].Marked {
		t.Fatalf("another shard's close: %+v %v, want its own page", res, err)
	}
}

func TestTheTickersCloseMeetsTheFlushsPage(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	// The flush closed a, b and c with the interval's records (to 9);
	// the ticker, from the carry it read before (to 5), closes a and b.
	flush := []*state.Update{freshUpdate("a", minute, 1, 9), freshUpdate("b", minute, 2, 8), freshUpdate("c", minute, 6, 7)}
	for _, u := range flush {
		u.Key = "t-" + u.Key // one bucket for all: found below
	}
	same := state.PageBucket(flush[0].Key)
	for i := 1; i < len(flush); i++ {
		for j := 0; state.PageBucket(flush[i].Key) != same; j++ {
			flush[i].Key = fmt.Sprintf("t-%d-%d", i, j)
		}
	}
	if _, err := f.views.ApplyFresh(ctx, "shard-0", flush); err != nil {
		t.Fatal(err)
	}
	tick := []*state.Update{freshUpdate(flush[0].Key, minute, 1, 5), freshUpdate(flush[1].Key, minute, 2, 5)}
	res, err := f.views.ApplyFresh(ctx, "shard-0", tick)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != state.Duplicate || r.Resend == nil || r.Resend.Result.Count != flush[i].Partial.Count() {
			t.Fatalf("tick %s: %+v, want the flush's result (%d records) to send again", tick[i].Key, r, flush[i].Partial.Count())
		}
	}
}

func TestALateRecordCorrectsAPagedResult(t *testing.T) {
	ctx := context.Background()
	for _, correct := range []bool{true, false} {
		t.Run(fmt.Sprintf("correct=%v", correct), func(t *testing.T) {
			f := newViews(t)
			if _, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("k", minute, 1, 4), freshUpdate("other", minute, 5, 5)}); err != nil {
				t.Fatal(err)
			}
			late := update(entries(9, 9))
			late.CorrectIfFinal, late.Paged = correct, true
			res, err := f.views.Apply(ctx, "shard-0", late)
			if err != nil {
				t.Fatal(err)
			}
			if !correct {
				if res.Outcome != state.LateDropped || res.Resend == nil || res.Resend.Result.Count != 4 {
					t.Fatalf("a late record under drop: %+v, want dropped, revision 1 sent again", res)
				}
				if v := read(t, f); v.Revision != 1 || v.Result.Count != 4 {
					t.Fatalf("after the drop: %+v, want revision 1 of 4 records", v)
				}
				return
			}
			if res.Outcome != state.Corrected || res.Revision != 2 || res.Previous == nil || res.Previous.Count != 4 || res.Current.Count != 5 ||
				res.Resend == nil || res.Resend.Revision != 1 || res.Resend.Result.Count != 4 || res.Publish == nil || !res.Publish.Pending {
				t.Fatalf("a late record: %+v, want a correction from the page's 4 records to 5, revision 1 sent again first", res)
			}
			if v := read(t, f); v.Revision != 2 || v.Result.Count != 5 {
				t.Fatalf("Query after the correction: %+v, want the item's revision 2 over the page's entry", v)
			}
			if rev, _, err := f.views.PublishedRevision(ctx, res.Publish.Ref); err != nil || rev != 1 {
				t.Fatalf("PublishedRevision before the correction is published: %d %v, want 1", rev, err)
			}
			// The late record again (its batch sent again): applied.
			dup, err := f.views.Apply(ctx, "shard-0", late)
			if err != nil || dup.Outcome != state.Duplicate || dup.Publish == nil || dup.Publish.Revision != 2 {
				t.Fatalf("the late record again: %+v %v, want a duplicate handing back revision 2", dup, err)
			}
			// A record of the page's own again (its shard's fence): applied.
			old := update(entries(3, 3))
			old.CorrectIfFinal, old.Paged = true, true
			if dup, err := f.views.Apply(ctx, "shard-0", old); err != nil || dup.Outcome != state.Duplicate {
				t.Fatalf("a record the page holds, again: %+v %v, want a duplicate", dup, err)
			}
		})
	}
}

func TestAPagedWriteOfAWindowNoPageHoldsCreatesIt(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	if _, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("other", minute, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	u := update(entries(5, 6))
	u.Paged, u.CorrectIfFinal = true, true
	res, err := f.views.Apply(ctx, "shard-0", u)
	if err != nil || res.Outcome != state.Applied || res.Applied != 2 {
		t.Fatalf("a paged write no page holds: %+v %v, want its records applied to a new item", res, err)
	}
	if v := read(t, f); v.Final || v.Result.Count != 2 {
		t.Fatalf("the window: %+v, want open with 2 records", v)
	}
}

func TestAPageOutgrowingAPartIsCutIntoParts(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	long := strings.Repeat("x", 180)
	var us []*state.Update
	for i := 0; len(us) < 600; i++ {
		k := fmt.Sprintf("%s-%04d", long, i)
		if state.PageBucket(k) == 3 {
			us = append(us, freshUpdate(k, minute, len(us)+1, len(us)+1))
		}
	}
	res, err := f.views.ApplyFresh(ctx, "shard-0", us)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for _, r := range res {
		writes += r.Writes
	}
	if pages := pageItems(t, f); pages < 2 || writes != pages {
		t.Fatalf("600 keys of 190 bytes in one bucket: %d pages in %d writes, want parts of at most 64 KB, one write each", pages, writes)
	}
	for _, i := range []int{0, 299, 599} {
		vs, err := f.views.Query(ctx, "p", us[i].Key, "tumbling:1m0s", minute.Start, minute.End)
		if err != nil || len(vs) != 1 || vs[0].Result.Sum != float64(i+1) {
			t.Fatalf("Query key %d: %+v %v, want its window of value %d", i, vs, err, i+1)
		}
	}
	again, err := f.views.ApplyFresh(ctx, "shard-0", us)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Outcome != state.Duplicate || r.Resend == nil {
			t.Fatalf("again, key %d: %+v, want a duplicate to send again", i, r)
		}
	}
}

func TestAQueryMergesPagesAndItems(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	at := func(i int) window.Window {
		s := minute.Start.Add(time.Duration(i) * time.Minute)
		return window.Window{Start: s, End: s.Add(time.Minute)}
	}
	// Windows 0–9 of k: even ones paged, odd ones items; 4 corrected.
	for i := 0; i < 10; i++ {
		if i%2 == 0 {
			if _, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("k", at(i), 10*i+1, 10*i+1+i)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		u := update(entries(10*i+1, 10*i+1+i))
		u.Window = at(i)
		if _, err := f.views.Apply(ctx, "shard-0", u); err != nil {
			t.Fatal(err)
		}
	}
	late := update(entries(1000, 1000))
	late.Window, late.Paged, late.CorrectIfFinal = at(4), true, true
	if res, err := f.views.Apply(ctx, "shard-0", late); err != nil || res.Outcome != state.Corrected {
		t.Fatalf("correcting window 4: %+v %v", res, err)
	}
	all, err := f.views.Query(ctx, "p", "k", "tumbling:1m0s", at(0).Start, at(10).Start)
	if err != nil || len(all) != 10 {
		t.Fatalf("Query: %d windows %v, want 10", len(all), err)
	}
	for i, v := range all {
		want := uint64(i + 1)
		if i == 4 {
			want++
		}
		if !v.Window.Start.Equal(at(i).Start) || v.Result.Count != want {
			t.Fatalf("window %d: %+v, want start %s and %d records", i, v, at(i).Start, want)
		}
	}
	for _, b := range []state.Bound{{Limit: 3}, {Limit: 3, Latest: true}, {Limit: 0}} {
		vs, more, err := f.views.QueryBounded(ctx, "p", "k", "tumbling:1m0s", at(0).Start, at(10).Start, b)
		if err != nil || !more || len(vs) != b.Limit {
			t.Fatalf("%+v: %d windows, more %v, %v; want %d and more", b, len(vs), more, err, b.Limit)
		}
		first := 0
		if b.Latest {
			first = 7
		}
		for i, v := range vs {
			if !v.Window.Start.Equal(at(first + i).Start) {
				t.Fatalf("%+v: window %d starts %s, want %s", b, i, v.Window.Start, at(first+i).Start)
			}
		}
	}
}

func TestAWindowSpilledByAFlushThatDiedYieldsToItsPage(t *testing.T) {
	ctx := context.Background()
	f := newViews(t)
	// A flush wrote k's window open to keep its carry small, and died
	// before storing the carry; the one sent again kept the window and
	// closed it in a page, with every record.
	spill := update(entries(1, 3))
	spill.Spill = true
	if _, err := f.views.Apply(ctx, "shard-0", spill); err != nil {
		t.Fatal(err)
	}
	if _, err := f.views.ApplyFresh(ctx, "shard-0", []*state.Update{freshUpdate("k", minute, 1, 5)}); err != nil {
		t.Fatal(err)
	}
	if v := read(t, f); !v.Final || v.Result.Count != 5 {
		t.Fatalf("Query: %+v, want the page's final result of 5 records over the open item", v)
	}
	ref := state.Ref{PK: state.PartitionKey("p", "k"), SK: state.SortKey("tumbling:1m0s", minute)}
	view, already, err := f.views.Finalize(ctx, ref)
	if err != nil || !already || view.Pending || view.Result.Count != 5 || view.Revision != 1 {
		t.Fatalf("Finalize of the spilled item: %+v already=%v %v, want the page's result, published already", view, already, err)
	}
	// A spilled window no page holds is made final as any window is.
	g := newViews(t)
	if _, err := g.views.Apply(ctx, "shard-0", spill); err != nil {
		t.Fatal(err)
	}
	view, already, err = g.views.Finalize(ctx, ref)
	if err != nil || already || !view.Final || view.Result.Count != 3 {
		t.Fatalf("Finalize of a spilled window no page holds: %+v already=%v %v, want it made final with its 3 records", view, already, err)
	}
}
