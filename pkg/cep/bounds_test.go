package cep

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/putback"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// memStream is an output stream in memory: the distinct records put on it
// by id (a resent record has the same id and bytes).
type memStream struct {
	mu   sync.Mutex
	byID map[string][]byte
}

func (m *memStream) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID == nil {
		m.byID = map[string][]byte{}
	}
	out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(0)}
	for _, e := range in.Records {
		var env stream.Envelope
		if err := stream.Unmarshal(e.Data, &env); err != nil {
			return nil, err
		}
		m.byID[env.ID] = e.Data
		out.Records = append(out.Records, kintypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

func (m *memStream) records() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]byte, 0, len(m.byID))
	for _, b := range m.byID {
		out = append(out, b)
	}
	return out
}

// TestSumOverflowIsSetAsideNamingTheField sends payments whose amounts no
// sum can hold to two sum rules of one key (one with a threshold only an
// overflowing sum reaches): each such record is set aside once, naming
// data.amount, as aggregate refuses a value past ±2^53; no batch or tick
// fails, and the key's later payments still match.
func TestSumOverflowIsSetAsideNamingTheField(t *testing.T) {
	rules := []*Rule{
		rule(t, `{"id":"huge","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1.5e308}],"within":"1h"}`),
		rule(t, `{"id":"spend","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1000}],"within":"1h"}`),
	}
	for _, c := range []struct {
		name    string
		amounts []string // the first len(amounts)-2 are refused; then 600 and 500
		kind    string
		reason  string
	}{
		{"two payments of 1e308", []string{"1e308", "1e308"}, setaside.KindOverflow, "without overflow"},
		{"a payment just past 2^53", []string{"-9007199254740994"}, setaside.KindOverflow, "without overflow"},
		{"a number no float64 holds", []string{"1e400"}, setaside.KindInvalid, "not a finite 64-bit number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h, out, quarantine := sumHandler(t, rules)
			var recs []shardRecord
			for i, a := range append(c.amounts, "600", "500") {
				recs = append(recs, shardRecord{shard: "shardId-000000000000", seq: 100 + i,
					env: ev(fmt.Sprintf("pay-%d", i), "payment", "acct-1", float64(i), `{"amount":`+a+`}`)})
			}
			krecs := kinesisRecords(recs)
			// One batch per record, then the whole history redelivered.
			for _, b := range append(chunks(krecs, 1), krecs) {
				resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: b})
				if err != nil || len(resp.BatchItemFailures) > 0 {
					t.Fatalf("batch at %s: %+v %v; want every record reported processed", b[0].Kinesis.SequenceNumber, resp, err)
				}
			}
			for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
				if _, err := h.Tick(ctx, at); err != nil {
					t.Fatalf("tick: %v", err)
				}
			}
			last := len(krecs) - 1
			want := fmt.Sprintf("spend:acct-1:pay-%d,pay-%d", last-1, last)
			if got := strings.Join(describeMatches(t, out.records()), " "); got != want {
				t.Errorf("matches %q, want %q", got, want)
			}
			for i := range c.amounts {
				it, err := setaside.Load(ctx, db, quarantine, krecs[i].EventSourceArn+"/shardId-000000000000", krecs[i].Kinesis.SequenceNumber)
				if err != nil || it == nil {
					t.Fatalf("payment of %s not set aside: %v", c.amounts[i], err)
				}
				if it.Field != "data.amount" || it.Category != c.kind || !strings.Contains(it.Reason, c.reason) || !strings.Contains(it.Reason, "pay-") {
					t.Errorf("payment of %s set aside as field %q kind %q reason %q; want data.amount, %s, a reason naming the record and saying %q",
						c.amounts[i], it.Field, it.Category, it.Reason, c.kind, c.reason)
				}
			}
		})
	}
}

