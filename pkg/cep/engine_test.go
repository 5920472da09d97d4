package cep

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
)

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// ev is an event at base+sec (event time and arrival).
func ev(id, typ, key string, sec float64, data string) stream.Envelope {
	at := base.Add(time.Duration(sec * float64(time.Second)))
	if data == "" {
		data = "{}"
	}
	return stream.Envelope{ID: id, Type: typ, Key: key, OccurredAt: at, SentAt: at, ReceivedAt: at, Data: json.RawMessage(data)}
}

func rule(t *testing.T, doc string) *Rule {
	t.Helper()
	r, err := ParseRule([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run tests rules over events and names each match "rule:key:id,id".
func run(t *testing.T, rules []*Rule, ooo time.Duration, evs ...stream.Envelope) []string {
	t.Helper()
	ms, _, err := TestRules(rules, evs, ooo)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		var ids []string
		for _, e := range m.Data.Events {
			ids = append(ids, e.ID)
		}
		out = append(out, fmt.Sprintf("%s:%s:%s", m.Data.Rule, m.Key, strings.Join(ids, ",")))
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("matches:\n got %v\nwant %v", got, want)
	}
}

func TestEachRuleForm(t *testing.T) {
	t.Run("filter: a search stored long-term", func(t *testing.T) {
		r := rule(t, `{"id":"big","pattern":[{"begin":"p","type":"payment","where":"data.amount > 100"}]}`)
		expect(t, run(t, []*Rule{r}, 0,
			ev("1", "payment", "a", 0, `{"amount":50}`), ev("2", "payment", "a", 1, `{"amount":150}`),
			ev("3", "refund", "a", 2, `{"amount":500}`), ev("4", "payment", "b", 3, `{"amount":101}`)),
			"big:a:2", "big:b:4")
	})
	t.Run("sequence followedBy within", func(t *testing.T) {
		r := rule(t, `{"id":"fb","pattern":[{"begin":"fail","type":"payment_failed"},{"followedBy":"big","type":"payment","where":"data.amount > 100"}],"within":"10m"}`)
		expect(t, run(t, []*Rule{r}, 0,
			ev("f1", "payment_failed", "a", 0, ""), ev("x", "login", "a", 1, ""), ev("p1", "payment", "a", 2, `{"amount":20}`),
			ev("p2", "payment", "a", 5, `{"amount":120}`),                                                  // skips x and p1: relaxed contiguity
			ev("f2", "payment_failed", "a", 100, ""), ev("p3", "payment", "a", 100+601, `{"amount":500}`)), // 10m01s later: too late
			"fb:a:f1,p2")
	})
	t.Run("strict next", func(t *testing.T) {
		r := rule(t, `{"id":"nx","pattern":[{"begin":"cart","type":"add_to_cart"},{"next":"buy","type":"checkout"}],"within":"5m"}`)
		expect(t, run(t, []*Rule{r}, 0,
			ev("c1", "add_to_cart", "a", 0, ""), ev("v", "page_view", "a", 1, ""), ev("k1", "checkout", "a", 2, ""),
			ev("c2", "add_to_cart", "a", 10, ""), ev("c3", "add_to_cart", "a", 11, ""), ev("k2", "checkout", "a", 12, "")),
			"nx:a:c1,k1", "nx:a:c3,k2") // a page view is not of the rule's types; c3 broke c2's match
	})
	t.Run("absence", func(t *testing.T) {
		r := rule(t, `{"id":"unpaid","pattern":[{"begin":"order","type":"order_placed"},{"notFollowedBy":"paid","type":"payment"}],"within":"15m"}`)
		expect(t, run(t, []*Rule{r}, 0,
			ev("o1", "order_placed", "a", 0, ""), ev("pay1", "payment", "a", 300, ""),
			ev("o2", "order_placed", "a", 1200, ""), ev("x", "page_view", "a", 1500, ""),
			// b's payment comes exactly 15m after its order: past within,
			// as in Flink (a partial match times out at start + within).
			ev("o3", "order_placed", "b", 2000, ""), ev("pay3", "payment", "b", 2900, ""),
			ev("o4", "order_placed", "c", 2000, ""), ev("pay4", "payment", "c", 2899, "")), // 1 s before: paid
			"unpaid:a:o2", "unpaid:b:o3")
	})
	t.Run("count threshold", func(t *testing.T) {
		r := rule(t, `{"id":"brute","pattern":[{"begin":"f","type":"login_failed","timesOrMore":3}],"within":"1m"}`)
		expect(t, run(t, []*Rule{r}, 0,
			ev("1", "login_failed", "a", 0, ""), ev("2", "login_failed", "a", 30, ""), ev("3", "login_failed", "a", 70, ""), // 1 is out of 3's minute
			ev("4", "login_failed", "a", 80, ""), ev("5", "login_failed", "a", 85, ""), ev("6", "login_failed", "a", 86, "")),
			"brute:a:2,3,4") // then counting starts again: 5 and 6 are two
	})
	t.Run("sum threshold", func(t *testing.T) {
		r := rule(t, `{"id":"spend","pattern":[{"begin":"p","type":"payment","sum":"data.amount","atLeast":1000}],"within":"1h"}`)
		got := run(t, []*Rule{r}, 0,
			ev("1", "payment", "a", 0, `{"amount":400}`), ev("2", "payment", "a", 60, `{"amount":"n/a"}`),
			ev("3", "payment", "a", 120, `{"amount":300}`), ev("4", "payment", "a", 180, `{"amount":350}`), ev("5", "payment", "a", 200, `{"amount":999}`))
		expect(t, got, "spend:a:1,3,4")
	})
	t.Run("out of order within the watermark, late past it", func(t *testing.T) {
		r := rule(t, `{"id":"fb","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"}],"within":"1m"}`)
		ms, o, err := TestRules([]*Rule{r}, []stream.Envelope{
			arrived(ev("b1", "B", "k", 6, ""), 6), arrived(ev("a1", "A", "k", 5, ""), 7), // b1 arrives first but happened after a1
			arrived(ev("z", "Z", "k", 30, ""), 30),
			arrived(ev("a2", "A", "k", 12, ""), 31), // watermark 30 - 10 = 20: late
		}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].Data.Events[0].ID != "a1" || ms[0].Data.Events[1].ID != "b1" || o.Late != 1 {
			t.Fatalf("matches %+v, late %d", ms, o.Late)
		}
	})
	t.Run("skipPastLastEvent and noSkip", func(t *testing.T) {
		skip := rule(t, `{"id":"s","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"}],"within":"1m"}`)
		all := rule(t, `{"id":"n","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"}],"within":"1m","afterMatch":"noSkip"}`)
		expect(t, run(t, []*Rule{skip, all}, 0, ev("a1", "A", "k", 0, ""), ev("a2", "A", "k", 1, ""), ev("b", "B", "k", 2, "")),
			"n:k:a1,b", "n:k:a2,b", "s:k:a1,b")
	})
	t.Run("keys and key prefixes", func(t *testing.T) {
		only := rule(t, `{"id":"only","pattern":[{"begin":"x","type":"X"}],"keys":["k1","k3"]}`)
		vip := rule(t, `{"id":"vip","pattern":[{"begin":"x","type":"X"}],"keyPrefix":"vip-"}`)
		expect(t, run(t, []*Rule{only, vip}, 0, ev("1", "X", "k1", 0, ""), ev("2", "X", "k2", 0, ""), ev("3", "X", "vip-7", 0, "")),
			"only:k1:1", "vip:vip-7:3")
	})
}

// arrived is e with its arrival at base+sec, its event time unchanged (the
// device's clock agrees with the server's).
func arrived(e stream.Envelope, sec float64) stream.Envelope {
	at := base.Add(time.Duration(sec * float64(time.Second)))
	e.SentAt, e.ReceivedAt = at, at
	return e
}

// refEvent is an accepted event of one key in the reference.
type refEvent struct {
	env stream.Envelope
	t   int64
}

// reference finds a rule's matches in one key's accepted events (sorted
// by event time, then arrival) without the NFA: for a sequence, each event
// matching the first step is tried as a start, in order, by searching
// forward for each next step (the first matching event for followedBy; the
// very next event of the rule's types for next), within the rule's time,
// then checking the absence over the rest of that time; with
// skipPastLastEvent, starts at or before the last match's last event are
// skipped. Thresholds keep a sliding list and restart after each match.
func reference(r *Rule, key string, evs []refEvent) []string {
	within := r.Within.Milliseconds()
	name := func(idx []int) string {
		var ids []string
		for _, i := range idx {
			ids = append(ids, evs[i].env.ID)
		}
		return fmt.Sprintf("%s:%s:%s", r.ID, key, strings.Join(ids, ","))
	}
	relevant := func(e *stream.Envelope) bool {
		for _, t := range r.types {
			if t == "" || t == e.Type {
				return true
			}
		}
		return false
	}
	var out []string
	switch r.Kind {
	case Filter:
		for i := range evs {
			if r.Steps[0].matches(&evs[i].env) {
				out = append(out, name([]int{i}))
			}
		}
	case Count, Sum:
		var win []int
		for i := range evs {
			e := &evs[i].env
			if !r.Steps[0].matches(e) {
				continue
			}
			v, ok := 0.0, true
			if r.Kind == Sum {
				// A value no sum holds is skipped by the sum rule (set
				// aside), as a missing one is.
				v, ok = number(e, r.Steps[0].SumOf)
				ok = ok && math.Abs(v) <= pipeline.MaxValue
			}
			if !ok {
				continue
			}
			k := 0
			for k < len(win) && evs[win[k]].t+within <= evs[i].t {
				k++
			}
			win = append(win[k:], i)
			done := len(win) >= r.Steps[0].TimesOrMore
			if r.Kind == Sum {
				s := 0.0
				for _, j := range win {
					x, _ := number(&evs[j].env, r.Steps[0].SumOf)
					s += x
				}
				done = s >= r.Steps[0].AtLeast
			}
			if done {
				out = append(out, name(win))
				win = nil
			}
		}
	case Sequence:
		after := -1
		for i := range evs {
			if !r.Steps[0].matches(&evs[i].env) || (r.AfterMatch == SkipPastLastEvent && i <= after) {
				continue
			}
			idx, j, ok := []int{i}, i, true
			for s := 1; s < r.positives && ok; s++ {
				found := -1
				for k := j + 1; k < len(evs) && evs[k].t-evs[i].t < within; k++ {
					if r.Steps[s].matches(&evs[k].env) {
						found = k
						break
					}
					if r.Steps[s].Contiguity == Next && relevant(&evs[k].env) {
						break
					}
				}
				if found < 0 {
					ok = false
				} else {
					idx, j = append(idx, found), found
				}
			}
			if ok && r.absence >= 0 {
				for k := j + 1; k < len(evs) && evs[k].t < evs[i].t+within; k++ {
					if r.Steps[r.absence].matches(&evs[k].env) {
						ok = false
						break
					}
				}
			}
			if ok {
				out = append(out, name(idx))
				after = j
			}
		}
	}
	return out
}

var randomRules = []string{
	`{"id":"filter","pattern":[{"begin":"a","type":"A","where":"data.v > 5"}]}`,
	`{"id":"relaxed","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"}],"within":"20s"}`,
	`{"id":"strict","pattern":[{"begin":"a","type":"A"},{"next":"b","type":"B"},{"followedBy":"c","type":"C"}],"within":"30s"}`,
	`{"id":"absence","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"},{"notFollowedBy":"n","type":"N"}],"within":"25s"}`,
	`{"id":"count","pattern":[{"begin":"c","type":"C","timesOrMore":3}],"within":"15s"}`,
	`{"id":"sum","pattern":[{"begin":"b","type":"B","sum":"data.v","atLeast":12}],"within":"20s"}`,
	`{"id":"noskip","pattern":[{"begin":"a","type":"A"},{"followedBy":"c","type":"C"}],"within":"10s","afterMatch":"noSkip"}`,
	`{"id":"where","pattern":[{"begin":"lo","type":"A","where":"data.v < 5"},{"followedBy":"hi","type":"B","where":"data.v >= 5 and key in ('k1','k2')"}],"within":"20s"}`,
	`{"id":"anytype","pattern":[{"begin":"a","type":"A","where":"data.v == 0"},{"next":"x","where":"data.v == 9"}],"within":"20s"}`,
}

func randomHistory(rng *rand.Rand, n int) []stream.Envelope {
	var out []stream.Envelope
	clock := 0.0
	for i := 0; i < n; i++ {
		clock += rng.Float64() * 3
		t := clock - rng.Float64()*4
		if rng.IntN(15) == 0 {
			t = clock - 20 - rng.Float64()*20
		}
		e := ev(fmt.Sprintf("e%d", i), []string{"A", "B", "C", "N", "Z"}[rng.IntN(5)], fmt.Sprintf("k%d", 1+rng.IntN(3)), t, fmt.Sprintf(`{"v":%d}`, rng.IntN(10)))
		out = append(out, arrived(e, clock))
	}
	return out
}

// TestRandomHistoriesMatchReference runs seeded random histories (out of
// order within the watermark, late events, every rule form) through the
// offline engine and compares its matches with the reference's.
func TestRandomHistoriesMatchReference(t *testing.T) {
	var rules []*Rule
	for _, doc := range randomRules {
		rules = append(rules, rule(t, doc))
	}
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		ooo := time.Duration(rng.IntN(6)) * time.Second
		evs := randomHistory(rng, 30+rng.IntN(80))
		got := run(t, rules, ooo, evs...)
		// The reference's accepted events: not late at arrival, per key,
		// in event-time order.
		byKey := map[string][]refEvent{}
		var wm int64
		seen := false
		for _, e := range evs {
			et := e.EventTime().UnixMilli()
			if !seen || et >= wm {
				byKey[e.Key] = append(byKey[e.Key], refEvent{env: e, t: et})
			}
			if w := et - ooo.Milliseconds(); !seen || w > wm {
				wm, seen = w, true
			}
		}
		var want []string
		for key, list := range byKey {
			sort.SliceStable(list, func(i, j int) bool { return list[i].t < list[j].t })
			for _, r := range rules {
				want = append(want, reference(r, key, list)...)
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("seed %d (out of order %s):\n got %v\nwant %v", seed, ooo, got, want)
		}
	}
}

// TestBatchingDoesNotChangeMatches folds the same histories the way the
// runner does — in random batches, each key's state written out and read
// back between batches, every key advanced to the batch's end watermark —
// and expects exactly the matches (ids included) of one event at a time,
// each state's encoding within its Size.
func TestBatchingDoesNotChangeMatches(t *testing.T) {
	var rules []*Rule
	for _, doc := range randomRules {
		rules = append(rules, rule(t, doc))
	}
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		ooo := time.Duration(rng.IntN(6)) * time.Second
		evs := randomHistory(rng, 30+rng.IntN(80))
		want, _, err := TestRules(rules, evs, ooo)
		if err != nil {
			t.Fatal(err)
		}
		off := NewOffline(rules, ooo) // for its operator
		blobs := map[string][]byte{}
		var got []string
		var wm int64 = -1 << 62
		seen := false
		for i := 0; i < len(evs); {
			n := 1 + rng.IntN(10)
			states := map[string]*keyState{}
			state := func(key string) *keyState {
				if s, ok := states[key]; ok {
					return s
				}
				s, err := off.op.NewState(key, blobs[key])
				if err != nil {
					t.Fatal(err)
				}
				states[key] = s.(*keyState)
				return states[key]
			}
			for _, e := range evs[i:min(i+n, len(evs))] {
				key, v, sel, _ := off.op.Select(&stream.KinesisRecord{ApproximateArrivalTimestamp: e.ReceivedAt}, &e)
				if sel == keyed.Fold {
					state(key).Add(v, time.UnixMilli(wm))
				}
				if w := e.EventTime().UnixMilli() - ooo.Milliseconds(); !seen || w > wm {
					wm, seen = w, true
				}
			}
			i += n
			for key := range blobs {
				state(key)
			}
			for key, s := range states {
				s.Advance(time.UnixMilli(wm))
				if n, size := len(encoded(t, s)), s.Size(); n > size {
					t.Fatalf("seed %d: key %s encodes in %d bytes, past its Size %d: the fold checkpoint would not bound the item", seed, key, n, size)
				}
				recs, err := s.Render()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					var env stream.Envelope
					_ = json.Unmarshal(r.Data, &env)
					got = append(got, env.ID)
				}
				s.Compact()
				blobs[key] = encoded(t, s)
			}
		}
		for key := range blobs {
			s, _ := off.op.NewState(key, blobs[key])
			s.Advance(time.UnixMilli(1 << 60))
			recs, _ := s.Render()
			for _, r := range recs {
				var env stream.Envelope
				_ = json.Unmarshal(r.Data, &env)
				got = append(got, env.ID)
			}
		}
		var wantIDs []string
		for _, m := range want {
			wantIDs = append(wantIDs, m.ID)
		}
		sort.Strings(got)
		sort.Strings(wantIDs)
		if strings.Join(got, " ") != strings.Join(wantIDs, " ") {
			t.Fatalf("seed %d: %d matches in batches, %d one at a time", seed, len(got), len(wantIDs))
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	st := &cepState{ord: 9,
		pending:  []pendingEv{{t: 5, ord: 3, id: "e3", typ: "A", hits: []hit{{rule: "r1", mask: 3, value: 1.5}, {rule: "r2"}}}},
		partials: []partial{{rule: "r1", next: 1, start: -7, events: []evRef{{id: "e1", typ: "A", t: -7, ord: 1, step: 0, v: 2}}}},
		out:      []Match{{Rule: "r2", Kind: Sequence, Absent: "n", Sum: 3, Events: []evRef{{id: "e0", typ: "B", t: 1}}}}}
	b := encodeCEP(nil, st)
	got, err := decodeCEP(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", st) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, st)
	}
	for i := 1; i < len(b); i++ {
		if _, err := decodeCEP(b[:i]); err == nil {
			t.Fatalf("cut to %d of %d bytes: decoded", i, len(b))
		}
	}
}

// TestOfflineIgnoresProducerCopies: the detect function suppresses a
// producer's copy of an event (same key and id, arriving again within the
// dedupe horizon: an ingest retry writes one) and sets aside a reuse of an
// id with other content; rules test, POST /test and Backfill run the
// offline engine "as the function would", so they must too. They counted
// the copy: three failed logins made of two and a copy matched a
// timesOrMore 3 rule (a false alert a backfill put on the matches stream).
func TestOfflineIgnoresProducerCopies(t *testing.T) {
	brute := rule(t, `{"id":"brute","pattern":[{"begin":"f","type":"login_failed","timesOrMore":3}],"within":"1m"}`)
	twice := rule(t, `{"id":"twice","pattern":[{"begin":"a","type":"login_failed"},{"followedBy":"b","type":"login_failed"}],"within":"1m"}`)
	f1, f2 := ev("f1", "login_failed", "a", 0, ""), ev("f2", "login_failed", "a", 1, "")
	copyOf := func(e stream.Envelope, sec float64) stream.Envelope {
		e.ReceivedAt = base.Add(time.Duration(sec * float64(time.Second)))
		return e
	}
	for _, tc := range []struct {
		name  string
		evs   []stream.Envelope
		want  []string
		aside int
	}{
		{"a copy", []stream.Envelope{f1, copyOf(f1, 2), f2, copyOf(f2, 3)}, []string{"twice:a:f1,f2"}, 0},
		{"an id reused with other data", []stream.Envelope{f1, ev("f1", "login_failed", "a", 2, `{"ip":"10.0.0.9"}`), f2}, []string{"twice:a:f1,f2"}, 1},
		{"the same id of another key", []stream.Envelope{f1, f2, ev("f1", "login_failed", "b", 2, ""), ev("f3", "login_failed", "a", 3, "")}, []string{"brute:a:f1,f2,f3", "twice:a:f1,f2"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, o, err := TestRules([]*Rule{brute, twice}, tc.evs, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				var ids []string
				for _, e := range m.Data.Events {
					ids = append(ids, e.ID)
				}
				got = append(got, fmt.Sprintf("%s:%s:%s", m.Data.Rule, m.Key, strings.Join(ids, ",")))
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || o.Aside != tc.aside {
				t.Errorf("matches %v, %d set aside; want %v, %d", got, o.Aside, tc.want, tc.aside)
			}
		})
	}
}
