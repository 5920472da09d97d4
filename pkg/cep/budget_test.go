package cep

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestStateBudgetSetsAsideOnlyPastIt fills one key's partial matches (a
// count rule that keeps every event for an hour) up to a small budget:
// events are added until the next would take the state past it, that one
// and the following are set aside naming the key, the state stays within
// the budget, and once the hour has passed the key takes events again.
func TestStateBudgetSetsAsideOnlyPastIt(t *testing.T) {
	r := rule(t, `{"id":"many","pattern":[{"begin":"a","type":"A","timesOrMore":1000}],"within":"1h"}`)
	rs := NewRuleSet([]*StoredRule{{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}}}, base)
	op := NewOperator(rs, func() time.Time { return base })
	op.maxBytes = 4000
	st, err := op.NewState("acct", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	event := func(i, sec int) Event {
		return Event{t: at(sec).UnixMilli(), id: fmt.Sprintf("e%03d", i), typ: "A", hits: []hit{{rule: "many", mask: 1}}}
	}
	var fates []keyed.Fate
	for i := 0; i < 200; i++ {
		// The watermark before each event is the one before it: every
		// event is in the rule's partial match by the next.
		f, rerr := st.Add(event(i, i), at(i-1))
		fates = append(fates, f)
		if f == keyed.Aside && (rerr == nil || rerr.Field != "key" || rerr.Kind != setaside.KindStateBudget || !strings.Contains(rerr.Reason, `"acct"`)) {
			t.Fatalf("event %d set aside with %+v; want field key, kind state-budget, the key named", i, rerr)
		}
		if n := st.(*keyState).Size(); n > op.maxBytes {
			t.Fatalf("after event %d the state is %d bytes, past its %d-byte budget", i, n, op.maxBytes)
		}
	}
	added := 0
	for added < len(fates) && fates[added] == keyed.Added {
		added++
	}
	if added < 10 || added == len(fates) {
		t.Fatalf("%d of %d events added before the budget", added, len(fates))
	}
	for i, f := range fates[added:] {
		if f != keyed.Aside {
			t.Fatalf("event %d: fate %v after the budget was reached, want set aside", added+i, f)
		}
	}
	t.Logf("%d events added, %d set aside", added, len(fates)-added)
	// An hour later the partial match has timed out: the key takes events.
	later := 200 + 3600
	st.Advance(at(later))
	if f, rerr := st.Add(event(999, later+1), at(later)); f != keyed.Added {
		t.Fatalf("after the rule's time passed: fate %v (%+v), want added", f, rerr)
	}
}

