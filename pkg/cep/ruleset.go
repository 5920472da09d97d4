package cep

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Interval is a span of arrival times (on the events stream) during which
// a rule reads events: [From, Until); a zero Until is open.
type Interval struct {
	From  time.Time `json:"from"`
	Until time.Time `json:"until,omitzero"`
}

// Rule statuses in the rules table.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
	StatusDeleted  = "deleted"
)

// StoredRule is a rule with its life in the rules table.
type StoredRule struct {
	Rule      *Rule
	Status    string
	Intervals []Interval
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ActiveAt reports whether the rule reads an event that arrived at t.
func (s *StoredRule) ActiveAt(t time.Time) bool {
	for _, iv := range s.Intervals {
		if !t.Before(iv.From) && (iv.Until.IsZero() || t.Before(iv.Until)) {
			return true
		}
	}
	return false
}

// LiveAt reports whether the rule still runs at processing time t: it is
// not disabled or deleted as of t. Events it read while active are still
// matched, but its absences no longer fire: the events that would cancel
// them are not read any more.
func (s *StoredRule) LiveAt(t time.Time) bool {
	if len(s.Intervals) == 0 {
		return false
	}
	last := s.Intervals[len(s.Intervals)-1]
	return last.Until.IsZero() || t.Before(last.Until)
}

// lastUntil is when the rule stopped reading events (zero: it has not).
func (s *StoredRule) lastUntil() time.Time {
	if len(s.Intervals) == 0 {
		return time.Time{}
	}
	return s.Intervals[len(s.Intervals)-1].Until
}

// hit is what an event is to one rule: the steps it matches (bit i: step
// i), and its value for a sum rule. A hit with no step matched is kept
// for rules with strict contiguity: it breaks their partial matches.
type hit struct {
	rule  string
	mask  uint16
	value float64
}

// RuleSet is an immutable snapshot of the rules table, indexed so that the
// cost of an event follows the rules that can match it: by event type
// (rules with a step of that type, plus rules with a step of any type),
// then by key (rules limited to some keys are found by the key, rules with
// a key prefix are checked, the others apply to every key).
type RuleSet struct {
	rules    map[string]*StoredRule
	byType   map[string]*bucket
	anyType  *bucket
	indexed  []*StoredRule // sorted by id: what the naive path walks
	LoadedAt time.Time
}

type bucket struct {
	all      []*StoredRule
	byKey    map[string][]*StoredRule
	prefixed []*StoredRule
}

func (b *bucket) add(s *StoredRule) {
	r := s.Rule
	switch {
	case len(r.Keys) > 0:
		if b.byKey == nil {
			b.byKey = map[string][]*StoredRule{}
		}
		for _, k := range r.Keys {
			b.byKey[k] = append(b.byKey[k], s)
		}
	case r.KeyPrefix != "":
		b.prefixed = append(b.prefixed, s)
	default:
		b.all = append(b.all, s)
	}
}

// indexHorizon is how long after a rule stopped reading events it stays
// indexed: a batch Lambda retries can be up to the mapping's maximum
// record age (1 h) old, and its events must meet the same rules.
const indexHorizon = 2 * time.Hour

// NewRuleSet indexes rules as loaded at loadedAt.
func NewRuleSet(rules []*StoredRule, loadedAt time.Time) *RuleSet {
	rs := &RuleSet{rules: map[string]*StoredRule{}, byType: map[string]*bucket{}, anyType: &bucket{}, LoadedAt: loadedAt}
	for _, s := range rules {
		rs.rules[s.Rule.ID] = s
		if u := s.lastUntil(); !u.IsZero() && u.Before(loadedAt.Add(-indexHorizon)) {
			continue
		}
		rs.indexed = append(rs.indexed, s)
		for _, t := range s.Rule.types {
			if t == "" {
				rs.anyType.add(s)
				continue
			}
			b, ok := rs.byType[t]
			if !ok {
				b = &bucket{}
				rs.byType[t] = b
			}
			b.add(s)
		}
	}
	sort.Slice(rs.indexed, func(i, j int) bool { return rs.indexed[i].Rule.ID < rs.indexed[j].Rule.ID })
	return rs
}

// Rule returns a rule by id (nil if unknown).
func (rs *RuleSet) Rule(id string) *StoredRule { return rs.rules[id] }

// Rules returns every rule, sorted by id.
func (rs *RuleSet) Rules() []*StoredRule {
	out := make([]*StoredRule, 0, len(rs.rules))
	for _, s := range rs.rules {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule.ID < out[j].Rule.ID })
	return out
}

// Active counts the rules reading events that arrive at t.
func (rs *RuleSet) Active(t time.Time) int {
	n := 0
	for _, s := range rs.rules {
		if s.ActiveAt(t) {
			n++
		}
	}
	return n
}

