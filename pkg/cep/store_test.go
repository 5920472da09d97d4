package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/keyed/keyedtest"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// clock is a settable clock for a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func newRulesTable(t testing.TB) string {
	t.Helper()
	n := name("rules")
	if err := CreateRulesTable(context.Background(), db, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// timings are the rules' timing on AWS and the local runner's (one
// machine's clocks: a change applies 2 s after it is made).
var timings = []struct {
	name string
	tm   Timing
}{
	{"aws", DefaultTiming},
	{"local", Timing{Refresh: time.Second, ClockSlack: time.Second}},
}

// TestTimingFromEnv: unset, the timing is AWS's; the local runner's value
// is both the refresh and the clock slack; anything else names the
// variable rather than judging rules by a timing detect and rules may not
// share.
func TestTimingFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    Timing
		wantErr bool
	}{
		{env: nil, want: DefaultTiming},
		{env: map[string]string{TimingEnvVar: ""}, want: DefaultTiming},
		{env: map[string]string{TimingEnvVar: "1s"}, want: Timing{Refresh: time.Second, ClockSlack: time.Second}},
		{env: map[string]string{TimingEnvVar: "100ms"}, want: Timing{Refresh: MinRefresh, ClockSlack: MinRefresh}},
		{env: map[string]string{TimingEnvVar: "5s"}, want: DefaultTiming},
		{env: map[string]string{TimingEnvVar: "99ms"}, wantErr: true},
		{env: map[string]string{TimingEnvVar: "6s"}, wantErr: true},
		{env: map[string]string{TimingEnvVar: "-1s"}, wantErr: true},
		{env: map[string]string{TimingEnvVar: "soon"}, wantErr: true},
	} {
		got, err := TimingFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), TimingEnvVar) {
				t.Errorf("%v: %+v, %v; want an error naming %s", tc.env, got, err, TimingEnvVar)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}

func TestRulesLifecycle(t *testing.T) {
	for _, tt := range timings {
		t.Run(tt.name, func(t *testing.T) { testRulesLifecycle(t, tt.tm) })
	}
}

func testRulesLifecycle(t *testing.T, tm Timing) {
	ctx := context.Background()
	c := &clock{t: base}
	s := NewStore(db, newRulesTable(t), c.now).WithTiming(tm)
	delay := tm.ActivationDelay()
	r := rule(t, `{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`)
	sr, _, err := s.Add(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if from := sr.Intervals[0].From; !from.Equal(base.Add(delay)) {
		t.Fatalf("applies from %s, want %s", from, base.Add(delay))
	}
	if again, added, err := s.Add(ctx, r); err != nil || added || again.Version != 1 {
		t.Fatalf("adding it twice: %+v, added %v, %v; want the stored rule, done already", again, added, err)
	}
	c.add(time.Minute)
	if sr, err = s.Disable(ctx, "big"); err != nil || sr.Status != StatusDisabled || !sr.Intervals[0].Until.Equal(c.now().Add(delay)) {
		t.Fatalf("disable: %+v %v", sr, err)
	}
	var se *StateError
	if _, err := s.Disable(ctx, "big"); !errors.As(err, &se) {
		t.Fatalf("disabling a disabled rule: %v", err)
	}
	c.add(time.Minute)
	if sr, err = s.Enable(ctx, "big"); err != nil || len(sr.Intervals) != 2 || !sr.Intervals[1].Until.IsZero() {
		t.Fatalf("enable: %+v %v", sr, err)
	}
	at := func(d time.Duration) bool { return sr.ActiveAt(base.Add(d)) }
	if at(0) || !at(delay) || !at(time.Minute) || at(time.Minute+delay) || at(2*time.Minute) || !at(2*time.Minute+delay) {
		t.Fatalf("intervals %+v", sr.Intervals)
	}
	if sr, err = s.Delete(ctx, "big"); err != nil || sr.Status != StatusDeleted {
		t.Fatalf("delete: %+v %v", sr, err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "big"}}})
	if err != nil || out.Item[TTLAttribute] == nil {
		t.Fatalf("the tombstone has no TTL: %v %v", out.Item, err)
	}
	if _, err := s.Enable(ctx, "big"); !errors.As(err, &se) {
		t.Fatalf("enabling a deleted rule: %v", err)
	}
	if _, err := s.Disable(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("disabling an unknown rule: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status != StatusDeleted {
		t.Fatalf("list: %+v %v", list, err)
	}
	// Each of the four changes (add, disable, enable, delete) moved the
	// version the function reads; the refused ones did not.
	if v, err := s.Version(ctx); v != 4 || err != nil {
		t.Fatalf("version %d, %v; want 4", v, err)
	}
}