// TestBufferedBurstFitsOneItem buffers a burst of one key's events within
// outOfOrderness, then moves the watermark past all of them: whatever the
// rules make of the burst — every filter's match, every partial match a
// sequence extends — the state and its matches must still fit one state
// item (the runner refuses to write a larger one, and the batch would be
// retried for ever). The example: 120 filter rules and 60 payments with
// 256-byte ids made 7,200 matches in a 2,067,015-byte state.
func TestBufferedBurstFitsOneItem(t *testing.T) {
	id := func(prefix string, i, n int) string {
		s := fmt.Sprintf("%s-%03d-", prefix, i)
		return s + strings.Repeat("x", n-len(s))
	}
	filters := func(n int) []string {
		var docs []string
		for i := range n {
			docs = append(docs, fmt.Sprintf(`{"id":"r%03d","pattern":[{"begin":"p","type":"payment"}]}`, i))
		}
		return docs
	}
	sequences := func(n int) []string {
		var docs []string
		for i := range n {
			docs = append(docs, fmt.Sprintf(`{"id":"s%03d","pattern":[{"begin":"a","type":"A"},{"followedBy":"b","type":"B"},{"followedBy":"c","type":"C"}],"within":"1h","afterMatch":"noSkip"}`, i))
		}
		return docs
	}
	type burstEv struct {
		id, typ string
		sec     int
	}
	for _, c := range []struct {
		name     string
		rules    []string
		before   []burstEv // matched before the burst (the watermark passes them)
		burst    []burstEv // buffered, then passed by the watermark at once
		perEvent int       // matches each buffered event of the burst makes (0: not checked)
	}{
		{name: "120 filters, 60 payments with 256-byte ids", rules: filters(120), perEvent: 120, burst: func() (b []burstEv) {
			for i := range 60 {
				b = append(b, burstEv{id("pay", i, 256), "payment", 0})
			}
			return b
		}()},
		{name: "one payment every rule (2,000 filters) matches", rules: filters(2000), burst: []burstEv{{id("pay", 0, 256), "payment", 0}}},
		{name: "20 noSkip sequences: 64 partials each from short ids, extended by 256-byte ids", rules: sequences(20),
			before: func() (b []burstEv) {
				for i := range 64 {
					b = append(b, burstEv{fmt.Sprintf("a%d", i), "A", -100})
				}
				return b
			}(),
			burst: func() (b []burstEv) {
				for i := range 30 {
					b = append(b, burstEv{id("b", i, 256), "B", 0}, burstEv{id("c", i, 256), "C", 0})
				}
				return b
			}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stored []*StoredRule
			for _, doc := range c.rules {
				stored = append(stored, &StoredRule{Rule: rule(t, doc), Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}})
			}
			op := NewOperator(NewRuleSet(stored, base), func() time.Time { return base })
			at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
			blob, biggest := []byte(nil), 0
			// fold adds events to the key's state as one fold of the runner
			// does and writes it: the blob must fit an item, and Size must
			// bound it (the runner's fold checkpoint measures Size).
			fold := func(evs []burstEv, wm, end time.Time) (added, aside int) {
				st, err := op.NewState("acct-1", blob)
				if err != nil {
					t.Fatal(err)
				}
				st.Compact()
				for _, e := range evs {
					_, v, sel, err := op.Select(&stream.KinesisRecord{ApproximateArrivalTimestamp: base}, &stream.Envelope{ID: e.id, Type: e.typ, Key: "acct-1", OccurredAt: at(e.sec), ReceivedAt: base})
					if err != nil || sel != keyed.Fold {
						t.Fatalf("event %s: selection %v, %v", e.id, sel, err)
					}
					switch f, _ := st.Add(v, wm); f {
					case keyed.Added:
						added++
					case keyed.Aside:
						aside++
					}
				}
				st.Advance(end)
				blob = encoded(t, st)
				if len(blob) > st.Size() {
					t.Fatalf("the state encodes in %d bytes, past its Size %d", len(blob), st.Size())
				}
				biggest = max(biggest, len(blob))
				if len(blob) > keyed.DefaultMaxStateBytes {
					t.Fatalf("the state is %d bytes after the watermark passed the events: past the %d bytes one item holds", len(blob), keyed.DefaultMaxStateBytes)
				}
				return added, aside
			}
			fold(c.before, at(-200), at(-50))
			added, aside := fold(c.burst, at(-1), at(-1))
			_, _ = fold(nil, at(-1), at(10)) // the watermark passes the burst
			st, _ := op.NewState("acct-1", blob)
			t.Logf("%d events buffered, %d set aside; %d matches; largest state %d bytes", added, aside, st.Outbox(), biggest)
			if added+aside != len(c.burst) {
				t.Fatalf("%d of %d events buffered or set aside", added+aside, len(c.burst))
			}
			if c.perEvent > 0 && (added == 0 || st.Outbox() != added*c.perEvent) {
				t.Fatalf("%d events buffered made %d matches, want at least one event and %d matches each", added, st.Outbox(), c.perEvent)
			}
		})
	}
}

