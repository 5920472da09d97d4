package cep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// StateKind is the keyed state kind of CEP state items.
const StateKind = "cep"

// Event is what CEP folds of an event: its time, id, type and what each
// rule made of it when it arrived (Operator.Select makes it); refused, when
// not nil, is the set-aside of the sum rules that skip it (sumRecordError).
type Event struct {
	t       int64
	id      string
	typ     string
	hits    []hit
	refused *keyed.RecordError
}

// Operator is CEP as a keyed.Operator: it folds, under their key, the
// events some active rule can read, and only observes the others' time.
type Operator struct {
	rules    atomic.Pointer[RuleSet]
	now      func() time.Time
	naive    bool
	maxBytes int
	scratch  sync.Pool
}

var _ keyed.Operator[Event] = (*Operator)(nil)

// DefaultMaxStateBytes bounds a key's state — its buffered events and
// partial matches, each buffered event counted at the most that matching
// it can add (its matches, the partial matches it starts or extends), not
// the matches of the fold waiting to be sent: an event that would take it
// past is set aside. The state after each record depends only on the key's
// records, so which records are set aside never depends on how Lambda cut
// the batches; matching never adds more than an event was counted at, so
// a fold's state item stays below DefaultMaxStateBytes + FoldBytes.
const DefaultMaxStateBytes = 160 << 10

// FoldBytes ends a key's fold early once its state and the matches the
// fold made reach it (keyed.Settings.FoldBytes): the matches are sent and
// the key's next record comes again in the next batch, which changes no
// match and no set-aside. It is above DefaultMaxStateBytes, so a key at its
// budget still folds records, and the state item holds both.
const FoldBytes = 180_000

// A fold starts below FoldBytes and adds at most one budget's worth
// (matching never grows the state and its matches past what the budget
// counted), so every state item fits what the runner writes: this
// constant does not compile if the sum outgrows keyed.DefaultMaxStateBytes.
const _ = uint(keyed.DefaultMaxStateBytes - DefaultMaxStateBytes - FoldBytes)

// NewOperator returns an operator over rs; now is processing time (a rule
// disabled by now stops matching).
func NewOperator(rs *RuleSet, now func() time.Time) *Operator {
	o := &Operator{now: now, maxBytes: DefaultMaxStateBytes}
	o.rules.Store(rs)
	o.scratch.New = func() any { s := make([]hit, 0, 16); return &s }
	return o
}

// SetRules replaces the rules (a refresh).
func (o *Operator) SetRules(rs *RuleSet) { o.rules.Store(rs) }

// Rules is the current rule set.
func (o *Operator) Rules() *RuleSet { return o.rules.Load() }

// Naive makes the operator evaluate every rule on every event instead of
// looking rules up in the index: the baseline of make bench.
func (o *Operator) Naive(on bool) { o.naive = on }

// Select folds an event some rule active at its arrival can read. A sum
// rule that cannot add the event's value skips it: the event is folded for
// the other rules and set aside, naming the field and the sum rules, when
// Add takes it; read by no other rule, it is set aside at once.
func (o *Operator) Select(rec *stream.KinesisRecord, env *stream.Envelope) (string, Event, keyed.Selection, error) {
	rs := o.rules.Load()
	arrival := rec.ApproximateArrivalTimestamp
	if arrival.IsZero() {
		arrival = env.ReceivedAt
	}
	buf := o.scratch.Get().(*[]hit)
	defer o.scratch.Put(buf)
	var refused []*SumError
	if o.naive {
		*buf, refused = rs.naiveHits(*buf, env, env.Key, arrival)
	} else {
		*buf, refused = rs.hits(*buf, env, env.Key, arrival)
	}
	if len(*buf) == 0 {
		if len(refused) > 0 {
			return "", Event{}, keyed.Ignore, sumRecordError(refused, false)
		}
		return "", Event{}, keyed.Observe, nil
	}
	e := Event{t: env.EventTime().UnixMilli(), id: strings.Clone(env.ID), typ: strings.Clone(env.Type), hits: append([]hit(nil), *buf...)}
	if len(refused) > 0 {
		e.refused = sumRecordError(refused, true)
	}
	return strings.Clone(env.Key), e, keyed.Fold, nil
}

