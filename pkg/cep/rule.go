package cep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/durationtext"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Contiguity is how a step follows the one before it (Flink CEP's terms).
type Contiguity uint8

// The contiguities.
const (
	// Begin: the first step.
	Begin Contiguity = iota + 1
	// Next (strict contiguity): the very next event of the key among those
	// of the rule's types must match, or the partial match ends.
	Next
	// FollowedBy (relaxed contiguity): events that do not match in between
	// are skipped; the first one that matches is taken.
	FollowedBy
	// NotFollowedBy (absence, last step only): no event matching the step
	// may follow within the rule's time; the match is emitted when the
	// watermark passes the end of that time.
	NotFollowedBy
)

var contiguityNames = map[string]Contiguity{"begin": Begin, "next": Next, "followedBy": FollowedBy, "notFollowedBy": NotFollowedBy}

func (c Contiguity) String() string {
	for n, v := range contiguityNames {
		if v == c {
			return n
		}
	}
	return "?"
}

// AfterMatch is what happens to other partial matches when one completes
// (Flink's AfterMatchSkipStrategy).
type AfterMatch uint8

const (
	// SkipPastLastEvent (the default) drops every partial match of the rule
	// that began at or before the match's last event: one alert per
	// occurrence, not one per combination.
	SkipPastLastEvent AfterMatch = iota + 1
	// NoSkip keeps them: every combination is a match.
	NoSkip
)

// Kind is the shape of a rule, derived from its steps.
type Kind uint8

const (
	// Filter: one step, no quantifier: every matching event is a match
	// (a search query stored long-term).
	Filter Kind = iota + 1
	// Sequence: steps matched in order within the rule's time, optionally
	// ending with an absence.
	Sequence
	// Count: one step with timesOrMore n: n matching events within the time.
	Count
	// Sum: one step with sum and atLeast: matching events whose values
	// add up to at least atLeast within the time.
	Sum
	// Evicted is not a rule's kind but an output's: a partial match
	// dropped because its rule already held maxPartialsPerRule of the key
	// (its events, so the loss is on the matches stream, not silent).
	Evicted Kind = 0xEE
)

// Step is one compiled step of a pattern.
type Step struct {
	Name       string
	Contiguity Contiguity
	// Type is the event type the step reads; "" any.
	Type  string
	Where string
	where expr
	// TimesOrMore (Count rules) is how many matching events make a match.
	TimesOrMore int
	// SumOf and AtLeast (Sum rules): the matching events' values at SumOf
	// must add up to at least AtLeast.
	SumOf   pipeline.Path
	AtLeast float64
}

// matches reports whether ev matches the step (its type and where clause).
func (s *Step) matches(ev *stream.Envelope) bool {
	if s.Type != "" && s.Type != ev.Type {
		return false
	}
	return s.where == nil || s.where.eval(ev)
}

// Rule is a compiled rule.
type Rule struct {
	ID          string
	Description string
	Steps       []Step
	Within      time.Duration
	// Keys limits the rule to these keys; KeyPrefix to keys with this
	// prefix (both empty: every key).
	Keys       []string
	KeyPrefix  string
	AfterMatch AfterMatch
	Kind       Kind
	// Source is the definition as stored: compact JSON.
	Source []byte

	// positives is the number of positive steps; absence the absence step
	// (the last) or -1.
	positives int
	absence   int
	strict    bool // some step uses Next: events of its types that match no step break partial matches
	types     []string
}

// The JSON form of a rule. A pattern is a list of steps; each step names
// its contiguity by the key holding its name, as Flink's pattern API names
// them: {"begin": "a"}, {"next": "b"}, {"followedBy": "b"},
// {"notFollowedBy": "b"}.
type ruleJSON struct {
	ID          string     `json:"id"`
	Description string     `json:"description,omitempty"`
	Pattern     []stepJSON `json:"pattern"`
	Within      string     `json:"within,omitempty"`
	Keys        []string   `json:"keys,omitempty"`
	KeyPrefix   string     `json:"keyPrefix,omitempty"`
	AfterMatch  string     `json:"afterMatch,omitempty"`
}

type stepJSON struct {
	Begin         *string         `json:"begin,omitempty"`
	Next          *string         `json:"next,omitempty"`
	FollowedBy    *string         `json:"followedBy,omitempty"`
	NotFollowedBy *string         `json:"notFollowedBy,omitempty"`
	Type          string          `json:"type,omitempty"`
	Where         string          `json:"where,omitempty"`
	TimesOrMore   json.RawMessage `json:"timesOrMore,omitempty"` // read by timesOrMore, in its range

	Sum     string   `json:"sum,omitempty"`
	AtLeast *float64 `json:"atLeast,omitempty"`
}