// randomBurstRules is a random rule set of up to most rules over types A,
// B and C: filters, sequences (next or followedBy, noSkip or not, some
// ending with an absence), counts and sums, with ids and step names of
// random lengths.
func randomBurstRules(t *testing.T, rng *rand.Rand, most int) []*Rule {
	pad := func(prefix string, n int) string { return prefix + strings.Repeat("x", max(0, n-len(prefix))) }
	typ := func() string { return []string{"A", "B", "C"}[rng.IntN(3)] }
	within := func() string { return []string{"5s", "30s", "10m", "1h"}[rng.IntN(4)] }
	// Some sets are all filters or all sequences, some have short ids: a
	// buffered event is then small and what matching it makes is not.
	kinds, idLength := []int{4, 1, 2}[rng.IntN(3)], []int{5, 65}[rng.IntN(2)]
	var rules []*Rule
	for i := range 1 + rng.IntN(most) {
		id := pad(fmt.Sprintf("r%d-", i), rng.IntN(idLength))
		var doc string
		kind := rng.IntN(kinds)
		if kinds == 2 {
			kind = 1
		}
		switch kind {
		case 0:
			doc = fmt.Sprintf(`{"id":%q,"pattern":[{"begin":"p","type":%q}]}`, id, typ())
		case 1:
			steps := []string{fmt.Sprintf(`{"begin":%q,"type":%q}`, pad("s0", rng.IntN(33)), typ())}
			for s := 1; s < 2+rng.IntN(3); s++ {
				steps = append(steps, fmt.Sprintf(`{%q:%q,"type":%q}`, []string{"next", "followedBy", "followedBy"}[rng.IntN(3)], pad(fmt.Sprintf("s%d", s), rng.IntN(33)), typ()))
			}
			if rng.IntN(3) == 0 {
				steps = append(steps, fmt.Sprintf(`{"notFollowedBy":%q,"type":%q}`, pad("n", rng.IntN(33)), typ()))
			}
			after := []string{"skipPastLastEvent", "noSkip"}[rng.IntN(2)]
			doc = fmt.Sprintf(`{"id":%q,"pattern":[%s],"within":%q,"afterMatch":%q}`, id, strings.Join(steps, ","), within(), after)
		case 2:
			doc = fmt.Sprintf(`{"id":%q,"pattern":[{"begin":"c","type":%q,"timesOrMore":%d}],"within":%q}`, id, typ(), 2+rng.IntN(60), within())
		default:
			doc = fmt.Sprintf(`{"id":%q,"pattern":[{"begin":"s","type":%q,"sum":"data.v","atLeast":%d}],"within":%q}`, id, typ(), 1+rng.IntN(200), within())
		}
		rules = append(rules, rule(t, doc))
	}
	return rules
}

// randomBursts is a random history of one or two keys in bursts: many
// events within a second or two, then a pause; out of order within 3 s,
// ids of 1 to 256 bytes, types A, B, C and one no rule reads.
func randomBursts(rng *rand.Rand, n int) []stream.Envelope {
	var out []stream.Envelope
	clock := 0.0
	for i := range n {
		if rng.IntN(100) == 0 {
			clock += 5 + rng.Float64()*60
		} else {
			clock += rng.Float64() * 0.01
		}
		id := fmt.Sprintf("e%d-", i)
		id += strings.Repeat("i", max(0, 1+rng.IntN(stream.MaxIDLength)-len(id)))
		e := ev(id, []string{"A", "B", "C", "Z"}[rng.IntN(4)], fmt.Sprintf("k%d", 1+rng.IntN(2)), clock-rng.Float64()*3, fmt.Sprintf(`{"v":%d}`, rng.IntN(10)))
		out = append(out, arrived(e, clock))
	}
	return out
}

// cutRun is what playing a history in some cut gave, in memory: the match
// ids made, the events set aside, the largest state written.
type cutRun struct {
	matches, aside []string
	biggest        int
}