// sumRecordError is the set-aside of an event whose value the sum rules
// refused (sorted by rule id) cannot add: kind overflow for a number past
// ±pipeline.MaxValue (as aggregate's), invalid for one no float64 holds,
// naming the field and the rules; others says other rules still read it.
func sumRecordError(refused []*SumError, others bool) *keyed.RecordError {
	first := refused[0]
	re := &keyed.RecordError{Kind: setaside.KindInvalid}
	var pe *stream.PoisonRecordError
	if errors.As(first.Err, &pe) {
		re.Field = pe.Field
	}
	if pipeline.Overflows(first.Err) {
		re.Kind = setaside.KindOverflow
	}
	ids := make([]string, len(refused))
	for i, r := range refused {
		ids[i] = strconv.Quote(r.Rule)
	}
	rules := "sum rule " + ids[0]
	if len(ids) > 1 {
		rules = "sum rules " + strings.Join(ids, ", ")
	}
	re.Reason = fmt.Sprintf("%v: %s cannot add it, so they skip this event", first.Err, rules)
	if len(ids) == 1 {
		re.Reason = fmt.Sprintf("%v: %s cannot add it, so it skips this event", first.Err, rules)
	}
	if others {
		re.Reason += "; the other rules that read it still match it"
	} else {
		re.Reason += "; no other rule reads it"
	}
	return re
}

// NewState decodes a key's state.
func (o *Operator) NewState(key string, blob []byte) (keyed.State[Event], error) {
	st, err := decodeCEP(blob)
	if err != nil {
		return nil, err
	}
	return &keyState{o: o, key: key, st: st, rs: o.rules.Load(), now: o.now()}, nil
}

// keyState is a key's state as a keyed.State.
type keyState struct {
	o   *Operator
	key string
	st  *cepState
	rs  *RuleSet
	now time.Time
	// seqs numbers the sequences buffered events hit, and open is
	// stateBytes' count of their partial matches (charge).
	seqs map[string]int
	open []int
}

// lookup finds a rule's definition.
func (s *keyState) lookup(id string) (*Rule, bool) {
	sr := s.rs.Rule(id)
	if sr == nil {
		return nil, false
	}
	return sr.Rule, true
}

// live reports whether a rule still reads events at processing time.
func (s *keyState) live(id string) bool {
	sr := s.rs.Rule(id)
	return sr != nil && sr.LiveAt(s.now)
}

func (s *keyState) Compact() { s.st.compact() }

// The sizes below bound the encoding (codec.go) of each part of a key's
// state: the string table's rule ids and types are counted wherever they
// are referred to.

func pendingBytes(id, typ string, hits []hit) int {
	n := 24 + len(id) + len(typ)
	for _, h := range hits {
		n += 16 + len(h.rule)
	}
	return n
}

// refBytes is the size of one event in a partial match or a match.
func refBytes(id, typ string) int { return 48 + len(id) + len(typ) }

func refsBytes(events []evRef) int {
	n := 0
	for i := range events {
		n += refBytes(events[i].id, events[i].typ)
	}
	return n
}

// headBytes is the size of a partial match or a match of rule id, less
// its events: the same for both, so matching that turns one into the
// other adds nothing (r nil: a rule no longer known, whose partial
// matches are dropped).
func headBytes(id string, r *Rule) int {
	n := 16 + len(id)
	if r != nil && r.absence >= 0 {
		n += len(r.Steps[r.absence].Name)
	}
	return n
}