// TestSumRefusalLeavesOtherRulesReading sends a payment whose amount no sum
// can hold to a key read by a sum rule, a sequence and a count: only the
// sum rule skips it. The record is set aside once, naming data.amount and
// the sum rule; the sequence and the count still match it, as they would
// any payment, and the sum rule still matches the payments after it.
func TestSumRefusalLeavesOtherRulesReading(t *testing.T) {
	ctx := context.Background()
	rules := []*Rule{
		rule(t, `{"id":"spend","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1000}],"within":"1h"}`),
		rule(t, `{"id":"fail-then-pay","pattern":[{"begin":"f","type":"payment_failed"},{"followedBy":"p","type":"payment"}],"within":"1h"}`),
		rule(t, `{"id":"pays","pattern":[{"begin":"p","type":"payment","timesOrMore":2}],"within":"1h"}`),
	}
	h, out, quarantine := sumHandler(t, rules)
	krecs := kinesisRecords([]shardRecord{
		{shard: "shardId-000000000000", seq: 100, env: ev("fail-1", "payment_failed", "acct-1", 0, "")},
		{shard: "shardId-000000000000", seq: 101, env: ev("pay-1", "payment", "acct-1", 1, `{"amount":1e308}`)},
		{shard: "shardId-000000000000", seq: 102, env: ev("pay-2", "payment", "acct-1", 2, `{"amount":600}`)},
		{shard: "shardId-000000000000", seq: 103, env: ev("pay-3", "payment", "acct-1", 3, `{"amount":500}`)},
	})
	for _, b := range append(chunks(krecs, 1), krecs) {
		resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: b})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch at %s: %+v %v; want every record reported processed", b[0].Kinesis.SequenceNumber, resp, err)
		}
	}
	for _, at := range []time.Time{base.Add(24 * time.Hour), base.Add(25 * time.Hour)} {
		if _, err := h.Tick(ctx, at); err != nil {
			t.Fatalf("tick: %v", err)
		}
	}
	want := "fail-then-pay:acct-1:fail-1,pay-1 pays:acct-1:pay-1,pay-2 spend:acct-1:pay-2,pay-3"
	if got := strings.Join(describeMatches(t, out.records()), " "); got != want {
		t.Errorf("matches %q, want %q", got, want)
	}
	for i, r := range krecs {
		it, err := setaside.Load(ctx, db, quarantine, r.EventSourceArn+"/shardId-000000000000", r.Kinesis.SequenceNumber)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i != 1 && it != nil:
			t.Errorf("record %s set aside (%s: %s); only pay-1 should be", r.Kinesis.SequenceNumber, it.Field, it.Reason)
		case i == 1 && it == nil:
			t.Errorf("pay-1, whose amount the sum rule cannot add, is not set aside")
		case i == 1 && (it.Field != "data.amount" || it.Category != setaside.KindOverflow || !strings.Contains(it.Reason, `sum rule "spend" cannot add it, so it skips this event;`) || !strings.Contains(it.Reason, "pay-1")):
			t.Errorf("pay-1 set aside as field %q kind %q reason %q; want data.amount, %s, a reason naming the record and the rule \"spend\"",
				it.Field, it.Category, it.Reason, setaside.KindOverflow)
		}
	}
	if s := h.Stats(); s.SetAside != 1 {
		t.Errorf("%d records counted set aside; want 1 (pay-1, once, though its batch came twice)", s.SetAside)
	}
}

// TestSumRefusalReadByOtherRulesCannotBePutBack: an event set aside for a
// sum rule that cannot add its value, while other rules read it, had its
// event id taken by detect's dedupe ledger; its item says so (IDTaken),
// and putback refuses it, since the corrected copy a put-back sends
// would only come back as duplicate-conflict (as a trial saw). One no
// other rule reads took no id: it is offered, and its corrected copy is
// folded.
func TestSumRefusalReadByOtherRulesCannotBePutBack(t *testing.T) {
	ctx := context.Background()
	rules := []*Rule{
		rule(t, `{"id":"spend","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1000}],"within":"1h"}`),
		rule(t, `{"id":"pays","pattern":[{"begin":"p","type":"payment","timesOrMore":2}],"within":"1h"}`),
		rule(t, `{"id":"refunds","pattern":[{"begin":"r","type":"refund","sum":"data.amount","atLeast":1000}],"within":"1h"}`),
	}
	table, quarantine := name("cep-sum"), name("quarantine")
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Name: "sum", OutOfOrderness: time.Second, IdleTimeout: 10 * time.Second, DedupeHorizon: time.Hour}
	h := NewHandler(cfg, state.NewViews(db, table, nil), &memStream{}, "matches", newStaticRules(rules), func() time.Time { return base },
		keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine, setaside.WithFunction("Tributary-Detect"))),
		keyed.WithDedupe(keyed.NewLedger(db, table, cfg.Name, cfg.DedupeHorizon)))
	const shard = "shardId-000000000000"
	handle := func(recs ...shardRecord) []events.KinesisEventRecord {
		t.Helper()
		krecs := kinesisRecords(recs)
		if resp, err := h.HandleBatch(ctx, events.KinesisEvent{Records: krecs}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch: %+v %v; want every record reported processed", resp, err)
		}
		return krecs
	}
	load := func(r events.KinesisEventRecord) *setaside.Item {
		t.Helper()
		it, err := setaside.Load(ctx, db, quarantine, r.EventSourceArn+"/"+shard, r.Kinesis.SequenceNumber)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	first := handle(
		shardRecord{shard: shard, seq: 100, env: ev("pay-1", "payment", "acct-1", 1, `{"amount":1e400}`)},
		shardRecord{shard: shard, seq: 101, env: ev("ref-1", "refund", "acct-1", 2, `{"amount":1e400}`)},
	)
	pay, ref := load(first[0]), load(first[1])
	if pay == nil || ref == nil {
		t.Fatalf("set aside: pay-1 %v, ref-1 %v; want both", pay, ref)
	}
	if why := putback.Hopeless(pay); !pay.IDTaken || !strings.Contains(why, "took its event id in its dedupe ledger") ||
		!strings.Contains(why, "no put-back reaches only the part that skipped it") || !strings.Contains(why, "with a new id") ||
		!strings.Contains(why, `sum rule "spend"`) {
		t.Errorf("pay-1 (read by the rule pays too): idTaken %v, putback says %q; want it marked and refused, naming the rule and what to do instead", pay.IDTaken, why)
	}
	if why := putback.Hopeless(ref); ref.IDTaken || why != "" {
		t.Errorf("ref-1 (no other rule reads it): idTaken %v, putback says %q; want it offered", ref.IDTaken, why)
	}

	// What the refusal spares the user: pay-1 corrected comes back as a
	// duplicate-conflict; ref-1 corrected is folded.
	again := handle(
		shardRecord{shard: shard, seq: 200, env: ev("pay-1", "payment", "acct-1", 1, `{"amount":5}`)},
		shardRecord{shard: shard, seq: 201, env: ev("ref-1", "refund", "acct-1", 2, `{"amount":5}`)},
	)
	if it := load(again[0]); it == nil || it.Category != setaside.KindDuplicateConflict {
		t.Errorf("pay-1 corrected and sent again: set aside as %+v, want duplicate-conflict", it)
	}
	if it := load(again[1]); it != nil {
		t.Errorf("ref-1 corrected and sent again: set aside as %s (%s), want it folded", it.Category, it.Reason)
	}
}