// playLikeRunner plays evs (one shard) in batches next cuts through op as
// keyed.Runner does — per batch and key: the stored state, its outbox sent
// and dropped, records added until the state and its matches reach
// FoldBytes (the rest come again from the lowest such record), then the
// watermark; keys of no record closed at the batch's watermark — and fails
// the test if a state written is past what an item holds, past its Size,
// or if matching ever grew Size (what makes the bound hold).
func playLikeRunner(t *testing.T, op *Operator, evs []stream.Envelope, ooo time.Duration, next func() int) cutRun {
	t.Helper()
	var res cutRun
	type rec struct {
		key string
		v   Event
		wm  time.Time
	}
	var recs []rec
	var wm int64 = -1 << 62
	for _, e := range evs {
		key, v, sel, err := op.Select(&stream.KinesisRecord{ApproximateArrivalTimestamp: e.ReceivedAt}, &e)
		if err == nil && sel == keyed.Fold {
			recs = append(recs, rec{key, v, time.UnixMilli(wm)})
		}
		wm = max(wm, e.EventTime().UnixMilli()-ooo.Milliseconds())
	}
	blobs, fence := map[string][]byte{}, map[string]int{}
	load := func(key string) *keyState {
		s, err := op.NewState(key, blobs[key])
		if err != nil {
			t.Fatal(err)
		}
		ks := s.(*keyState)
		for _, b := range must(ks.Render()) {
			var env stream.Envelope
			_ = json.Unmarshal(b.Data, &env)
			res.matches = append(res.matches, env.ID)
		}
		ks.Compact()
		return ks
	}
	advance := func(ks *keyState, to time.Time) {
		before := ks.Size()
		ks.Advance(to)
		if after := ks.Size(); after > before {
			t.Fatalf("matching grew the state and its matches from %d to %d bytes: an event was counted at less than it added", before, after)
		}
	}
	save := func(key string, ks *keyState) {
		b := encoded(t, ks)
		if len(b) > ks.Size() {
			t.Fatalf("a state encodes in %d bytes, past its Size %d", len(b), ks.Size())
		}
		if len(b) > keyed.DefaultMaxStateBytes {
			t.Fatalf("a state of %d bytes written: past the %d bytes an item holds", len(b), keyed.DefaultMaxStateBytes)
		}
		res.biggest = max(res.biggest, len(b))
		blobs[key] = b
	}
	for pos := 0; pos < len(recs); {
		batch := recs[pos:min(pos+next(), len(recs))]
		end := batch[len(batch)-1].wm
		if pos+len(batch) < len(recs) {
			end = recs[pos+len(batch)].wm
		}
		byKey := map[string][]int{}
		var keys []string
		for i, r := range batch {
			if _, ok := byKey[r.key]; !ok {
				keys = append(keys, r.key)
			}
			byKey[r.key] = append(byKey[r.key], i)
		}
		lowest := len(batch)
		for _, key := range keys {
			ks := load(key)
			first, stop := -1, len(byKey[key])
			for j, i := range byKey[key] {
				if pos+i <= fence[key]-1 {
					continue // folded before
				}
				if first >= 0 && ks.Size() >= FoldBytes {
					stop = j
					break
				}
				if first < 0 {
					first = j
				}
				advance(ks, batch[i].wm) // what Add does first
				if f, _ := ks.Add(batch[i].v, batch[i].wm); f == keyed.Aside {
					res.aside = append(res.aside, batch[i].v.id)
				}
				fence[key] = pos + i + 1
			}
			if first < 0 {
				continue
			}
			to := end
			if stop < len(byKey[key]) {
				to = batch[byKey[key][stop]].wm
				lowest = min(lowest, byKey[key][stop])
			}
			advance(ks, to)
			save(key, ks)
		}
		// Lambda resumes at the lowest record not done; the watermark is
		// committed as of it, and closes the other keys' states.
		if lowest < len(batch) {
			end = batch[lowest].wm
		}
		for key := range blobs {
			if _, ok := byKey[key]; !ok {
				ks := load(key)
				advance(ks, end)
				save(key, ks)
			}
		}
		pos += lowest
	}
	for key := range blobs {
		ks := load(key)
		advance(ks, time.UnixMilli(1<<60))
		save(key, ks)
		load(key)
	}
	sort.Strings(res.matches)
	res.matches = slices.Compact(res.matches)
	sort.Strings(res.aside)
	return res
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestStateNeverOutgrowsItsItem is the budget's property over random rule
// sets and bursts of one shard, played as the runner plays them, one
// record a batch and in random batches: no state written is past what one
// item holds (so none is refused and retried for ever), matching never
// adds more than the budget counted, and the same events are set aside and
// the same matches made whatever the cut.
func TestStateNeverOutgrowsItsItem(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			rules := randomBurstRules(t, rng, []int{10, 40, 150}[seed%3])
			evs := randomBursts(rng, 100+rng.IntN(300))
			ooo := 3 * time.Second
			var stored []*StoredRule
			for _, r := range rules {
				stored = append(stored, &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}})
			}
			op := NewOperator(NewRuleSet(stored, base), func() time.Time { return base })
			one := playLikeRunner(t, op, evs, ooo, func() int { return 1 })
			cut := playLikeRunner(t, op, evs, ooo, func() int { return 1 + rng.IntN(100) })
			if strings.Join(one.aside, " ") != strings.Join(cut.aside, " ") || strings.Join(one.matches, " ") != strings.Join(cut.matches, " ") {
				t.Fatalf("one record a batch: %d matches, %d set aside; random batches: %d and %d", len(one.matches), len(one.aside), len(cut.matches), len(cut.aside))
			}
			t.Logf("%d rules, %d events: %d matches, %d set aside, largest state %d bytes", len(rules), len(evs), len(one.matches), len(one.aside), max(one.biggest, cut.biggest))
		})
	}
}

