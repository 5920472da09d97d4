package handler_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/handler"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// maxPages bounds the distinct pages a Top3 counts (selectPage refuses a
// page name over 64 bytes; a session's pages are few), so its encoding
// stays small.
const maxPages = 256

// Top3 counts page views in a user's session and renders the three most
// viewed: a handler of one's own, written from docs/handler.md alone.
type Top3 struct{ Views map[string]int64 }

func (t *Top3) Add(page string) {
	if t.Views == nil {
		t.Views = map[string]int64{}
	}
	t.Views[page]++
}

func (t *Top3) Merge(o *Top3) {
	for p, n := range o.Views {
		if t.Views == nil {
			t.Views = map[string]int64{}
		}
		t.Views[p] += n
	}
}

// MarshalBinary lists the pages in order, each with its count.
func (t *Top3) MarshalBinary() ([]byte, error) {
	pages := make([]string, 0, len(t.Views))
	for p := range t.Views {
		pages = append(pages, p)
	}
	slices.Sort(pages)
	b := binary.AppendUvarint(nil, uint64(len(pages)))
	for _, p := range pages {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, uint64(t.Views[p]))
	}
	return b, nil
}

func (t *Top3) UnmarshalBinary(b []byte) error {
	*t = Top3{}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxPages {
		return errors.New("top3: bad page count")
	}
	b = b[k:]
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return errors.New("top3: bad page")
		}
		p := string(b[k : k+int(l)])
		b = b[k+int(l):]
		c, k := binary.Uvarint(b)
		if k <= 0 || c == 0 {
			return errors.New("top3: bad count")
		}
		b = b[k:]
		if t.Views == nil {
			t.Views = map[string]int64{}
		}
		t.Views[p] = int64(c)
	}
	if len(b) != 0 {
		return errors.New("top3: trailing bytes")
	}
	return nil
}

type pageViews struct {
	Page  string `json:"page"`
	Views int64  `json:"views"`
}

// MarshalJSON is the result: the three most viewed pages, most first.
func (t *Top3) MarshalJSON() ([]byte, error) {
	all := make([]pageViews, 0, len(t.Views))
	for p, n := range t.Views {
		all = append(all, pageViews{p, n})
	}
	slices.SortFunc(all, func(a, b pageViews) int {
		if a.Views != b.Views {
			return int(b.Views - a.Views)
		}
		return strings.Compare(a.Page, b.Page)
	})
	return json.Marshal(all[:min(3, len(all))])
}

// selectPage reads "page_view" events: key = the envelope's key (a user),
// value = data.page, 1–64 bytes.
func selectPage(ev *handler.Event) (string, string, error) {
	if ev.Type != "page_view" {
		return "", "", handler.ErrSkip
	}
	var d struct {
		Page *string `json:"page"`
	}
	if err := strictjson.Decode(ev.Data, &d, strictjson.Options{AllowUnknown: true}); err != nil {
		return "", "", handler.Refuse("data", "%v", err)
	}
	if d.Page == nil || *d.Page == "" || len(*d.Page) > 64 {
		return "", "", handler.Refuse("data.page", "missing, empty or over 64 bytes")
	}
	return ev.Key, *d.Page, nil
}

func view(id, user string, sec float64, page string) rec {
	env := request(id, user, sec, `{"page":"`+page+`"}`)
	env.Type = "page_view"
	return rec{env: env}
}

func TestTop3MergeLaws(t *testing.T) {
	if err := handler.CheckMergeLaws[Top3]([]string{"/a", "/b", "/a", "/c", "/d", "/a", "/b"}, 200, 7); err != nil {
		t.Fatal(err)
	}
}