// stateBytes is what the budget bounds: the partial matches, and the
// buffered events each at charge (with extra buffered too, when not nil).
func (s *keyState) stateBytes(extra *pendingEv) int {
	for i := range s.st.pending {
		s.plan(&s.st.pending[i])
	}
	if extra != nil {
		s.plan(extra)
	}
	// open counts, per sequence some buffered event can extend, the
	// partial matches an event can extend when it is matched.
	s.open = append(s.open[:0], make([]int, len(s.seqs))...)
	n := 16
	for i := range s.st.partials {
		p := &s.st.partials[i]
		r, _ := s.lookup(p.rule)
		n += headBytes(p.rule, r) + refsBytes(p.events)
		if r != nil && r.Kind == Sequence && int(p.next) < r.positives {
			if j, ok := s.seqs[p.rule]; ok {
				s.open[j]++
			}
		}
	}
	// Buffered events in the order they will be matched: extra goes after
	// the events of its time, as buffer puts it.
	placed := extra == nil
	for i := range s.st.pending {
		e := &s.st.pending[i]
		if !placed && e.t > extra.t {
			n += s.charge(extra)
			placed = true
		}
		n += s.charge(e)
	}
	if !placed {
		n += s.charge(extra)
	}
	return n
}

// charge is what a buffered event counts for: the larger of its own size
// and the most that matching it can add to the partial matches and the
// matches — for each rule it hits, a filter's match or a threshold's
// event (one event and a head); for a sequence, a new partial match if it
// can begin one, and itself in each partial match it can extend: at most
// those open when it is matched (s.open: the ones now, plus one per
// earlier buffered event that can begin one, counted as they are
// charged), never more than maxPartialsPerRule. Matching an event and
// firing an absence otherwise only move a partial match to the matches or
// drop it, so the state and its matches never grow past what was charged.
func (s *keyState) charge(e *pendingEv) int {
	c := e.plan
	grow := c.fixed
	for _, h := range c.seq {
		if h.extends {
			grow += min(s.open[h.rule], maxPartialsPerRule) * c.ref
		}
		if h.opens {
			s.open[h.rule]++
		}
	}
	return max(c.own, grow)
}

// heaviest is the rule that holds the most of the key's budget, and how
// many bytes of it: its partial matches, and for each buffered event
// (extra last), what matching it can add for that rule — a new match or
// partial match where it begins one, itself in each of the rule's partial
// matches it can extend, as charge counts them. It names the rule in a
// state-budget set-aside: one careless rule (many noSkip steps of one
// type over a day) fills a busy key's budget, and then the key's events
// are set aside for every rule.
func (s *keyState) heaviest(extra *pendingEv) (string, int) {
	by := map[string]int{}
	ids := make([]string, len(s.seqs))
	for id, j := range s.seqs {
		ids[j] = id
	}
	open := make([]int, len(s.seqs))
	for i := range s.st.partials {
		p := &s.st.partials[i]
		r, _ := s.lookup(p.rule)
		by[p.rule] += headBytes(p.rule, r) + refsBytes(p.events)
		if r != nil && r.Kind == Sequence && int(p.next) < r.positives {
			if j, ok := s.seqs[p.rule]; ok {
				open[j]++
			}
		}
	}
	add := func(e *pendingEv) {
		for _, h := range e.hits {
			if r, ok := s.lookup(h.rule); ok && h.mask&1 != 0 {
				by[h.rule] += headBytes(r.ID, r) + e.plan.ref
			}
		}
		for _, h := range e.plan.seq {
			if h.extends {
				by[ids[h.rule]] += min(open[h.rule], maxPartialsPerRule) * e.plan.ref
			}
			if h.opens {
				open[h.rule]++
			}
		}
	}
	for i := range s.st.pending {
		add(&s.st.pending[i])
	}
	if extra != nil {
		add(extra)
	}
	rule, most := "", 0
	for id, n := range by {
		if n > most || n == most && id < rule {
			rule, most = id, n
		}
	}
	return rule, most
}

// chargePlan is what charge needs of a buffered event, worked out once
// per fold: its own size, what it adds whatever the partial matches (each
// filter's and threshold's match or event, each sequence's new partial
// match), and its hits of sequences, whose cost depends on them.
type chargePlan struct {
	own, fixed, ref int
	seq             []seqCharge
}

// seqCharge is a buffered event's hit of a sequence (rule: its index in
// keyState.seqs): whether it can extend the rule's partial matches, and
// whether it opens one that later events can extend.
type seqCharge struct {
	rule           int
	extends, opens bool
}