// RuleError is a rule that cannot be used: Part names the part of the rule
// at fault ("pattern[1].where", "within").
type RuleError struct {
	Part   string
	Reason string
}

func (e *RuleError) Error() string {
	if e.Part == "" {
		return "rule: " + e.Reason
	}
	return "rule: " + e.Part + ": " + e.Reason
}

func ruleErr(part, format string, args ...any) error {
	return &RuleError{Part: part, Reason: fmt.Sprintf(format, args...)}
}

// Bounds of a rule.
const (
	MaxSteps       = 8
	MaxWithin      = 24 * time.Hour
	MaxTimesOrMore = 1000
	MaxRuleBytes   = 8 << 10
	maxKeys        = 100
)

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)
)

// ParseRule parses and checks a rule definition (JSON). Errors are
// *RuleError naming the part of the rule.
func ParseRule(doc []byte) (*Rule, error) {
	return parseRule(doc, false)
}

// parseRule is ParseRule; stored (a rule read from the rules table) still
// takes control, line-breaking and invisible characters in types and keys
// (noUnprintable), as rules added before that check were, so that such a
// rule can be listed and deleted.
func parseRule(doc []byte, stored bool) (*Rule, error) {
	if len(doc) > MaxRuleBytes {
		return nil, ruleErr("", "the definition is %d bytes; at most %d", len(doc), MaxRuleBytes)
	}
	var raw ruleJSON
	if err := strictjson.Decode(doc, &raw, strictjson.Options{MaxBytes: MaxRuleBytes, Name: "rule"}); err != nil {
		return nil, ruleJSONError(err)
	}
	r := &Rule{ID: raw.ID, Description: raw.Description, Keys: raw.Keys, KeyPrefix: raw.KeyPrefix, absence: -1}
	switch {
	case raw.ID == "":
		return nil, ruleErr("id", "required: 1 to 64 letters, digits, '-' or '_'")
	case !idPattern.MatchString(raw.ID):
		return nil, ruleErr("id", "%s must be 1 to 64 letters, digits, '-' or '_'", strictjson.QuoteCut(raw.ID, maxEchoBytes))
	case len(raw.Description) > 1024:
		return nil, ruleErr("description", "at most 1024 bytes")
	case len(raw.Pattern) == 0:
		return nil, ruleErr("pattern", "required: a list of steps, [{\"begin\": \"a\", \"type\": \"...\"}, {\"followedBy\": \"b\", ...}]")
	case len(raw.Pattern) > MaxSteps:
		return nil, ruleErr("pattern", "%d steps; at most %d", len(raw.Pattern), MaxSteps)
	case raw.Keys != nil && len(raw.Keys) == 0 && !stored:
		// [] would read every key, the opposite of what it says; a rule
		// stored with it before this check still loads, reading every key
		// as it did.
		return nil, ruleErr("keys", "is empty: give 1 to %d keys, or leave keys out to read every key", maxKeys)
	case len(raw.Keys) > maxKeys:
		return nil, ruleErr("keys", "%d keys; at most %d (use keyPrefix)", len(raw.Keys), maxKeys)
	case len(raw.Keys) > 0 && raw.KeyPrefix != "":
		return nil, ruleErr("keyPrefix", "set with keys: give one or the other")
	}
	// An event's key and type are bounded in characters (stream.Validate,
	// as Kinesis bounds a partition key), so a rule names any of them.
	for i, k := range raw.Keys {
		if k == "" || utf8.RuneCountInString(k) > stream.MaxKeyLength {
			return nil, ruleErr(fmt.Sprintf("keys[%d]", i), "a key is 1 to %d characters", stream.MaxKeyLength)
		}
		// A key twice is most likely another key misspelt as this one; a
		// rule stored with one before this check still loads.
		if j := slices.Index(raw.Keys[:i], k); j >= 0 && !stored {
			return nil, ruleErr(fmt.Sprintf("keys[%d]", i), "%s is keys[%d] again: give each key once", strictjson.QuoteCut(k, maxEchoBytes), j)
		}
		if err := noUnprintable(stored, fmt.Sprintf("keys[%d]", i), "key", k); err != nil {
			return nil, err
		}
	}
	if utf8.RuneCountInString(raw.KeyPrefix) > stream.MaxKeyLength {
		return nil, ruleErr("keyPrefix", "at most %d characters, as a key", stream.MaxKeyLength)
	}
	if err := noUnprintable(stored, "keyPrefix", "key", raw.KeyPrefix); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range raw.Pattern {
		s, err := parseStep(i, &raw.Pattern[i], len(raw.Pattern), stored)
		if err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, ruleErr(fmt.Sprintf("pattern[%d]", i), "the name %q is used by an earlier step", s.Name)
		}
		seen[s.Name] = true
		r.Steps = append(r.Steps, s)
	}
	last := &r.Steps[len(r.Steps)-1]
	switch {
	case len(r.Steps) == 1 && r.Steps[0].TimesOrMore > 0:
		r.Kind = Count
	case len(r.Steps) == 1 && !r.Steps[0].SumOf.IsZero():
		r.Kind = Sum
	case len(r.Steps) == 1:
		r.Kind = Filter
	default:
		r.Kind = Sequence
	}
	r.positives = len(r.Steps)
	if last.Contiguity == NotFollowedBy {
		r.absence, r.positives = len(r.Steps)-1, len(r.Steps)-1
	}
	for _, s := range r.Steps {
		if s.Contiguity == Next {
			r.strict = true
		}
		if !slices.Contains(r.types, s.Type) {
			r.types = append(r.types, s.Type)
		}
	}
	if raw.Within == "" {
		if r.Kind != Filter {
			return nil, ruleErr("within", "required: the time the whole pattern must happen in, for example \"10m\" (at most %s)", MaxWithin)
		}
	} else {
		d, err := durationtext.Parse(raw.Within)
		switch {
		case errors.Is(err, durationtext.ErrTooLong):
			return nil, ruleErr("within", "%s is %v; at most %s", strictjson.Cut(raw.Within, maxEchoBytes), err, MaxWithin)
		case err != nil:
			return nil, ruleErr("within", "%s is not a duration such as \"30s\" or \"10m\"", strictjson.QuoteCut(raw.Within, maxEchoBytes))
		case d <= 0 || d > MaxWithin:
			return nil, ruleErr("within", "%s: must be above zero and at most %s", strictjson.Cut(raw.Within, maxEchoBytes), MaxWithin)
		case d%time.Millisecond != 0:
			return nil, ruleErr("within", "%s is not a whole number of milliseconds", strictjson.Cut(raw.Within, maxEchoBytes))
		case r.Kind == Filter:
			return nil, ruleErr("within", "a pattern of one step without a quantifier matches single events: it has no time to be within")
		}
		r.Within = d
	}
	switch raw.AfterMatch {
	case "", "skipPastLastEvent":
		r.AfterMatch = SkipPastLastEvent
	case "noSkip":
		r.AfterMatch = NoSkip
		if r.Kind == Count || r.Kind == Sum {
			return nil, ruleErr("afterMatch", "a threshold (timesOrMore, sum) starts counting again after each match: noSkip does not apply")
		}
	default:
		return nil, ruleErr("afterMatch", "%s: want \"skipPastLastEvent\" (the default) or \"noSkip\"", strictjson.QuoteCut(raw.AfterMatch, maxEchoBytes))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return nil, ruleErr("", "%v", err)
	}
	r.Source = b.Bytes()
	return r, nil
}

