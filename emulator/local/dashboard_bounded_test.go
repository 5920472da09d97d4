package local

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/window"
)

// TestResultsViewReadsTheLatestWindows: the results view of a key with more
// windows in its range than the page shows reads only the latest
// maxResultWindows and one more (which says there are earlier ones), shows
// those in start order and says that earlier ones are not shown; a key
// with few windows shows them all, without the note. Before, the page read
// every window of the range.
func TestResultsViewReadsTheLatestWindows(t *testing.T) {
	cfg := standintest.Config(t, standintest.Start(t))
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	pc, err := pipeline.Parse([]byte(`{"name":"busy","key":"key","windows":[{"kind":"tumbling","size":"10s"}],"aggregates":["count"]}`))
	if err != nil {
		t.Fatal(err)
	}
	kind := pc.Windows[0].ID()
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	// Ten-second windows up to now, all in the page's range: more than
	// the page shows for key "busy", three for key "quiet".
	const size = 10 * time.Second
	n := maxResultWindows + 100
	start := func(i int) time.Time { return now.Add(-time.Duration(n-i) * size) }
	writer := state.NewViews(db, "views", pc.Aggregates)
	s := pc.Aggregates.New()
	s.Add(1, nil)
	blob, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, i int) error {
		w := window.Window{Start: start(i), End: start(i).Add(size)}
		return writer.PutWindow(ctx, state.KeyedRef{Pipeline: pc.Name, Key: key, Kind: kind}, w, blob, 1, 1, false)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				if err := put("busy", i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := n - 3; i < n; i++ {
		if err := put("quiet", i); err != nil {
			t.Fatal(err)
		}
	}

	counter := &standintest.QueryCounter{Client: db}
	d := &dashboardServer{
		db: db,
		pipelines: []*Windows{{Pipeline: pc, Function: "aggregate", Table: "views", views: state.NewViews(counter, "views", pc.Aggregates),
			recent: aggregate.New(pc, state.NewViews(counter, "views", pc.Aggregates), nil, "")}},
		now:  func() time.Time { return now },
		keys: map[string]keyList{},
	}
	starts := regexp.MustCompile(`<g class="window" data-start="([^"]+)"`)
	for _, tt := range []struct {
		key          string
		first, shown int // the first window shown (index), how many
		more         bool
	}{
		{"busy", n - maxResultWindows, maxResultWindows, true},
		{"quiet", n - 3, 3, false},
	} {
		counter.Take()
		page := d.renderResults(ctx, view{query: url.Values{"key": {tt.key}}})
		items, _ := counter.Take()
		if items > tt.shown+1 {
			t.Errorf("key %s: read %d window items, want at most %d", tt.key, items, tt.shown+1)
		}
		head := fmt.Sprintf(`data-key="%s" data-kind="%s" data-windows="%d" data-more="%t"`, tt.key, kind, tt.shown, tt.more)
		if !strings.Contains(page, head) {
			t.Errorf("key %s: the section does not say %s:\n%.600s", tt.key, head, page)
		}
		note := fmt.Sprintf("… and earlier windows not shown: the page reads the latest %d windows of the range", maxResultWindows)
		if strings.Contains(page, note) != tt.more {
			t.Errorf("key %s: the note that earlier windows exist is shown: %v, want %v", tt.key, !tt.more, tt.more)
		}
		var got []string
		for _, m := range starts.FindAllStringSubmatch(page, -1) {
			got = append(got, m[1])
		}
		if len(got) != tt.shown {
			t.Fatalf("key %s: %d bars, want %d", tt.key, len(got), tt.shown)
		}
		for i, g := range got {
			if want := start(tt.first + i).Format(time.RFC3339); g != want {
				t.Fatalf("key %s: bar %d starts at %s, want %s (the latest windows, in start order)", tt.key, i, g, want)
			}
		}
	}
}

// TestDashboardReadsNoQueryValueLongerThanAKey: a query value longer than
// any key can be is read as not given, so the page never repeats it (a
// 100,000-character key= was repeated four times into a 1.9 MB page).
func TestDashboardReadsNoQueryValueLongerThanAKey(t *testing.T) {
	d := &dashboardServer{now: time.Now}
	long := strings.Repeat("k", 100_000)
	r := httptest.NewRequest(http.MethodGet, "/?key="+long+"&kind=tumbling&range="+long, nil)
	q := d.viewOf(r).query
	if q.Has("key") || q.Has("range") || q.Get("kind") != "tumbling" {
		t.Errorf("query read as %d key bytes, %d range bytes, kind %q; want no key, no range, kind tumbling",
			len(q.Get("key")), len(q.Get("range")), q.Get("kind"))
	}
	longest := strings.Repeat("é", 256) // a key of stream.MaxKeyLength characters, two bytes each
	if got := d.viewOf(httptest.NewRequest(http.MethodGet, "/?key="+url.QueryEscape(longest), nil)).query.Get("key"); got != longest {
		t.Errorf("a key of 256 characters read as %d bytes, want it whole", len(got))
	}
}

// TestResultsViewSaysWhatItReplaced: a pipeline, key, window kind or
// measure the page cannot show is replaced by one it can, and a note says
// so, quoting what was asked (cut); before, the page showed another key's
// windows under the heading without a word. A key missing from the key
// list, which holds the keys of the first items scanned only, is still
// shown when it has windows.
func TestResultsViewSaysWhatItReplaced(t *testing.T) {
	cfg := standintest.Config(t, standintest.Start(t))
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	pc, err := pipeline.Parse([]byte(`{"name":"shop","key":"key","windows":[{"kind":"tumbling","size":"10s"}],"aggregates":["count"]}`))
	if err != nil {
		t.Fatal(err)
	}
	kind := pc.Windows[0].ID()
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	views := state.NewViews(db, "views", pc.Aggregates)
	s := pc.Aggregates.New()
	s.Add(1, nil)
	blob, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ada", "bob"} {
		w := window.Window{Start: now.Add(-time.Minute), End: now.Add(-50 * time.Second)}
		if err := views.PutWindow(ctx, state.KeyedRef{Pipeline: pc.Name, Key: key, Kind: kind}, w, blob, 1, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	d := &dashboardServer{
		db:        db,
		pipelines: []*Windows{{Pipeline: pc, Function: "aggregate", Table: "views", views: views, recent: aggregate.New(pc, views, nil, "")}},
		now:       func() time.Time { return now },
		// The key list as a scan of the first items made it: bob's
		// items came later.
		keys: map[string]keyList{pc.Name: {keys: []string{"ada"}, truncated: true, at: now}},
	}
	long := strings.Repeat("z", 200)
	for _, tt := range []struct {
		name    string
		query   url.Values
		showing string // data-key
		notes   []string
	}{
		{"a key with windows", url.Values{"key": {"ada"}}, "ada", nil},
		{"a key past the listed ones", url.Values{"key": {"bob"}}, "bob", nil},
		{"a key with no windows", url.Values{"key": {"Ada"}}, "ada",
			[]string{`No ` + kind + ` windows of key "Ada" in pipeline shop in the last 3 hours (keys are case-sensitive): showing key ada.`}},
		{"a long key", url.Values{"key": {long}}, "ada", []string{`key "` + strings.Repeat("z", 64) + `"…`}},
		{"an unknown pipeline", url.Values{"pipeline": {"nope"}, "key": {"ada"}}, "ada", []string{`No pipeline "nope": showing shop.`}},
		{"an unknown kind and measure", url.Values{"kind": {"rolling"}, "measure": {"median"}}, "ada",
			[]string{`Pipeline shop has no window kind "rolling": showing ` + kind + `.`, `Pipeline shop computes no "median": showing`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page := html.UnescapeString(d.renderResults(ctx, view{query: tt.query}))
			if want := `data-key="` + tt.showing + `"`; !strings.Contains(page, want) {
				t.Errorf("the section does not say %s:\n%.800s", want, page)
			}
			for _, n := range tt.notes {
				if !strings.Contains(page, n) {
					t.Errorf("no note %q:\n%.1500s", n, page)
				}
			}
			if len(tt.notes) == 0 && strings.Contains(page, `class="note replaced"`) {
				t.Errorf("a note of a replaced value, where nothing was replaced:\n%.1500s", page)
			}
			if strings.Contains(page, strings.Repeat("z", 65)) {
				t.Errorf("the page repeats more than 64 bytes of the key asked for")
			}
		})
	}
}

// TestResultsViewShowsOpenSessions: a key's session that is still open
// lives in its keyed state, not in a window item; the results view shows
// it, open, with its running count, as make results does. Before, the page
// read window items alone and showed no session until it was final.
func TestResultsViewShowsOpenSessions(t *testing.T) {
	cfg := standintest.Config(t, standintest.Start(t))
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	if err := state.CreateTable(ctx, db, "views"); err != nil {
		t.Fatal(err)
	}
	pc, err := pipeline.Parse([]byte(`{"name":"visits","key":"key","windows":[{"kind":"session","gap":"30s"}],"aggregates":["count"],"partitionKeyIsGroupingKey":true}`))
	if err != nil {
		t.Fatal(err)
	}
	views := state.NewViews(db, "views", pc.Aggregates)
	now := time.Now().UTC().Truncate(time.Second)
	var recs []events.KinesisEventRecord
	for i, at := range []time.Time{now.Add(-20 * time.Second), now.Add(-10 * time.Second)} {
		env := fmt.Sprintf(`{"id":"e%d","type":"visit","key":"ada","occurredAt":%q,"sentAt":%q,"data":{}}`, i, at.Format(time.RFC3339), at.Format(time.RFC3339))
		recs = append(recs, events.KinesisEventRecord{EventID: fmt.Sprintf("shardId-000000000000:%d", i+1), EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/events",
			Kinesis: events.KinesisRecord{Data: []byte(env), SequenceNumber: fmt.Sprint(i + 1), PartitionKey: "ada", ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: at}}})
	}
	proc := aggregate.New(pc, views, nil, "")
	if resp, err := proc.HandleBatch(ctx, events.KinesisEvent{Records: recs}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch: %+v %v", resp, err)
	}
	d := &dashboardServer{
		db:        db,
		pipelines: []*Windows{{Pipeline: pc, Function: "aggregate", Table: "views", views: views, recent: proc}},
		now:       func() time.Time { return now },
		keys:      map[string]keyList{},
	}
	page := d.renderResults(ctx, view{query: url.Values{"key": {"ada"}}})
	if !strings.Contains(page, `data-key="ada"`) || !strings.Contains(page, `data-windows="1"`) {
		t.Fatalf("ada's open session is not shown:\n%.1500s", page)
	}
	if !strings.Contains(page, "<td>open</td>") {
		t.Errorf("ada's session is not shown open:\n%.2500s", page)
	}
}