// TestRuleAddedAndRemovedAtRuntime runs the CEP handler with its rules in
// the table: a rule added while it runs is seen by the next batch after
// RefreshInterval and reads the events that arrive from ActivationDelay
// after it was added on; deleted, it reads none arriving from
// ActivationDelay after that; with the local runner's timing, 2 s after
// each change (the handler re-reads the rules every second).
func TestRuleAddedAndRemovedAtRuntime(t *testing.T) {
	for _, tt := range timings {
		t.Run(tt.name, func(t *testing.T) { testRuleAddedAndRemovedAtRuntime(t, tt.tm) })
	}
}

func testRuleAddedAndRemovedAtRuntime(t *testing.T, tm Timing) {
	ctx := context.Background()
	c := &clock{t: base}
	store := NewStore(db, newRulesTable(t), c.now).WithTiming(tm)
	delay := tm.ActivationDelay()
	table, out := name("cep-state"), name("matches")
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	keyedtest.CreateStream(t, kin, out, 1)
	cfg := &Config{Name: "runtime", IdleTimeout: time.Minute}
	h := NewHandler(cfg, state.NewViews(db, table, nil), kin, out, store, c.now, keyed.WithLogger(quiet)).WithTiming(tm)
	seq := 0
	send := func(id string, amount int) {
		t.Helper()
		seq++
		e := stream.Envelope{ID: id, Type: "payment", Key: "acct", OccurredAt: c.now(), SentAt: c.now(), ReceivedAt: c.now(),
			Data: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, amount))}
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: kinesisRecords([]shardRecord{{shard: "shardId-000000000000", seq: seq, env: e}})})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %v %v", resp, err)
		}
	}
	send("before", 1000) // no rules yet
	if _, _, err := store.Add(ctx, rule(t, `{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`)); err != nil {
		t.Fatal(err)
	}
	c.add(delay - time.Second)
	send("too-early", 1000) // arrives before the rule applies
	c.add(time.Second)
	send("first", 1000) // the handler's copy is older than RefreshInterval: it reads the rule
	send("small", 10)
	if _, err := store.Delete(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	c.add(delay - time.Second)
	send("last", 5000) // still applies
	c.add(time.Second)
	send("after", 5000) // arrives once the deletion applies
	c.add(time.Minute)
	if _, err := h.Tick(ctx, c.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tick(ctx, c.now().Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := describeMatches(t, keyedtest.ReadAll(t, kin, out))
	if strings.Join(got, " ") != "big:acct:first big:acct:last" {
		t.Fatalf("matches %v, want first and last", got)
	}
}

func urlRequest(method, path, body string) events.LambdaFunctionURLRequest {
	var r events.LambdaFunctionURLRequest
	r.RawPath, r.Body = path, body
	r.RequestContext.HTTP.Method = method
	return r
}

func TestAdminRoutes(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	call := func(method, path, body string, want int) map[string]any {
		t.Helper()
		resp, err := a.Handle(ctx, urlRequest(method, path, body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, resp.Body, want)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	bad := call("POST", "/rules", `{"id":"r","pattern":[{"begin":"a","type":"x"},{"followedBy":"b","type":"y","where":"data.amount => 5"}],"within":"1m"}`, http.StatusBadRequest)
	if bad["part"] != "pattern[1].where" {
		t.Fatalf("bad rule answer %v", bad)
	}
	ok := call("POST", "/rules", `{"id":"unpaid","pattern":[{"begin":"o","type":"order"},{"notFollowedBy":"p","type":"payment"}],"within":"15m"}`, http.StatusCreated)
	if ok["appliesFrom"] != base.Add(ActivationDelay).Format(time.RFC3339) {
		t.Fatalf("added: %v", ok)
	}
	call("POST", "/rules", `{"id":"unpaid","pattern":[{"begin":"o","type":"order"}]}`, http.StatusConflict)
	if list := call("GET", "/rules", "", http.StatusOK)["rules"].([]any); len(list) != 1 {
		t.Fatalf("list %v", list)
	}
	call("POST", "/rules/unpaid/disable", "", http.StatusOK)
	call("POST", "/rules/unpaid/disable", "", http.StatusConflict)
	call("DELETE", "/rules/unpaid", "", http.StatusOK)
	call("GET", "/rules/nope", "", http.StatusNotFound)
	call("PUT", "/rules", "", http.StatusNotFound)
	test := call("POST", "/test", `{"rules":[{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}],
		"events":[{"id":"1","type":"payment","key":"a","occurredAt":"2026-11-29T10:00:00Z","sentAt":"2026-11-29T10:00:00Z","data":{"amount":150}},
		          {"id":"2","type":"payment","key":"a","occurredAt":"2026-11-29T10:00:01Z","sentAt":"2026-11-29T10:00:01Z","data":{"amount":50}}]}`, http.StatusOK)
	if ms := test["matches"].([]any); len(ms) != 1 {
		t.Fatalf("test: %v", test)
	}
	badTest := call("POST", "/test", `{"rules":[{"id":"x","pattern":[{"begin":"a","type":"t","where":"data.x >"}]}],"events":[]}`, http.StatusBadRequest)
	if badTest["part"] != "rules[0].pattern[0].where" {
		t.Fatalf("bad test: %v", badTest)
	}
}

// TestBackfillRunsARuleOverThePast puts events on a stream, then treats a
// rule as having become active just before the last of them: the backfill
// emits the matches that begin before that moment, one completed by the
// event after it included, and starts none there.
func TestBackfillRunsARuleOverThePast(t *testing.T) {
	ctx := context.Background()
	evStream, matches := name("events"), name("matches")
	keyedtest.CreateStream(t, kin, evStream, 1)
	keyedtest.CreateStream(t, kin, matches, 1)
	start := time.Now().UTC()
	put := func(es ...stream.Envelope) {
		var entries []kintypes.PutRecordsRequestEntry
		for _, e := range es {
			at := time.Now().UTC()
			e.OccurredAt, e.SentAt, e.ReceivedAt = at, at, time.Time{}
			b, _ := json.Marshal(e)
			entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
		}
		if _, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(evStream), Records: entries}); err != nil {
			t.Fatal(err)
		}
	}
	put(ev("o1", "order", "a", 0, ""), ev("p1", "payment", "a", 0, ""), ev("o2", "order", "b", 0, ""))
	time.Sleep(1100 * time.Millisecond)
	activeFrom := time.Now().UTC()
	time.Sleep(100 * time.Millisecond)
	put(ev("p2", "payment", "b", 0, ""), ev("o3", "order", "c", 0, ""), ev("p3", "payment", "c", 0, ""))
	r := rule(t, `{"id":"paid","pattern":[{"begin":"o","type":"order"},{"followedBy":"p","type":"payment"}],"within":"1m"}`)
	sr := &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: activeFrom}}}
	res, err := Backfill(ctx, kin, sr, BackfillOptions{Stream: evStream, Matches: matches, From: start.Add(-time.Minute), IdleTimeout: time.Nanosecond,
		Now: func() time.Time { return time.Now().Add(time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	got := describeMatches(t, keyedtest.ReadAll(t, kin, matches))
	if strings.Join(got, " ") != "paid:a:o1,p1 paid:b:o2,p2" || res.Records != 6 {
		t.Fatalf("backfill: %v, %d records read (o3,p3 begin after the rule applies: the live function's)", got, res.Records)
	}
	// An idle timeout below zero would move the watermark past now and
	// close matches that may still complete: refused before any read.
	for _, o := range []BackfillOptions{{IdleTimeout: -100 * time.Hour}, {IdleTimeout: 0}, {IdleTimeout: time.Minute, OutOfOrderness: -time.Second}} {
		o.Stream, o.Matches, o.From = evStream, matches, start.Add(-time.Minute)
		if _, err := Backfill(ctx, kin, sr, o); err == nil || !strings.Contains(err.Error(), "idleTimeout") {
			t.Errorf("backfill with idleTimeout %s, outOfOrderness %s: %v, want it refused", o.IdleTimeout, o.OutOfOrderness, err)
		}
	}
}

// TestBackfillSkipsWhatDetectSetsAside puts on the events stream, written
// straight to it as a producer may, an order, an event whose receivedAt is
// two hours after Kinesis took it, and the order's payment. detect sets the
// middle one aside (stream.MaxReceivedLead): it moves no watermark, and the
// payment cancels the "unpaid" absence. The backfill must decide the same,
// not take the record, jump the watermark two hours and fire a false
// "unpaid" alert for a paid order.
func TestBackfillSkipsWhatDetectSetsAside(t *testing.T) {
	ctx := context.Background()
	evStream, matches := name("events"), name("matches")
	keyedtest.CreateStream(t, kin, evStream, 1)
	keyedtest.CreateStream(t, kin, matches, 1)
	start := time.Now().UTC()
	var entries []kintypes.PutRecordsRequestEntry
	for _, e := range []stream.Envelope{ev("o1", "order", "a", 0, ""), ev("x1", "page_view", "b", 0, ""), ev("p1", "payment", "a", 0, "")} {
		at := time.Now().UTC()
		e.OccurredAt, e.SentAt, e.ReceivedAt = at, at, time.Time{}
		if e.ID == "x1" {
			e.ReceivedAt = at.Add(2 * time.Hour)
		}
		b, _ := json.Marshal(e)
		entries = append(entries, kintypes.PutRecordsRequestEntry{Data: b, PartitionKey: aws.String(e.Key)})
	}
	if _, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(evStream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	r := rule(t, `{"id":"unpaid","pattern":[{"begin":"o","type":"order"},{"notFollowedBy":"p","type":"payment"}],"within":"1m"}`)
	sr := &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Now().UTC()}}}
	res, err := Backfill(ctx, kin, sr, BackfillOptions{Stream: evStream, Matches: matches, From: start.Add(-time.Minute), IdleTimeout: time.Minute,
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeMatches(t, keyedtest.ReadAll(t, kin, matches)); len(got) != 0 || res.Records != 2 {
		t.Fatalf("backfill: matches %v, %d records read; want none (o1 was paid), 2 records (x1 is set aside by detect)", got, res.Records)
	}
}

// pagedKinesis reads the events stream a few records a page and fails
// the read after failAt pages (0: never): a backfill that meets expired
// credentials or a deleted stream partway.
type pagedKinesis struct {
	*kinesis.Client
	pages, failAt int
}

func (p *pagedKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if p.pages++; p.failAt > 0 && p.pages > p.failAt {
		return nil, errors.New("the security token included in the request is expired")
	}
	in.Limit = aws.Int32(2)
	return p.Client.GetRecords(ctx, in, opts...)
}

// TestBackfillPutsMatchesAsItReads runs a filter rule over ten payments
// read two a page, the read failing after three pages: the matches of
// those pages are on the matches stream already, as the result counts
// them, rather than held until the whole stream is read (a long backfill
// held every match in memory, and one failing late put none). Run again,
// it puts all ten, each once.
func TestBackfillPutsMatchesAsItReads(t *testing.T) {
	ctx := context.Background()
	evStream, matches := name("events"), name("matches")
	keyedtest.CreateStream(t, kin, evStream, 1)
	keyedtest.CreateStream(t, kin, matches, 1)
	start := time.Now().UTC()
	for i := range 10 {
		e := ev(fmt.Sprintf("p%d", i), "payment", fmt.Sprintf("k%d", i%3), 0, "")
		at := start.Add(time.Duration(i) * time.Millisecond)
		e.OccurredAt, e.SentAt, e.ReceivedAt = at, at, time.Time{}
		b, _ := json.Marshal(e)
		if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(evStream), Data: b, PartitionKey: aws.String(e.Key)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	r := rule(t, `{"id":"pay","pattern":[{"begin":"p","type":"payment"}]}`)
	sr := &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Now().UTC()}}}
	opts := BackfillOptions{Stream: evStream, Matches: matches, From: start.Add(-time.Minute), IdleTimeout: time.Minute,
		Now: func() time.Time { return time.Now().Add(time.Hour) }}
	res, err := Backfill(ctx, &pagedKinesis{Client: kin, failAt: 3}, sr, opts)
	if err == nil || res == nil {
		t.Fatalf("backfill with the read failing after 3 pages: %+v, %v; want the error and what was done", res, err)
	}
	got := describeMatches(t, keyedtest.ReadAll(t, kin, matches))
	if len(got) == 0 || len(got) != res.Matches || res.Records != 6 {
		t.Fatalf("after 3 pages of 2: %d matches on the stream %v, %d counted, %d records read; want the matches the pages made put and counted, 6 records",
			len(got), got, res.Matches, res.Records)
	}
	res, err = Backfill(ctx, &pagedKinesis{Client: kin}, sr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := describeMatches(t, keyedtest.ReadAll(t, kin, matches)); len(got) != 10 || res.Matches != 10 {
		t.Fatalf("run again: %d distinct matches on the stream, %d counted; want each of the 10 payments", len(got), res.Matches)
	}
}

// countingSource counts the reads a handler makes of its rules.
type countingSource struct {
	RuleSource
	versions, lists int
}

func (c *countingSource) Version(ctx context.Context) (int64, error) {
	c.versions++
	return c.RuleSource.Version(ctx)
}

func (c *countingSource) List(ctx context.Context) ([]*StoredRule, error) {
	c.lists++
	return c.RuleSource.List(ctx)
}

// TestRefreshScansOnlyWhenTheRulesChanged: a warm handler reads the rules
// table's version every RefreshInterval and scans the rules only when a
// change moved it, so a quiet rules table costs one small read per
// interval, not a scan of every rule.
func TestRefreshScansOnlyWhenTheRulesChanged(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	store := NewStore(db, newRulesTable(t), c.now)
	src := &countingSource{RuleSource: store}
	h := NewHandler(&Config{Name: "refresh", IdleTimeout: time.Minute}, state.NewViews(db, name("unused"), nil), kin, name("unused"), src, c.now, keyed.WithLogger(quiet))
	step := func(d time.Duration, versions, lists int) {
		t.Helper()
		c.add(d)
		if err := h.Refresh(ctx, false); err != nil {
			t.Fatal(err)
		}
		if src.versions != versions || src.lists != lists {
			t.Fatalf("after %s: %d version reads, %d scans; want %d, %d", d, src.versions, src.lists, versions, lists)
		}
	}
	step(0, 1, 1)               // cold: reads the rules
	step(time.Second, 1, 1)     // within RefreshInterval: nothing read
	step(RefreshInterval, 2, 1) // unchanged: the version only
	step(RefreshInterval, 3, 1) // still unchanged
	if _, _, err := store.Add(ctx, rule(t, `{"id":"big","pattern":[{"begin":"p","type":"payment"}]}`)); err != nil {
		t.Fatal(err)
	}
	step(time.Second, 3, 1)     // not yet due
	step(RefreshInterval, 4, 2) // the version moved: the rules are read again
	if got := len(h.Operator().Rules().indexed); got != 1 {
		t.Fatalf("%d rules indexed after the refresh, want 1", got)
	}
	step(RefreshInterval, 5, 2)
}

// TestListIsPaged: GET /rules answers at most MaxListAnswerBytes, the rules
// by id, with "next" naming the last one listed while more follow; the
// pages together list every rule once. MaxRules rules of 8 KB would be a
// 16 MB answer, past a function URL's 6 MB; these, of some 1.2 KB, 2.4 MB.
func TestListIsPaged(t *testing.T) {
	c := &clock{t: base}
	a := NewAdmin(nil, c.now, quiet)
	var rules []*StoredRule
	for i := range MaxRules {
		id := fmt.Sprintf("r%04d", i)
		doc := fmt.Sprintf(`{"id":%q,"description":%q,"pattern":[{"begin":"a","type":"x"}]}`, id, strings.Repeat("d", 1000))
		rules = append(rules, &StoredRule{Rule: rule(t, doc), Status: StatusActive, Intervals: []Interval{{From: base}}, Version: 1})
	}
	var listed []string
	after, pages := "", 0
	for {
		pages++
		resp := a.list(rules, after)
		if resp.StatusCode != http.StatusOK || len(resp.Body) > MaxListAnswerBytes {
			t.Fatalf("page %d: status %d, %d bytes (at most %d)", pages, resp.StatusCode, len(resp.Body), MaxListAnswerBytes)
		}
		var page struct {
			Rules []RuleView `json:"rules"`
			Next  string     `json:"next"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &page); err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			listed = append(listed, r.ID)
		}
		if page.Next == "" {
			break
		}
		if page.Next != listed[len(listed)-1] {
			t.Fatalf("page %d: next %q, want the last rule listed %q", pages, page.Next, listed[len(listed)-1])
		}
		after = page.Next
	}
	if pages < 3 || len(listed) != len(rules) || !slices.IsSorted(listed) || len(slices.Compact(slices.Clone(listed))) != len(rules) {
		t.Errorf("%d pages listed %d rules (want all %d, once each, by id, over several pages)", pages, len(listed), len(rules))
	}
}

// TestListAfterAnIdOfNoRule: after names a place in the order of ids, not
// a rule that must still be there. A client paging the list names the last
// rule of the page before, which may be gone by the next request (its
// tombstone expired); refusing it would leave the client no way on but to
// start again. A well-formed id of no rule lists the rules sorting after
// it; one that is no id's form is refused (TestRulesAPIRefusesARepeatedParameter).
func TestListAfterAnIdOfNoRule(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	a := NewAdmin(NewStore(db, newRulesTable(t), c.now), c.now, quiet)
	for _, id := range []string{"a", "c"} {
		if resp, err := a.Handle(ctx, urlRequest("POST", "/rules", `{"id":"`+id+`","pattern":[{"begin":"p","type":"payment"}]}`)); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("adding %s: %v %+v", id, err, resp)
		}
	}
	for after, want := range map[string][]string{"b": {"c"}, "a0": {"c"}, "x999": {}, "0": {"a", "c"}} {
		req := urlRequest("GET", "/rules", "")
		req.QueryStringParameters, req.RawQueryString = map[string]string{"after": after}, "after="+after
		resp, err := a.Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Rules []RuleView `json:"rules"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &page); err != nil {
			t.Fatalf("after=%s: %d %s: %v", after, resp.StatusCode, resp.Body, err)
		}
		got := []string{}
		for _, r := range page.Rules {
			got = append(got, r.ID)
		}
		if resp.StatusCode != http.StatusOK || !slices.Equal(got, want) {
			t.Errorf("GET /rules?after=%s: %d %v, want 200 %v", after, resp.StatusCode, got, want)
		}
	}
}

// TestEnablingIsBounded: a rule keeps each stretch of time it was enabled,
// one more at each enable; past MaxIntervals enabling it again is refused
// naming intervals, and it can still be disabled and deleted (its item
// would otherwise grow past DynamoDB's 400 KB, and then neither could be).
func TestEnablingIsBounded(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	table := newRulesTable(t)
	s := NewStore(db, table, c.now)
	if _, _, err := s.Add(ctx, rule(t, `{"id":"r","pattern":[{"begin":"a","type":"x"}]}`)); err != nil {
		t.Fatal(err)
	}
	// The intervals MaxIntervals-1 disable/enable rounds would leave,
	// written as the store writes them.
	sr, err := s.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < MaxIntervals; i++ {
		sr.Intervals[len(sr.Intervals)-1].Until = base.Add(time.Duration(2*i) * time.Minute)
		sr.Intervals = append(sr.Intervals, Interval{From: base.Add(time.Duration(2*i+1) * time.Minute)})
	}
	item, err := itemOf(sr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	c.add(24 * time.Hour)
	if _, err := s.Disable(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Enable(ctx, "r")
	var re *RuleError
	if !errors.As(err, &re) || re.Part != "intervals" {
		t.Fatalf("enable past %d intervals: %v, want a RuleError naming intervals", MaxIntervals, err)
	}
	if _, err := s.Delete(ctx, "r"); err != nil {
		t.Errorf("delete: %v", err)
	}
}

// TestListReadsNoMoreThanARulesTableHolds: List of a table holding more
// items than a rules table can (rules list -table <the events table>) is
// refused once the scan passes that many, rather than scanning it to its
// end and saying it holds no rules.
func TestListReadsNoMoreThanARulesTableHolds(t *testing.T) {
	ctx := context.Background()
	table := newRulesTable(t)
	s := NewStore(db, table, nil)
	s.maxRules = 3
	for _, id := range []string{"r1", "r2", "r3"} {
		if _, _, err := s.Add(ctx, rule(t, `{"id":"`+id+`","pattern":[{"begin":"a","type":"x"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err := s.List(ctx); err != nil || len(rules) != 3 {
		t.Fatalf("a full rules table: %d rules, %v; want 3", len(rules), err)
	}
	for i := range 10 {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			attrID: &types.AttributeValueMemberS{Value: fmt.Sprintf("not-a-rule-%d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err := s.List(ctx); err == nil || !strings.Contains(err.Error(), "it holds more than 4 items, more than a rules table does") {
		t.Errorf("a table of 14 items: %d rules, %v; want it refused", len(rules), err)
	}
}

// TestAddCountsItemsThatNoLongerParse: a rule item that no longer parses
// (left out of List) still takes a place: Add refuses the rule that would
// take the table past what List, and detect with it, reads.
func TestAddCountsItemsThatNoLongerParse(t *testing.T) {
	ctx := context.Background()
	table := newRulesTable(t)
	s := NewStore(db, table, nil)
	s.maxRules = 3
	for _, id := range []string{"r1", "r2"} {
		if _, _, err := s.Add(ctx, rule(t, `{"id":"`+id+`","pattern":[{"begin":"a","type":"x"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		attrID: &types.AttributeValueMemberS{Value: "broken"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Add(ctx, rule(t, `{"id":"r3","pattern":[{"begin":"a","type":"x"}]}`)); !errors.Is(err, ErrTooMany) {
		t.Errorf("adding a third rule beside two and an item that no longer parses: %v, want ErrTooMany", err)
	}
	if rules, err := s.List(ctx); err != nil || len(rules) != 2 {
		t.Errorf("List: %d rules, %v; want the two that parse", len(rules), err)
	}
}

// TestAddCannotPassTheLimitUnderARace: two adds that count the rules at
// once cannot both take the last place. One add is held between counting
// and writing while another takes the place; the held one's write, made at
// the version it counted at, is refused, and it counts again and is
// refused as too many. Another change (an add under the limit) between the
// count and the write only makes it count again.
func TestAddCannotPassTheLimitUnderARace(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	table := newRulesTable(t)
	s, other := NewStore(db, table, c.now), NewStore(db, table, c.now)
	s.maxRules, other.maxRules = 3, 3
	add := func(s *Store, id string) error {
		_, _, err := s.Add(ctx, rule(t, `{"id":"`+id+`","pattern":[{"begin":"a","type":"x"}]}`))
		return err
	}
	for _, id := range []string{"r1", "r2"} {
		if err := add(s, id); err != nil {
			t.Fatal(err)
		}
	}
	raced := false
	s.counted = func() {
		if !raced {
			raced = true
			if err := add(other, "r3"); err != nil {
				t.Fatalf("the racing add: %v", err)
			}
		}
	}
	if err := add(s, "r4"); !errors.Is(err, ErrTooMany) {
		t.Errorf("the held add: %v, want ErrTooMany (the other took the last place)", err)
	}
	if rules, err := s.List(ctx); err != nil || len(rules) != 3 {
		t.Fatalf("%d rules (%v), want 3: the limit", len(rules), err)
	}

	// Under the limit, a change in between makes the held add count again
	// and succeed.
	s.maxRules, other.maxRules, raced = 5, 5, false
	s.counted = func() {
		if !raced {
			raced = true
			if err := add(other, "r5"); err != nil {
				t.Fatalf("the racing add: %v", err)
			}
		}
	}
	if err := add(s, "r6"); err != nil {
		t.Errorf("the held add under the limit: %v", err)
	}
	if rules, err := s.List(ctx); err != nil || len(rules) != 5 {
		t.Fatalf("%d rules (%v), want 5", len(rules), err)
	}
}

// TestStoredRuleWithControlCharacterStillLoads: ParseRule now refuses a
// type or key holding a control character (such a rule never matched), but
// a rule an older version stored with one is still read, so a person can
// list it and delete it rather than find it gone from the list.
func TestStoredRuleWithControlCharacterStillLoads(t *testing.T) {
	ctx := context.Background()
	table := newRulesTable(t)
	s := NewStore(db, table, (&clock{t: base}).now)
	if _, err := ParseRule([]byte(`{"id":"r","pattern":[{"begin":"a","type":"pay\tment"}]}`)); err == nil {
		t.Fatal("ParseRule took a type with a tab")
	}
	if _, _, err := s.Add(ctx, rule(t, `{"id":"r","pattern":[{"begin":"a","type":"payment"}]}`)); err != nil {
		t.Fatal(err)
	}
	sr, err := s.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	item, err := itemOf(sr)
	if err != nil {
		t.Fatal(err)
	}
	item[attrDefinition] = &types.AttributeValueMemberS{Value: `{"id":"r","pattern":[{"begin":"a","type":"pay\tment"}]}`}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	rules, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Rule.Steps[0].Type != "pay\tment" {
		t.Fatalf("listed %+v: want the stored rule with its tab", rules)
	}
	if _, err := s.Delete(ctx, "r"); err != nil {
		t.Errorf("delete: %v", err)
	}
}

// TestAddingTheSameRuleAgain: a client retrying POST /rules after a
// timeout, or a person rerunning `rules add`, asks for what is already
// stored: the answer is the stored rule (200, alreadyAdded), nothing is
// written (the rules' version and appliesFrom stay), whatever the
// whitespace, key order or spelling of a default. The same id with another
// definition, a disabled rule and a deleted rule's id are still refused,
// the first naming the part that differs.
func TestAddingTheSameRuleAgain(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	s := NewStore(db, newRulesTable(t), c.now)
	a := NewAdmin(s, c.now, quiet)
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := a.Handle(ctx, urlRequest("POST", "/rules", body))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, v
	}
	const def = `{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`
	if code, v := post(def); code != http.StatusCreated {
		t.Fatalf("first add: %d %v", code, v)
	}
	version, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applies := base.Add(ActivationDelay).Format(time.RFC3339)
	c.add(time.Minute)
	for _, again := range []string{
		def,
		// The same rule written otherwise: spaces, key order, the where
		// clause spaced differently, the default afterMatch spelled out,
		// the keys and the in list in another order, a value of the list
		// given twice.
		`{ "within": "10m0s", "id": "big", "keys": ["b", "a"], "afterMatch": "skipPastLastEvent", "description": "big payments",
		   "pattern": [{"type": "payment", "begin": "p", "where": "data.amount>100.0 && data.tier in (\"platinum\",'gold', 'platinum')"}, {"followedBy": "q", "type": "refund"}] }`,
	} {
		code, v := post(again)
		if code != http.StatusOK || v["alreadyAdded"] != true || v["appliesFrom"] != applies {
			t.Errorf("adding it again as %.60s…: %d %v; want 200, alreadyAdded, appliesFrom %s", again, code, v, applies)
		}
		if rule, _ := v["rule"].(map[string]any); rule == nil || rule["version"] != float64(1) {
			t.Errorf("adding it again: rule %v; want the stored rule at version 1", v["rule"])
		}
	}
	if now, err := s.Version(ctx); err != nil || now != version {
		t.Errorf("the rules' version after adding the same rule again: %d (%v), want %d (nothing changed)", now, err, version)
	}
	for _, c := range []struct{ body, part string }{
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 200 && data.tier in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "pattern[0].where"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'silver')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "pattern[0].where"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "pattern[0].where"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier not in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "pattern[0].where"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"11m","keys":["a","b"]}`, "within"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a"]}`, "keys"},
		{`{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'platinum')"},{"followedBy":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "description"},
		{`{"id":"big","description":"big payments","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100 && data.tier in ('gold', 'platinum')"},{"next":"q","type":"refund"}],"within":"10m","keys":["a","b"]}`, "pattern[1]"},
	} {
		code, v := post(c.body)
		if msg, _ := v["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "another definition") || !strings.Contains(msg, c.part+" differs") {
			t.Errorf("the same id with another %s: %d %v; want 409 naming %s", c.part, code, v, c.part)
		}
	}
	if _, err := s.Disable(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if code, v := post(def); code != http.StatusConflict || !strings.Contains(fmt.Sprint(v["error"]), "disabled") {
		t.Errorf("adding a disabled rule again: %d %v; want 409 saying it is disabled", code, v)
	}
	if _, err := s.Delete(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if code, v := post(def); code != http.StatusConflict || !strings.Contains(fmt.Sprint(v["error"]), "deleted (a deleted rule's id is kept for 8 days)") {
		t.Errorf("adding a deleted rule's id again: %d %v; want 409 saying it was deleted", code, v)
	}
}

// TestAddingAgainRacesAndFillsNoPlace: the same add twice at once (a
// client's retry while its first request still runs) is done already for
// the second, whose write meets the first's item; and adding again a rule
// of a full table is done already, not refused as one too many.
func TestAddingAgainRacesAndFillsNoPlace(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	table := newRulesTable(t)
	s, other := NewStore(db, table, c.now), NewStore(db, table, c.now)
	s.maxRules, other.maxRules = 2, 2
	const def = `{"id":"r1","pattern":[{"begin":"a","type":"x"}]}`
	s.counted = func() {
		s.counted = nil
		if _, added, err := other.Add(ctx, rule(t, def)); err != nil || !added {
			t.Fatalf("the racing add: added %v, %v", added, err)
		}
		c.add(time.Minute) // the held add, were it written, would apply a minute later
	}
	sr, added, err := s.Add(ctx, rule(t, def))
	if err != nil || added || !sr.Intervals[0].From.Equal(base.Add(ActivationDelay)) {
		t.Fatalf("the held add: %+v, added %v, %v; want the racing add's rule, done already", sr, added, err)
	}
	if _, _, err := s.Add(ctx, rule(t, `{"id":"r2","pattern":[{"begin":"a","type":"x"}]}`)); err != nil {
		t.Fatal(err)
	}
	version, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, added, err := s.Add(ctx, rule(t, def)); err != nil || added {
		t.Errorf("adding again a rule of a full table: added %v, %v; want done already", added, err)
	}
	if _, _, err := s.Add(ctx, rule(t, `{"id":"r3","pattern":[{"begin":"a","type":"x"}]}`)); !errors.Is(err, ErrTooMany) {
		t.Errorf("a new rule in a full table: %v, want ErrTooMany", err)
	}
	if now, err := s.Version(ctx); err != nil || now != version {
		t.Errorf("the rules' version: %d (%v), want %d", now, err, version)
	}
}

// TestAddingAgainARuleEnabledAgain: a rule disabled and enabled again
// reads events from when it was enabled again, not from when it was first
// added (it read none in between): adding it again answers that time as
// appliesFrom, as the rule's list and status say, not its first.
func TestAddingAgainARuleEnabledAgain(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: base}
	s := NewStore(db, newRulesTable(t), c.now)
	a := NewAdmin(s, c.now, quiet)
	const def = `{"id":"again","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`
	if resp, err := a.Handle(ctx, urlRequest("POST", "/rules", def)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("first add: %v %v", resp, err)
	}
	c.add(time.Hour)
	if _, err := s.Disable(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	c.add(time.Hour)
	if _, err := s.Enable(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	enabledFrom := c.now().Add(ActivationDelay)
	c.add(time.Minute)
	resp, err := a.Handle(ctx, urlRequest("POST", "/rules", def))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		AlreadyAdded bool      `json:"alreadyAdded"`
		AppliesFrom  time.Time `json:"appliesFrom"`
		Note         string    `json:"note"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !v.AlreadyAdded || !v.AppliesFrom.Equal(enabledFrom) || !strings.Contains(v.Note, enabledFrom.UTC().Format(time.RFC3339)) {
		t.Errorf("adding again a rule enabled again: %d %s; want 200, alreadyAdded, appliesFrom %s (when it was enabled again) in the answer and its note", resp.StatusCode, resp.Body, enabledFrom.UTC().Format(time.RFC3339))
	}
}
