package cep

import (
	"sort"
	"time"
)

// The matching of one key, as a pure state machine (the NFA of Flink CEP,
// for the forms a rule can take). Events are matched in event-time order,
// as Flink does with event time: an event is buffered until the shard's
// watermark passes it, then the buffered events before the watermark are
// run through the rules in (event time, arrival) order, and the timers of
// absences and time limits fire when the watermark passes them. An event
// older than the watermark when it arrives is late (dropped, counted): the
// events before it have been matched already. So the matches depend only on
// the key's events and their arrival order, never on batching.

// evRef is an event as a partial match or a match keeps it.
type evRef struct {
	id   string
	typ  string
	t    int64 // event time, Unix ms
	ord  uint32
	step uint8
	v    float64 // its value, for sum rules
}

// pendingEv is an event buffered until the watermark passes it, with what
// each rule made of it at its arrival.
type pendingEv struct {
	t    int64
	ord  uint32
	id   string
	typ  string
	hits []hit
	// plan is what the budget counts it at (operator.go), worked out on
	// first use under the rules of the fold; not encoded.
	plan *chargePlan
}

// partial is a partial match of one rule. For a sequence, next is the
// index of the positive step it waits for (== the number of positive steps
// when only the absence is left); for a threshold rule, events are the
// matching events within the rule's time.
type partial struct {
	rule   string
	next   uint8
	start  int64
	events []evRef
}

// Match is a complete match.
type Match struct {
	Rule   string
	Kind   Kind
	Events []evRef
	// Absent names the absence step of an absence match.
	Absent string
	Sum    float64
}

// cepState is one key's state.
type cepState struct {
	ord      uint32
	pending  []pendingEv // by (t, ord)
	partials []partial   // in creation order
	out      []Match
	// discard (offline, past its limits) counts matches in discarded
	// instead of keeping them: the matching goes on, the memory does not
	// grow with the matches. Neither is encoded.
	discard   bool
	discarded int
}

// maxPartialsPerRule bounds a rule's partial matches per key; past it the
// oldest is dropped (a rule with noSkip and relaxed contiguity could
// otherwise grow them combinatorially), and put on the matches stream as
// an "evicted" output with its events, so that what it would have matched
// (an order's pending "not paid" alert) is not lost without a word.
const maxPartialsPerRule = 64

// rules is what processing needs to know of the rules: the definitions
// (an event's hits were taken while its rule was active, so they are
// matched whatever the rule's state now), and whether a rule still runs at
// processing time: an absence is only trusted, and fired, while its rule
// still reads the events that would have cancelled it.
type rules interface {
	lookup(id string) (*Rule, bool)
	live(id string) bool
}

// process matches the buffered events the watermark wm (Unix ms) has passed
// and fires the timers it has passed.
func (st *cepState) process(rs rules, wm int64) {
	n := 0
	for n < len(st.pending) && st.pending[n].t < wm {
		e := &st.pending[n]
		st.fire(rs, e.t)
		for _, h := range e.hits {
			r, ok := rs.lookup(h.rule)
			if !ok {
				continue
			}
			st.apply(r, e, h)
		}
		n++
	}
	if n > 0 {
		st.pending = append(st.pending[:0], st.pending[n:]...)
	}
	st.fire(rs, wm)
}

// fire ends the partial matches whose time is over before limit (Unix ms):
// an absence that nothing followed is a match; other partial matches are
// dropped, as are those of rules no longer running.
func (st *cepState) fire(rs rules, limit int64) {
	kept := st.partials[:0]
	var skipped map[string]evRef // per rule: partials that began at or before this are dropped
	for _, p := range st.partials {
		r, ok := rs.lookup(p.rule)
		if !ok {
			continue
		}
		if last, ok := skipped[p.rule]; ok && startedBy(p, last) {
			continue
		}
		within := r.Within.Milliseconds()
		switch r.Kind {
		case Count, Sum:
			i := 0
			for i < len(p.events) && p.events[i].t+within <= limit {
				i++
			}
			if p.events = p.events[i:]; len(p.events) > 0 {
				kept = append(kept, p)
			}
			continue
		}
		if p.start+within > limit {
			kept = append(kept, p)
			continue
		}
		if int(p.next) == r.positives && r.absence >= 0 && rs.live(r.ID) {
			st.emit(Match{Rule: r.ID, Kind: r.Kind, Events: p.events, Absent: r.Steps[r.absence].Name})
			if r.AfterMatch == SkipPastLastEvent {
				last := p.events[len(p.events)-1]
				kept = dropStartedBy(kept, r.ID, last)
				if skipped == nil {
					skipped = map[string]evRef{}
				}
				skipped[r.ID] = last
			}
		}
	}
	st.partials = kept
}