// plan works out e's chargePlan if it has none.
func (s *keyState) plan(e *pendingEv) {
	if e.plan != nil {
		return
	}
	c := &chargePlan{own: pendingBytes(e.id, e.typ, e.hits), ref: refBytes(e.id, e.typ)}
	for _, h := range e.hits {
		r, ok := s.lookup(h.rule)
		if !ok {
			continue // not matched
		}
		begins := h.mask&1 != 0
		if begins {
			c.fixed += headBytes(r.ID, r) + c.ref
		}
		if r.Kind != Sequence {
			continue
		}
		extends := h.mask&(uint16(1)<<r.positives-2) != 0 // a positive step after the first
		if opens := begins && r.positives > 1; extends || opens {
			j, ok := s.seqs[r.ID]
			if !ok {
				if s.seqs == nil {
					s.seqs = map[string]int{}
				}
				j = len(s.seqs)
				s.seqs[r.ID] = j
			}
			c.seq = append(c.seq, seqCharge{rule: j, extends: extends, opens: opens})
		}
	}
	e.plan = c
}

// outboxBytes is the size of the matches waiting to be sent.
func (s *keyState) outboxBytes() int {
	n := 0
	for i := range s.st.out {
		m := &s.st.out[i]
		n += 16 + len(m.Rule) + len(m.Absent) + refsBytes(m.Events)
	}
	return n
}

func (s *keyState) Add(v Event, wm time.Time) (keyed.Fate, *keyed.RecordError) {
	w := wm.UnixMilli()
	s.st.process(s, w)
	if v.t < w {
		return keyed.Late, v.refused
	}
	e := pendingEv{t: v.t, id: v.id, typ: v.typ, hits: v.hits}
	if n := s.stateBytes(&e); n > s.o.maxBytes {
		var re *keyed.RecordError
		clear(s.open) // e alone, with no partial match open
		if own := s.charge(&e); own > s.o.maxBytes {
			re = &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
				Reason: fmt.Sprintf("this event of key %q hits %d CEP rules, whose matches and partial matches may take %d bytes: more than the key's %d-byte budget (one DynamoDB item) holds, so it can never be matched",
					s.key, len(v.hits), own, s.o.maxBytes)}
		} else {
			re = &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
				Reason: fmt.Sprintf("the CEP state of key %q would count %d bytes with this event (buffered events at the most their matching can add, and partial matches): past its %d-byte budget (one DynamoDB item): the key takes events again as its buffered events are matched and its matches complete or time out",
					s.key, n, s.o.maxBytes)}
		}
		if rule, n := s.heaviest(&e); rule != "" {
			re.Reason += fmt.Sprintf("; rule %q holds the most of it (%d bytes): change or delete it if the key's other rules should go on reading its events (POST /test shows what a rule does to a key's state)", rule, n)
		}
		if v.refused != nil { // one set-aside per record: say both
			re.Reason += "; besides, " + v.refused.Field + ": " + v.refused.Reason
		}
		return keyed.Aside, re
	}
	s.st.buffer(e)
	return keyed.Added, v.refused
}

func (s *keyState) Advance(wm time.Time) { s.st.process(s, wm.UnixMilli()) }

func (s *keyState) Outbox() int { return len(s.st.out) }

func (s *keyState) NextDue() time.Time {
	if due := s.st.nextDue(s); due != 0 {
		return msTime(due)
	}
	return time.Time{}
}

// Size bounds the encoded state item: the state and the matches waiting
// to be sent (what the runner's fold checkpoint measures).
func (s *keyState) Size() int { return s.stateBytes(nil) + s.outboxBytes() }

func (s *keyState) Encode(dst []byte) ([]byte, error) { return encodeCEP(dst, s.st), nil }

func (s *keyState) Render() ([]emit.Record, error) {
	out := make([]emit.Record, 0, len(s.st.out))
	for _, m := range s.st.out {
		b, err := renderMatch(s.key, s.rs.Rule(m.Rule), m)
		if err != nil {
			return nil, err
		}
		out = append(out, emit.Record{Data: b, PartitionKey: s.key})
	}
	return out, nil
}