// encoded is a state's encoding; a CEP state always encodes.
func encoded(t testing.TB, s interface{ Encode([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStateBudgetNamesTheRuleThatFillsIt: a careless rule (eight steps
// of one type, noSkip, within a day) fills a busy key's budget with its
// partial matches, and the key's events are then set aside for every
// rule, a plain filter's too. The set-aside reason names the rule that
// holds the most of the key's state, so the operator knows which to
// change or delete; without it, it named only the key and the budget.
func TestStateBudgetNamesTheRuleThatFillsIt(t *testing.T) {
	steps := `{"begin":"s0","type":"page_view"}`
	for i := 1; i < 8; i++ {
		steps += fmt.Sprintf(`,{"followedBy":"s%d","type":"page_view"}`, i)
	}
	heavy := rule(t, `{"id":"careless","pattern":[`+steps+`],"within":"24h","afterMatch":"noSkip"}`)
	light := rule(t, `{"id":"every-view","pattern":[{"begin":"v","type":"page_view"}]}`)
	var stored []*StoredRule
	for _, r := range []*Rule{heavy, light} {
		stored = append(stored, &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}})
	}
	op := NewOperator(NewRuleSet(stored, base), func() time.Time { return base })
	st, err := op.NewState("user-ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for i := range 300 {
		env := stream.Envelope{ID: fmt.Sprintf("v%03d", i), Type: "page_view", Key: "user-ns", OccurredAt: at(i), ReceivedAt: base}
		_, v, sel, err := op.Select(&stream.KinesisRecord{ApproximateArrivalTimestamp: base}, &env)
		if err != nil || sel != keyed.Fold {
			t.Fatalf("select %d: %v %v", i, sel, err)
		}
		// A burst within outOfOrderness: the watermark stays behind it, so
		// each buffered event counts at the most its matching can add.
		f, rerr := st.Add(v, at(-1))
		if f != keyed.Aside {
			continue
		}
		if rerr == nil || rerr.Kind != setaside.KindStateBudget || !strings.Contains(rerr.Reason, `rule "careless" holds the most of it`) {
			t.Fatalf("event %d set aside with %+v; want the reason to name rule careless as the one holding the most", i, rerr)
		}
		if strings.Contains(rerr.Reason, `"every-view" holds`) {
			t.Errorf("the reason names the filter as holding the most: %s", rerr.Reason)
		}
		t.Logf("set aside: %s", rerr.Reason)
		return
	}
	t.Fatal("no event was set aside: the rule did not fill the budget")
}