// dropStartedBy removes r's partial matches that began at or before e.
func dropStartedBy(ps []partial, rule string, e evRef) []partial {
	out := ps[:0]
	for _, p := range ps {
		if p.rule == rule && startedBy(p, e) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// startedBy reports whether p began at or before e.
func startedBy(p partial, e evRef) bool {
	return p.events[0].t < e.t || (p.events[0].t == e.t && p.events[0].ord <= e.ord)
}

func (st *cepState) emit(m Match) {
	if st.discard {
		st.discarded++
		return
	}
	m.Events = append([]evRef(nil), m.Events...)
	st.out = append(st.out, m)
}

func ref(e *pendingEv, step int, v float64) evRef {
	return evRef{id: e.id, typ: e.typ, t: e.t, ord: e.ord, step: uint8(step), v: v}
}

// apply runs one event through one rule.
func (st *cepState) apply(r *Rule, e *pendingEv, h hit) {
	switch r.Kind {
	case Filter:
		switch {
		case h.mask&1 == 0:
		case st.discard:
			st.discarded++
		default:
			st.emit(Match{Rule: r.ID, Kind: Filter, Events: []evRef{ref(e, 0, 0)}})
		}
		return
	case Count, Sum:
		if h.mask&1 == 0 {
			return
		}
		i := st.find(r.ID)
		if i < 0 {
			st.partials = append(st.partials, partial{rule: r.ID, start: e.t})
			i = len(st.partials) - 1
		}
		p := &st.partials[i]
		within := r.Within.Milliseconds()
		k := 0
		for k < len(p.events) && p.events[k].t+within <= e.t {
			k++
		}
		p.events = append(p.events[k:], ref(e, 0, h.value))
		p.start = p.events[0].t
		done := false
		var sum float64
		if r.Kind == Count {
			done = len(p.events) >= r.Steps[0].TimesOrMore
		} else {
			for _, x := range p.events {
				sum += x.v
			}
			done = sum >= r.Steps[0].AtLeast
		}
		if done {
			st.emit(Match{Rule: r.ID, Kind: r.Kind, Events: p.events, Sum: sum})
			st.partials = append(st.partials[:i], st.partials[i+1:]...)
		}
		return
	}
	// A sequence, maybe ending with an absence.
	consumed := false
	kept := st.partials[:0]
	var matched *evRef
	for _, p := range st.partials {
		if p.rule != r.ID || (matched != nil && r.AfterMatch == SkipPastLastEvent) {
			if p.rule != r.ID {
				kept = append(kept, p)
			}
			continue
		}
		if int(p.next) < r.positives {
			step := int(p.next)
			if h.mask&(1<<step) != 0 {
				p.events = append(append([]evRef(nil), p.events...), ref(e, step, h.value))
				p.next++
				if int(p.next) == r.positives && r.absence < 0 {
					st.emit(Match{Rule: r.ID, Kind: Sequence, Events: p.events})
					last := p.events[len(p.events)-1]
					matched, consumed = &last, true
					continue
				}
				kept = append(kept, p)
				continue
			}
			if r.Steps[step].Contiguity == Next {
				continue // strict contiguity broken
			}
			kept = append(kept, p)
			continue
		}
		if h.mask&(1<<r.absence) != 0 {
			continue // the absence did not hold
		}
		kept = append(kept, p)
	}
	st.partials = kept
	if consumed && r.AfterMatch == SkipPastLastEvent {
		// Every partial match of the rule began at or before this event.
		st.partials = dropStartedBy(st.partials, r.ID, *matched)
		return
	}
	if h.mask&1 != 0 {
		p := partial{rule: r.ID, next: 1, start: e.t, events: []evRef{ref(e, 0, h.value)}}
		if st.count(r.ID) >= maxPartialsPerRule {
			st.dropOldest(r.ID)
		}
		st.partials = append(st.partials, p)
	}
}

func (st *cepState) find(rule string) int {
	for i := range st.partials {
		if st.partials[i].rule == rule {
			return i
		}
	}
	return -1
}

func (st *cepState) count(rule string) int {
	n := 0
	for i := range st.partials {
		if st.partials[i].rule == rule {
			n++
		}
	}
	return n
}

func (st *cepState) dropOldest(rule string) {
	if i := st.find(rule); i >= 0 {
		if !st.discard { // offline past its limits: not a match to count
			st.emit(Match{Rule: rule, Kind: Evicted, Events: st.partials[i].events})
		}
		st.partials = append(st.partials[:i], st.partials[i+1:]...)
	}
}

// buffer adds an event to the pending events in (t, ord) order.
func (st *cepState) buffer(e pendingEv) {
	e.ord = st.ord
	st.ord++
	i := sort.Search(len(st.pending), func(i int) bool { return st.pending[i].t > e.t })
	st.pending = append(st.pending, pendingEv{})
	copy(st.pending[i+1:], st.pending[i:])
	st.pending[i] = e
}

// nextDue is the watermark (Unix ms) at which the state next has work:
// a buffered event to match or an absence to fire; 0 when none.
func (st *cepState) nextDue(rs rules) int64 {
	var due int64
	if len(st.pending) > 0 {
		due = st.pending[0].t + 1
	}
	for _, p := range st.partials {
		r, ok := rs.lookup(p.rule)
		if !ok || r.absence < 0 || int(p.next) != r.positives {
			continue
		}
		if at := p.start + r.Within.Milliseconds(); due == 0 || at < due {
			due = at
		}
	}
	return due
}

// compact drops the outbox (once it is on the stream) and renumbers
// nothing: ordinals only order events of the key.
func (st *cepState) compact() {
	st.out = st.out[:0]
	if len(st.pending) == 0 && len(st.partials) == 0 {
		st.ord = 0
	}
}

func msTime(t int64) time.Time { return time.UnixMilli(t).UTC() }