// TestTop3PerSession: a user's views less than 30 s apart are one session,
// its result the three most viewed pages (views 30 s apart are not: v6
// starts no new session only because v5 is 1 s before it); a view
// refused names data.page; the tick closes the idle shard's last session.
func TestTop3PerSession(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[Top3](cfg, selectPage, handler.WithSession(30*time.Second), handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	recs := []rec{view("v1", "ann", 0, "/a"), view("v2", "ann", 10, "/b"), view("v3", "ann", 20, "/a"), view("v4", "ann", 25, "/c"),
		view("v5", "ann", 29, "/d"), view("v6", "ann", 30, "/a"), view("v7", "ann", 40, "/b"), view("v8", "bob", 5, ""),
		view("v9", "ann", 200, "/z")}
	for i := range recs {
		recs[i].seq = 100 + i
	}
	mustBatch(t, h, kinesisRecords(recs))
	// The shard is idle after v9: the first tick starts its clock, the
	// second (the idle timeout later) closes ann's last session.
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	byID, _ := results(t, cfg.OutputStream)
	var got []string
	for _, r := range byID {
		got = append(got, r.WindowStart.Sub(base).String()+" "+r.WindowEnd.Sub(base).String()+" "+string(r.Result))
	}
	slices.Sort(got)
	want := []string{
		`0s 1m10s [{"page":"/a","views":3},{"page":"/b","views":2},{"page":"/c","views":1}]`,
		`3m20s 3m50s [{"page":"/z","views":1}]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("results\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	aside := asideOfTable(t, cfg.QuarantineTable)
	if len(aside) != 1 || aside[0].Field != "data.page" || aside[0].SequenceNumber != "107" {
		t.Errorf("set aside %+v; want bob's empty page, naming data.page", aside)
	}
}

// leakyTop3 is Top3 with a Merge that forgets a zero Top3 has no map: it
// panics on its first merge into a new aggregate, which CheckMergeLaws
// would have named, but no batch test without it shows.
type leakyTop3 struct{ Top3 }

func (t *leakyTop3) Add(page string) { t.Top3.Add(page) }
func (t *leakyTop3) Merge(o *leakyTop3) {
	for p, n := range o.Views {
		t.Views[p] += n
	}
}

// TestAggregatePanicInMergeSetsRecordsAside: a session handler whose
// aggregate's Merge panics (a nil map) when a session closes. Before, the
// panic in the fold's goroutine ended the process: every retry of the
// batch crashed, holding the shard and every key in it until Lambda gave
// up on the batch. Now the batch and the tick report no failure: the
// record that met the panic is set aside naming data, and each key's
// state, holding its records, once (field state), the reasons naming the
// panic and the method.
func TestAggregatePanicInMergeSetsRecordsAside(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t)
	h, err := handler.NewWindowed[leakyTop3](cfg, selectPage, handler.WithSession(30*time.Second), handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]rec{
		{view("v1", "ann", 0, "/a"), view("v2", "ann", 10, "/b")},
		{view("v3", "bob", 200, "/a"), view("v4", "ann", 201, "/c")}, // ann's session closes before v4
	}
	seq := 100
	for i, b := range batches {
		for j := range b {
			b[j].seq = seq
			seq++
		}
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords(b)})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: %+v %v; want no failure", i, resp, err)
		}
	}
	// The first tick starts the idle shard's clock, the second closes bob's session.
	for _, at := range []time.Time{base.Add(time.Hour), base.Add(2 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatalf("tick at %s: %v; want bob's state set aside, no failure", at.Format("15:04"), err)
		}
	}
	var got []string
	for _, a := range asideOfTable(t, cfg.QuarantineTable) {
		if a.Field == "state" {
			got = append(got, "state "+a.PartitionKey)
		} else {
			got = append(got, a.Field+" "+a.SequenceNumber)
		}
		for _, want := range []string{"panicked", "leakyTop3).Merge", "assignment to entry in nil map"} {
			if !strings.Contains(a.Reason, want) {
				t.Errorf("set aside %s field %s: reason %q\n  does not say %q", a.SequenceNumber, a.Field, a.Reason, want)
			}
		}
	}
	slices.Sort(got)
	if want := []string{"data 103", "state ann", "state bob"}; !slices.Equal(got, want) {
		t.Errorf("set aside %v; want %v", got, want)
	}
}

// rudeTop3 is Top3 whose MarshalJSON panics (it indexes past a short list).
type rudeTop3 struct{ Top3 }

func (t *rudeTop3) Add(page string)   { t.Top3.Add(page) }
func (t *rudeTop3) Merge(o *rudeTop3) { t.Top3.Merge(&o.Top3) }
func (t *rudeTop3) MarshalJSON() ([]byte, error) {
	var top []string
	for p := range t.Views {
		top = append(top, p)
	}
	return json.Marshal(top[:3])
}

// TestAggregatePanicInMarshalJSONSetsResultAside: a result whose
// MarshalJSON panics is set aside (field result, with the aggregate's
// binary encoding) as one that fails to render is; before, the panic ended
// the process on every retry of the batch.
func TestAggregatePanicInMarshalJSONSetsResultAside(t *testing.T) {
	cfg := setup(t)
	h, err := handler.NewWindowed[rudeTop3](cfg, selectPage, handler.WithSession(30*time.Second), handler.WithOutOfOrderness(5*time.Second),
		handler.WithLogger(quiet), handler.WithMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	recs := []rec{view("v1", "ann", 0, "/a"), view("v2", "bob", 200, "/a")}
	for i := range recs {
		recs[i].seq = 100 + i
	}
	mustBatch(t, h, kinesisRecords(recs))
	aside := asideOfTable(t, cfg.QuarantineTable)
	if len(aside) != 1 || aside[0].Field != "result" || !strings.Contains(aside[0].Reason, "rudeTop3).MarshalJSON") ||
		!strings.Contains(string(aside[0].Data), `"aggregate":`) {
		t.Fatalf("set aside %+v; want ann's result, naming result and the panicking MarshalJSON, with its aggregate", aside)
	}
}

// sharingTop3 is Top3 whose Merge takes its argument's map when it has
// none: a later merge into it changes the argument, which the handler
// shares between the windows and the retries of a record.
type sharingTop3 struct{ Top3 }

func (t *sharingTop3) Add(page string) { t.Top3.Add(page) }
func (t *sharingTop3) Merge(o *sharingTop3) {
	if t.Views == nil {
		t.Views = o.Views
		return
	}
	t.Top3.Merge(&o.Top3)
}

// TestCheckMergeLawsFindsAMergeThatKeepsItsArgument: before, it passed.
func TestCheckMergeLawsFindsAMergeThatKeepsItsArgument(t *testing.T) {
	err := handler.CheckMergeLaws[sharingTop3]([]string{"/a", "/b", "/a", "/c"}, 20, 1)
	if err == nil || !strings.Contains(err.Error(), "keeps a reference to its argument") {
		t.Errorf("CheckMergeLaws: %v; want Merge named as keeping a reference to its argument", err)
	}
}