// RuleSource is where the handler reads the rules: Version changes with
// every change to them (a cheap read), List reads them all.
type RuleSource interface {
	Version(ctx context.Context) (int64, error)
	List(ctx context.Context) ([]*StoredRule, error)
}

var _ RuleSource = (*Store)(nil)

// Handler is the CEP function: the keyed runner plus the rules, checked
// every RefreshInterval before a batch or a tick (one read of the rules
// table's version; the rules themselves are read again when it changed).
type Handler struct {
	*keyed.Runner[Event]
	op       *Operator
	src      RuleSource
	refresh  time.Duration
	now      func() time.Time
	mu       sync.Mutex
	checked  time.Time // when the copy was last known current
	version  int64
	haveCopy bool
}

// NewHandler returns the CEP handler of cfg: state in views' table,
// matches on the stream named out, rules read from src.
func NewHandler(cfg *Config, views *state.Views, kin emit.Putter, out string, src RuleSource, now func() time.Time, opts ...keyed.Option) *Handler {
	if now == nil {
		now = time.Now
	}
	op := NewOperator(NewRuleSet(nil, time.Time{}), now)
	opts = append([]keyed.Option{keyed.WithClock(now)}, opts...)
	r := keyed.New[Event](Settings(cfg), op, views, kin, out, opts...)
	return &Handler{Runner: r, op: op, src: src, refresh: RefreshInterval, now: now}
}

// WithTiming re-reads the rules whenever the copy is older than t.Refresh
// (RefreshInterval unless set): the rules function's store must stamp
// changes by the same t (Store.WithTiming).
func (h *Handler) WithTiming(t Timing) *Handler { h.refresh = t.Refresh; return h }

// Settings are the runner settings of CEP.
func Settings(cfg *Config) keyed.Settings {
	return keyed.Settings{Name: cfg.Name, Kind: StateKind, OutOfOrderness: cfg.OutOfOrderness, IdleTimeout: cfg.IdleTimeout, FoldBytes: FoldBytes}
}

// Operator is the handler's operator (for the naive baseline).
func (h *Handler) Operator() *Operator { return h.op }

// Refresh makes sure the copy of the rules is current if it was last
// known current more than RefreshInterval ago (or always, with force): it
// reads the rules table's version, and the rules when the version moved.
// A failed read fails the invocation: without the rules no event can be
// judged.
func (h *Handler) Refresh(ctx context.Context, force bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if !force && h.haveCopy && now.Sub(h.checked) < h.refresh {
		return nil
	}
	v, err := h.src.Version(ctx)
	if err != nil {
		return fmt.Errorf("cep: reading the rules' version: %w", err)
	}
	if !h.haveCopy || v != h.version {
		rules, err := h.src.List(ctx)
		if err != nil {
			return fmt.Errorf("cep: reading the rules: %w", err)
		}
		h.op.SetRules(NewRuleSet(rules, now))
		h.version, h.haveCopy = v, true
	}
	h.checked = now
	return nil
}

// Invoke refreshes the rules and runs the batch or tick.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if err := h.Refresh(ctx, false); err != nil {
		return nil, err
	}
	return h.Runner.Invoke(ctx, payload)
}

// HandleBatch refreshes the rules and runs one batch.
func (h *Handler) HandleBatch(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	if err := h.Refresh(ctx, false); err != nil {
		return events.KinesisEventResponse{}, err
	}
	return h.Runner.HandleBatch(ctx, ev)
}

// Tick refreshes the rules and closes what idle shards' watermarks pass.
func (h *Handler) Tick(ctx context.Context, now time.Time) (keyed.TickResult, error) {
	if err := h.Refresh(ctx, false); err != nil {
		return keyed.TickResult{}, err
	}
	return h.Runner.Tick(ctx, now)
}

// TypeMatch is the type of match records on the matches stream.
const TypeMatch = "cep_match"