// hits evaluates the rules an event of key, arrived at arrival, can match,
// through the index; dst is reused. Hits are sorted by rule id. refused
// are the sum rules reading the event that cannot add its value
// (*SumError), sorted by rule id: those rules skip the event, and have no
// hit; the other rules still read it.
func (rs *RuleSet) hits(dst []hit, ev *stream.Envelope, key string, arrival time.Time) ([]hit, []*SumError) {
	dst = dst[:0]
	var refused []*SumError
	visit := func(b *bucket) {
		if b == nil {
			return
		}
		for _, s := range b.all {
			dst, refused = s.hit(dst, refused, ev, arrival)
		}
		for _, s := range b.byKey[key] {
			dst, refused = s.hit(dst, refused, ev, arrival)
		}
		for _, s := range b.prefixed {
			if strings.HasPrefix(key, s.Rule.KeyPrefix) {
				dst, refused = s.hit(dst, refused, ev, arrival)
			}
		}
	}
	visit(rs.byType[ev.Type])
	visit(rs.anyType)
	if len(dst) > 1 {
		sort.Slice(dst, func(i, j int) bool { return dst[i].rule < dst[j].rule })
		// A rule with steps of this type and of any type is in two buckets.
		out := dst[:1]
		for _, h := range dst[1:] {
			if h.rule != out[len(out)-1].rule {
				out = append(out, h)
			}
		}
		dst = out
	}
	return dst, sortRefused(refused)
}

// naiveHits is hits without the index: every rule is evaluated on every
// event (the baseline make bench measures the index against).
func (rs *RuleSet) naiveHits(dst []hit, ev *stream.Envelope, key string, arrival time.Time) ([]hit, []*SumError) {
	dst = dst[:0]
	var refused []*SumError
	for _, s := range rs.indexed {
		if s.Rule.appliesToKey(key) {
			dst, refused = s.hit(dst, refused, ev, arrival)
		}
	}
	return dst, sortRefused(refused)
}

// sortRefused sorts refusals by rule id, each rule once (a rule can be in
// two buckets).
func sortRefused(refused []*SumError) []*SumError {
	if len(refused) < 2 {
		return refused
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].Rule < refused[j].Rule })
	out := refused[:1]
	for _, r := range refused[1:] {
		if r.Rule != out[len(out)-1].Rule {
			out = append(out, r)
		}
	}
	return out
}

// SumError is an event a sum rule reads whose value no sum can hold (past
// ±pipeline.MaxValue, or not a finite number): that rule skips the event,
// rather than make its sum infinite, and the record is set aside naming
// the field and the rule, as aggregate sets aside such a value; the other
// rules still read the event.
type SumError struct {
	Rule string
	// Err is the *stream.PoisonRecordError naming the field.
	Err error
}

func (e *SumError) Error() string {
	return fmt.Sprintf("%v (sum rule %q cannot add it)", e.Err, e.Rule)
}

func (e *SumError) Unwrap() error { return e.Err }

// hit appends the rule's hit for an event, if it has one, or, for a sum
// rule that cannot add the event's value, its refusal.
func (s *StoredRule) hit(dst []hit, refused []*SumError, ev *stream.Envelope, arrival time.Time) ([]hit, []*SumError) {
	r := s.Rule
	h := hit{rule: r.ID}
	relevant := false
	for i := range r.Steps {
		st := &r.Steps[i]
		if st.Type != "" && st.Type != ev.Type {
			continue
		}
		if !relevant {
			if !s.ActiveAt(arrival) {
				return dst, refused
			}
			relevant = true
		}
		if !st.matches(ev) {
			continue
		}
		if !st.SumOf.IsZero() {
			v, counted, err := sumValue(ev, st.SumOf)
			if err != nil {
				// A sum rule has one step and no strict contiguity: it
				// has no hit at all.
				return dst, append(refused, &SumError{Rule: r.ID, Err: err})
			}
			if !counted {
				continue
			}
			h.value = v
		}
		h.mask |= 1 << i
	}
	if h.mask != 0 || (relevant && r.strict) {
		dst = append(dst, h)
	}
	return dst, refused
}

// sumValue reads a sum rule's value as aggregate reads a window's
// (pipeline.Path.Number): an event whose field is missing or not a number
// is not counted (counted false); a number past ±pipeline.MaxValue, or
// one no float64 holds, is an error naming the field.
func sumValue(ev *stream.Envelope, p pipeline.Path) (v float64, counted bool, err error) {
	raw, err := p.Raw(ev)
	if err != nil || len(raw) == 0 {
		return 0, false, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, false, nil
	}
	v, err = p.Number(ev)
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}