// TestStoredInfiniteSumStillRenders loads a key's state whose outbox holds
// a sum match made before values past ±2^53 were set aside (its sum +Inf):
// the match renders, without the sum, so the key is not held back.
func TestStoredInfiniteSumStillRenders(t *testing.T) {
	r := rule(t, `{"id":"huge","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1.5e308}],"within":"1h"}`)
	op := NewOperator(NewRuleSet(newStaticRules([]*Rule{r}), base), func() time.Time { return base })
	blob := encodeCEP(nil, &cepState{out: []Match{{Rule: "huge", Kind: Sum, Sum: math.Inf(1),
		Events: []evRef{{id: "p1", typ: "payment", t: 1, v: 1e308}, {id: "p2", typ: "payment", t: 2, ord: 1, v: 1e308}}}}})
	st, err := op.NewState("acct-1", blob)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Render()
	if err != nil || len(recs) != 1 {
		t.Fatalf("render: %d records, %v; want the match", len(recs), err)
	}
	if b := string(recs[0].Data); !strings.Contains(b, `"count":2`) || strings.Contains(b, `"sum":`) {
		t.Errorf("match %s; want its 2 events and no sum", b)
	}
}

func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// TestTestAnswerIsBounded posts rule tests whose matches would not fit an
// answer: POST /test answers at most MaxTestMatches matches within
// MaxTestAnswerBytes, says it truncated them and how many there were, and
// allocates a bounded amount doing so; a test whose matches fit answers
// them all, not truncated.
func TestTestAnswerIsBounded(t *testing.T) {
	filters := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf(`{"id":"r%03d","pattern":[{"begin":"p","type":"payment"}]}`, i))
		}
		return out
	}
	payments := func(n int) []string {
		var out []string
		for i := range n {
			at := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
			out = append(out, fmt.Sprintf(`{"id":"pay-%04d","type":"payment","key":"acct-%d","occurredAt":%q,"sentAt":%q,"data":{"amount":%d}}`, i, i%7, at, at, i))
		}
		return out
	}
	for _, c := range []struct {
		name      string
		rules     []string
		events    []string
		found     int  // matches the rules make over the events
		truncated bool // the answer lists fewer
	}{
		{"100 filters × 2,000 payments", filters(100), payments(2000), 200_000, true},
		// Each of the 7 keys has 857 or 858 payments: 8 matches of each
		// rule, each listing 100 events (MaxListedEvents): the bytes run
		// out before the matches.
		{"counts listing 100 events each", []string{
			`{"id":"c101","pattern":[{"begin":"p","type":"payment","timesOrMore":101}],"within":"24h"}`,
			`{"id":"c102","pattern":[{"begin":"p","type":"payment","timesOrMore":102}],"within":"24h"}`,
			`{"id":"c103","pattern":[{"begin":"p","type":"payment","timesOrMore":103}],"within":"24h"}`,
		}, payments(6000), 3 * 7 * 8, true},
		{"3 filters × 20 payments", filters(3), payments(20), 60, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAdmin(nil, func() time.Time { return base }, quiet)
			body := `{"rules":[` + strings.Join(c.rules, ",") + `],"events":[` + strings.Join(c.events, ",") + `]}`
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resp, err := a.Handle(context.Background(), urlRequest("POST", "/test", body))
			runtime.ReadMemStats(&after)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("POST /test: %v %d %.300s", err, resp.StatusCode, resp.Body)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes in, %d bytes out, %d bytes allocated", len(body), len(resp.Body), alloc)
			var ans struct {
				Matches      []json.RawMessage `json:"matches"`
				MatchesFound *int              `json:"matchesFound"`
				Truncated    *bool             `json:"truncated"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &ans); err != nil {
				t.Fatal(err)
			}
			if len(resp.Body) > MaxTestAnswerBytes {
				t.Errorf("answer of %d bytes; at most %d", len(resp.Body), MaxTestAnswerBytes)
			}
			if ans.Truncated == nil || *ans.Truncated != c.truncated || ans.MatchesFound == nil || *ans.MatchesFound != c.found {
				t.Errorf("truncated %v, matchesFound %v; want %v and %d", deref(ans.Truncated), deref(ans.MatchesFound), c.truncated, c.found)
			}
			switch {
			case len(ans.Matches) > MaxTestMatches:
				t.Errorf("%d matches listed; at most %d", len(ans.Matches), MaxTestMatches)
			case c.truncated && len(ans.Matches) >= c.found, !c.truncated && len(ans.Matches) != c.found:
				t.Errorf("%d matches listed of %d found, truncated %v", len(ans.Matches), c.found, c.truncated)
			}
			// What the answer holds, and the request's own copies, bound
			// what it takes: not the matches found.
			if limit := uint64(64 << 20); alloc > limit {
				t.Errorf("%d bytes allocated answering; want at most %d", alloc, limit)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestTestStopsInTimeToAnswer: POST /test runs events only while more than
// testReserve is left before the invocation's deadline, and then answers
// what it has, saying how many events it ran and why it stopped, where a
// run past the deadline would end in the function URL's timeout and no
// answer. With time to spare it runs them all and says so.
func TestTestStopsInTimeToAnswer(t *testing.T) {
	a := NewAdmin(nil, func() time.Time { return base }, quiet)
	var evs []string
	for i := range 20 {
		at := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		evs = append(evs, fmt.Sprintf(`{"id":"o-%d","type":"order","key":"k","occurredAt":%q,"sentAt":%q}`, i, at, at))
	}
	body := `{"rules":[{"id":"unpaid","pattern":[{"begin":"o","type":"order"},{"notFollowedBy":"p","type":"payment"}],"within":"1m"}],"events":[` + strings.Join(evs, ",") + `]}`
	for _, c := range []struct {
		left    time.Duration // before the deadline
		ran     int
		stopped string
	}{
		{testReserve / 2, 0, "the function's time ran out after 0 of the 20 events"},
		{time.Hour, 20, ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), c.left)
		resp, err := a.Handle(ctx, urlRequest("POST", "/test", body))
		cancel()
		var ans struct {
			Matches   []json.RawMessage `json:"matches"`
			Events    int               `json:"events"`
			EventsRun int               `json:"eventsRun"`
			Stopped   string            `json:"stopped"`
		}
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &ans) != nil {
			t.Fatalf("%s left: %v %d %.300s", c.left, err, resp.StatusCode, resp.Body)
		}
		if ans.Events != 20 || ans.EventsRun != c.ran || !strings.Contains(ans.Stopped, c.stopped) || (c.stopped == "") != (ans.Stopped == "") {
			t.Errorf("%s left: events %d, eventsRun %d, stopped %q; want 20, %d, %q", c.left, ans.Events, ans.EventsRun, ans.Stopped, c.ran, c.stopped)
		}
		// Stopped early, the open partial matches are not closed: no
		// order is called unpaid on the strength of events not run.
		if want := map[bool]int{true: 0, false: 20}[c.stopped != ""]; len(ans.Matches) != want {
			t.Errorf("%s left: %d matches, want %d", c.left, len(ans.Matches), want)
		}
	}
}

// sumHandler is a detect handler running rules on tables of its own on
// the stand-in, setting records aside in the quarantine table it names.
func sumHandler(t *testing.T, rules []*Rule) (*Handler, *memStream, string) {
	t.Helper()
	ctx := context.Background()
	table, quarantine := name("cep-sum"), name("quarantine")
	if err := state.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	if err := setaside.CreateTable(ctx, db, quarantine); err != nil {
		t.Fatal(err)
	}
	out := &memStream{}
	cfg := &Config{Name: "sum", OutOfOrderness: time.Second, IdleTimeout: 10 * time.Second}
	h := NewHandler(cfg, state.NewViews(db, table, nil), out, "matches", newStaticRules(rules), func() time.Time { return base },
		keyed.WithLogger(quiet), keyed.WithSetAside(setaside.New(db, quarantine)))
	return h, out, quarantine
}