func parseStep(i int, s *stepJSON, n int, stored bool) (Step, error) {
	part := fmt.Sprintf("pattern[%d]", i)
	var st Step
	set := 0
	for _, c := range []struct {
		v *string
		c Contiguity
	}{{s.Begin, Begin}, {s.Next, Next}, {s.FollowedBy, FollowedBy}, {s.NotFollowedBy, NotFollowedBy}} {
		if c.v != nil {
			set++
			st.Name, st.Contiguity = *c.v, c.c
		}
	}
	switch {
	case set == 0:
		return st, ruleErr(part, "names no step: give one of \"begin\" (first step), \"next\", \"followedBy\" or \"notFollowedBy\" with the step's name")
	case set > 1:
		return st, ruleErr(part, "gives more than one of begin, next, followedBy and notFollowedBy")
	case !namePattern.MatchString(st.Name):
		return st, ruleErr(part+"."+st.Contiguity.String(), "%s: a step's name is 1 to 32 letters, digits or '_'", strictjson.QuoteCut(st.Name, maxEchoBytes))
	case i == 0 && st.Contiguity != Begin:
		return st, ruleErr(part, "the first step must be {\"begin\": \"<name>\"}, not %s", st.Contiguity)
	case i > 0 && st.Contiguity == Begin:
		return st, ruleErr(part+".begin", "only the first step begins a pattern: use next or followedBy")
	case st.Contiguity == NotFollowedBy && i != n-1:
		return st, ruleErr(part+".notFollowedBy", "an absence must be the last step")
	case utf8.RuneCountInString(s.Type) > stream.MaxTypeLength:
		return st, ruleErr(part+".type", "at most %d characters, as an event's type", stream.MaxTypeLength)
	}
	if err := noUnprintable(stored, part+".type", "type", s.Type); err != nil {
		return st, err
	}
	st.Type = s.Type
	if s.Where != "" {
		e, err := parseExpr(s.Where)
		if err != nil {
			return st, ruleErr(part+".where", "%v", err)
		}
		st.where, st.Where = e, s.Where
	}
	if s.Type == "" && s.Where == "" && st.Contiguity != NotFollowedBy {
		return st, ruleErr(part, "matches every event: give a type, a where clause or both")
	}
	times, err := timesOrMore(s.TimesOrMore, stored)
	if err != nil {
		return st, ruleErr(part+".timesOrMore", "%s", err)
	}
	quantified := times != 0 || s.Sum != "" || s.AtLeast != nil
	if quantified && n != 1 {
		return st, ruleErr(part, "timesOrMore and sum are allowed on a pattern of one step only")
	}
	switch {
	case times != 0 && (s.Sum != "" || s.AtLeast != nil):
		return st, ruleErr(part, "give timesOrMore or sum with atLeast, not both")
	case s.Sum != "" && s.AtLeast == nil:
		return st, ruleErr(part+".atLeast", "required with sum: the threshold the values must reach")
	case s.Sum == "" && s.AtLeast != nil:
		return st, ruleErr(part+".sum", "required with atLeast: the data field to add up, for example \"data.amount\"")
	}
	st.TimesOrMore = times
	if s.Sum != "" {
		p, err := pipeline.ParsePath(s.Sum)
		if err != nil || !p.IsData() || s.Sum == "data" {
			return st, ruleErr(part+".sum", "%s: want a data field, for example \"data.amount\"", strictjson.QuoteCut(s.Sum, maxEchoBytes))
		}
		st.SumOf, st.AtLeast = p, *s.AtLeast
	}
	return st, nil
}