// MatchEvent is one event of a match.
type MatchEvent struct {
	Step      string    `json:"step"`
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	EventTime time.Time `json:"eventTime"`
	Value     *float64  `json:"value,omitempty"`
}

// MatchData is the data of a match record.
type MatchData struct {
	Rule string `json:"rule"`
	// Kind is filter, sequence, absence, count or sum.
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Events are the matched events (at most MaxListedEvents: the first
	// and the last half; Count says how many there were).
	Events []MatchEvent `json:"events"`
	Count  int          `json:"count"`
	// Absent names the step that did not happen (absence).
	Absent string   `json:"absent,omitempty"`
	Sum    *float64 `json:"sum,omitempty"`
}

// MaxListedEvents bounds the events a match record lists.
const MaxListedEvents = 100

// MatchID is a match's stable id: the rule and a hash of the key and the
// matched events' ids, the same whichever attempt emits it.
func MatchID(rule, key string, ids []string) string {
	return rule + ":" + hashParts(append([]string{key}, ids...))
}

func renderMatch(key string, sr *StoredRule, m Match) ([]byte, error) {
	ids := make([]string, len(m.Events))
	for i, e := range m.Events {
		ids[i] = e.id
	}
	d := MatchData{Rule: m.Rule, Kind: matchKind(m), Count: len(m.Events), Absent: m.Absent}
	if len(m.Events) > 0 {
		d.Start, d.End = msTime(m.Events[0].t), msTime(m.Events[len(m.Events)-1].t)
	}
	listed := m.Events
	if len(listed) > MaxListedEvents {
		listed = append(append([]evRef(nil), listed[:MaxListedEvents/2]...), listed[len(listed)-MaxListedEvents/2:]...)
	}
	for _, e := range listed {
		me := MatchEvent{ID: e.id, Type: e.typ, EventTime: msTime(e.t)}
		if sr != nil && int(e.step) < len(sr.Rule.Steps) {
			me.Step = sr.Rule.Steps[e.step].Name
		}
		if m.Kind == Sum && finite(e.v) {
			v := e.v
			me.Value = &v
		}
		d.Events = append(d.Events, me)
	}
	// A sum is finite since values past ±pipeline.MaxValue are set aside;
	// a match made before that (an infinite sum in a stored outbox) is
	// sent without it rather than hold its key back for ever.
	if m.Kind == Sum && finite(m.Sum) {
		s := m.Sum
		d.Sum = &s
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	if m.Kind == Evicted {
		ids = append(ids, "(evicted)") // not the id of a match of the same events
	}
	env := stream.Envelope{ID: MatchID(m.Rule, key, ids), Type: TypeMatch, Key: key, OccurredAt: d.End, SentAt: d.End, Data: data}
	return json.Marshal(&env)
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

func matchKind(m Match) string {
	switch {
	case m.Kind == Evicted:
		return "evicted"
	case m.Absent != "":
		return "absence"
	case m.Kind == Filter:
		return "filter"
	case m.Kind == Count:
		return "count"
	case m.Kind == Sum:
		return "sum"
	}
	return "sequence"
}

// LogMatches is an emit hook (keyed.WithEmitHook) that logs each match put
// on the stream as one JSON line: message "cep match", with the match id,
// rule, key, kind, count and times (resent: a copy of a match that may have
// been logged before).
func LogMatches(log *slog.Logger) func(ctx context.Context, recs []emit.Record, resent bool) {
	return func(ctx context.Context, recs []emit.Record, resent bool) {
		for _, r := range recs {
			var env struct {
				ID   string    `json:"id"`
				Key  string    `json:"key"`
				Data MatchData `json:"data"`
			}
			if json.Unmarshal(r.Data, &env) != nil {
				continue
			}
			ids := make([]string, len(env.Data.Events))
			for i, e := range env.Data.Events {
				ids[i] = e.ID
			}
			log.InfoContext(ctx, "cep match", "matchId", env.ID, "rule", env.Data.Rule, "key", env.Key, "kind", env.Data.Kind,
				"events", ids, "count", env.Data.Count, "start", env.Data.Start, "end", env.Data.End, "resent", resent)
		}
	}
}