// timesOrMore reads a step's timesOrMore: 0 when it is left out (or
// null), else a whole number from 2 to MaxTimesOrMore. One given as 0 is
// refused like any other value outside that range, not read as left out
// (the step would be a filter, and the rule's within blamed); a rule stored
// before that was refused (stored) still loads as the filter it ran as.
func timesOrMore(raw json.RawMessage, stored bool) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	n, reason := strictjson.WholeNumber(raw, 2, MaxTimesOrMore)
	if reason != "" {
		if stored && (string(raw) == "0" || string(raw) == "-0") {
			return 0, nil
		}
		return 0, errors.New(reason)
	}
	return int(n), nil
}

// noUnprintable refuses a control, line-breaking or invisible character
// (stream.FirstUnprintable) in what a rule matches an event's type or key
// (what) against: ingest refuses them there (stream.Envelope.Validate), so
// the rule could never match. A rule stored before this check still loads,
// so it can be listed and deleted.
func noUnprintable(stored bool, part, what, v string) error {
	if u, found := stream.FirstUnprintable(v); found && !stored {
		return ruleErr(part, "holds %v: no event's %s can (ingest refuses it), so the rule could never match", u, what)
	}
	return nil
}

// ruleJSONError is a strictjson refusal as a *RuleError naming the part
// ("pattern[1].whre: unknown field; did you mean \"where\"?").
func ruleJSONError(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return ruleErr(se.Path, "%s", se.Reason)
	}
	return ruleErr("", "%v", err)
}

// appliesToKey reports whether the rule reads events of key.
func (r *Rule) appliesToKey(key string) bool {
	if len(r.Keys) > 0 {
		return slices.Contains(r.Keys, key)
	}
	return strings.HasPrefix(key, r.KeyPrefix)
}

// differs names the first part of the rule whose meaning differs from o's
// ("description", "pattern[1].where", "within"), "" when the two are the
// same rule however written: the definitions are compared parsed, so
// whitespace, the order of a definition's keys or of its keys list, a
// where clause's spacing and a default spelled out make no difference.
func (r *Rule) differs(o *Rule) string {
	switch {
	case r.ID != o.ID:
		return "id"
	case r.Description != o.Description:
		return "description"
	case len(r.Steps) != len(o.Steps):
		return "pattern"
	}
	for i := range r.Steps {
		s, t := &r.Steps[i], &o.Steps[i]
		part := fmt.Sprintf("pattern[%d]", i)
		switch {
		case s.Name != t.Name || s.Contiguity != t.Contiguity:
			return part
		case s.Type != t.Type:
			return part + ".type"
		case !reflect.DeepEqual(s.where, t.where):
			return part + ".where"
		case s.TimesOrMore != t.TimesOrMore:
			return part + ".timesOrMore"
		case s.SumOf.String() != t.SumOf.String():
			return part + ".sum"
		case s.AtLeast != t.AtLeast:
			return part + ".atLeast"
		}
	}
	switch {
	case r.Within != o.Within:
		return "within"
	case !sameSet(r.Keys, o.Keys):
		return "keys"
	case r.KeyPrefix != o.KeyPrefix:
		return "keyPrefix"
	case r.AfterMatch != o.AfterMatch:
		return "afterMatch"
	}
	return ""
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}
