package cep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/tributary-dev/tributary/pkg/dedupe"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Offline runs rules over a list of events without AWS, as the function
// would if all of them arrived on one shard in the order given (each
// event's arrival is its receivedAt, or its event time without one): the
// same index, watermark, matching and match records, and a producer's copy
// of an event (its key and id again within dedupe.DefaultHorizon, the
// CEP file's default dedupeHorizon) suppressed. It is what
// `cmd/rules test` and the rules function's /test route run, and what a
// rule added later runs over the past (Backfill).
type Offline struct {
	rs             *RuleSet
	op             *Operator
	outOfOrderness time.Duration
	wm             int64
	seen           bool
	keys           map[string]*keyState
	order          []string
	// Late counts events dropped as late; Aside events the function sets
	// aside (a key's state budget, a value no sum holds).
	Late, Aside int
	// beginBefore, when set, keeps events arriving at or after it from
	// starting a match (Backfill: the live function starts those).
	beginBefore time.Time
	matches     []OfflineMatch
	// Found counts every match made; Truncated says some of them were left
	// out of the list, past the limits (Limit).
	Found     int
	Truncated bool
	// maxMatches and maxBytes (0: none) bound the matches listed and their
	// records' bytes.
	maxMatches, maxBytes, bytes int
	// claims are the events folded within dedupeHorizon of the newest
	// arrival, by key and id, as the function's dedupe ledger keeps them
	// (claimOrder in arrival order, to forget them).
	dedupeHorizon time.Duration
	claims        map[dedupe.Identity]offlineClaim
	claimOrder    []offlineClaimRef
}

// offlineClaim is the first event folded with an identity (key and id).
type offlineClaim struct {
	arrival time.Time
	content dedupe.Fingerprint
}

type offlineClaimRef struct {
	arrival time.Time
	id      dedupe.Identity
}

// Limit bounds the matches Finish lists: at most maxMatches, whose records
// add up to at most maxBytes (0: no bound). Matches past them are counted
// in Found, never rendered, so memory follows the limits, not the matches.
func (o *Offline) Limit(maxMatches, maxBytes int) { o.maxMatches, o.maxBytes = maxMatches, maxBytes }

// full reports whether the list of matches is at its limits.
func (o *Offline) full() bool {
	return o.Truncated || (o.maxMatches > 0 && len(o.matches) >= o.maxMatches)
}

// OfflineMatch is one match: its record as the matches stream gets it.
type OfflineMatch struct {
	ID   string    `json:"id"`
	Key  string    `json:"key"`
	Data MatchData `json:"data"`
	// Record is the record as the matches stream gets it.
	Record []byte `json:"-"`
}

// NewOffline runs rules (each active from the start) with a watermark of
// the newest event time minus outOfOrderness.
func NewOffline(rules []*Rule, outOfOrderness time.Duration) *Offline {
	stored := make([]*StoredRule, len(rules))
	for i, r := range rules {
		stored[i] = &StoredRule{Rule: r, Status: StatusActive, Intervals: []Interval{{From: time.Unix(0, 0)}}}
	}
	return NewOfflineStored(stored, outOfOrderness, time.Now())
}

// NewOfflineStored runs stored rules, with their intervals, at processing
// time now.
func NewOfflineStored(rules []*StoredRule, outOfOrderness time.Duration, now time.Time) *Offline {
	rs := NewRuleSet(rules, now)
	op := NewOperator(rs, func() time.Time { return now })
	return &Offline{rs: rs, op: op, outOfOrderness: outOfOrderness, keys: map[string]*keyState{},
		dedupeHorizon: dedupe.DefaultHorizon, claims: map[dedupe.Identity]offlineClaim{}}
}

// copyOf reports whether an event some rule reads is a producer's copy of
// one folded before (its key and id arrived within the dedupe horizon), as
// the function's ledger judges it (package dedupe): a copy with the same
// content has no effect; one with other content (an id reused) is set
// aside (conflict). Neither moves the watermark. Otherwise the event claims
// its identity.
func (o *Offline) copyOf(env *stream.Envelope, arrival time.Time) (copied, conflict bool) {
	for len(o.claimOrder) > 0 && arrival.Sub(o.claimOrder[0].arrival) > o.dedupeHorizon {
		if c := o.claims[o.claimOrder[0].id]; c.arrival.Equal(o.claimOrder[0].arrival) {
			delete(o.claims, o.claimOrder[0].id)
		}
		o.claimOrder = o.claimOrder[1:]
	}
	id := dedupe.IdentityOf(env.Key, env.ID)
	content := dedupe.ContentOf(env.Type, env.OccurredAt, env.Data)
	if c, ok := o.claims[id]; ok && arrival.Sub(c.arrival) <= o.dedupeHorizon {
		return true, c.content != content
	}
	o.claims[id] = offlineClaim{arrival: arrival, content: content}
	o.claimOrder = append(o.claimOrder, offlineClaimRef{arrival: arrival, id: id})
	return false, false
}

// Add runs one event that arrived at arrival.
func (o *Offline) Add(env *stream.Envelope, arrival time.Time) error {
	rec := stream.KinesisRecord{ApproximateArrivalTimestamp: arrival}
	key, ev, sel, err := o.op.Select(&rec, env)
	var re *keyed.RecordError
	if errors.As(err, &re) {
		o.Aside++ // the function sets it aside; it moves no watermark
		return nil
	}
	if err != nil {
		return err
	}
	if sel == keyed.Fold {
		if copied, conflict := o.copyOf(env, arrival); copied {
			if conflict {
				o.Aside++
			}
			return nil
		}
	}
	wm := int64(-1 << 62)
	if o.seen {
		wm = o.wm
	}
	t := env.EventTime().UnixMilli()
	if w := t - o.outOfOrderness.Milliseconds(); !o.seen || w > o.wm {
		o.wm, o.seen = w, true
	}
	if sel != keyed.Fold {
		return nil
	}
	if !o.beginBefore.IsZero() && !arrival.Before(o.beginBefore) {
		for i := range ev.hits {
			ev.hits[i].mask &^= 1
		}
	}
	ks, ok := o.keys[key]
	if !ok {
		st, _ := o.op.NewState(key, nil)
		ks = st.(*keyState)
		ks.st.discard = o.full()
		o.keys[key] = ks
		o.order = append(o.order, key)
	}
	fate, rerr := ks.Add(ev, time.UnixMilli(wm))
	if fate == keyed.Late {
		o.Late++
	}
	if fate == keyed.Aside || rerr != nil {
		o.Aside++
	}
	return o.collect(ks)
}

// Finish fires everything still pending, as a watermark far past the last
// event would, and returns every match in the order they were made.
func (o *Offline) Finish() ([]OfflineMatch, error) {
	for _, key := range o.order {
		ks := o.keys[key]
		ks.Advance(time.UnixMilli(1 << 60))
		if err := o.collect(ks); err != nil {
			return nil, err
		}
	}
	return o.matches, nil
}

// forgetIdle drops the keys with nothing open — no buffered event, no
// partial match, no match waiting — as a key met again starts from such
// a state. Backfill calls it as it reads, so that what it holds follows
// the keys with something open, not every key of the stream.
func (o *Offline) forgetIdle() {
	kept := o.order[:0]
	for _, k := range o.order {
		if st := o.keys[k].st; len(st.pending) == 0 && len(st.partials) == 0 && len(st.out) == 0 {
			delete(o.keys, k)
			continue
		}
		kept = append(kept, k)
	}
	clear(o.order[len(kept):])
	o.order = kept
}

func (o *Offline) collect(ks *keyState) error {
	o.Found += ks.Outbox() + ks.st.discarded
	ks.st.discarded = 0
	if o.full() {
		o.Truncated = o.Truncated || ks.Outbox() > 0
		ks.Compact()
		// From now on matches are only counted, in every key.
		for _, other := range o.keys {
			other.st.discard = true
		}
		return nil
	}
	recs, err := ks.Render()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if o.full() || (o.maxBytes > 0 && o.bytes+len(r.Data)+1 > o.maxBytes) {
			o.Truncated = true
			break
		}
		o.bytes += len(r.Data) + 1
		var env struct {
			ID   string    `json:"id"`
			Key  string    `json:"key"`
			Data MatchData `json:"data"`
		}
		if err := json.Unmarshal(r.Data, &env); err != nil {
			return err
		}
		o.matches = append(o.matches, OfflineMatch{ID: env.ID, Key: env.Key, Data: env.Data, Record: r.Data})
	}
	ks.Compact()
	return nil
}

// ReadEvents reads events for Offline: a JSON array of envelopes, or one
// envelope per line (JSON Lines). Each is checked as ingest checks it;
// an error names the event by its position. receivedAt, when absent, is
// taken to be the event's sentAt.
func ReadEvents(r io.Reader, max int) ([]stream.Envelope, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 64<<20 {
		return nil, fmt.Errorf("events: more than 64 MiB")
	}
	// Read as ingest reads a request (package strictjson): valid UTF-8, no
	// key twice, bounded nesting.
	var raws [][]byte
	var lines []int // JSON Lines: the line of raws[i], for errors
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		var serr *strictjson.Error
		if raws, serr = strictjson.Split(t, max, "events"); serr != nil {
			switch {
			case serr.Kind == strictjson.TooMany:
				return nil, fmt.Errorf("events: more than %d events", max)
			case serr.Kind == strictjson.EmptyArray:
				raws = nil
			case serr.Index >= 0:
				return nil, fmt.Errorf("events[%d]%s", serr.Index, pathErr(serr))
			default:
				return nil, fmt.Errorf("events: %s", serr.Reason)
			}
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), maxEventLine)
		n := 1
		for ; sc.Scan(); n++ {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				if err := strictjson.Check(line, strictjson.Options{Name: "line"}); err != nil {
					serr := &strictjson.Error{Reason: err.Error()}
					errors.As(err, &serr)
					return nil, fmt.Errorf("events[%d] (line %d)%s", len(raws), n, pathErr(serr))
				}
				raws = append(raws, append([]byte(nil), line...))
				lines = append(lines, n)
			}
		}
		if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("events[%d] (line %d): longer than %d bytes: one event a line, each at most ingest's bound", len(raws), n, maxEventLine)
		} else if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
	}
	if len(raws) > max {
		return nil, fmt.Errorf("events: %d events; at most %d", len(raws), max)
	}
	out := make([]stream.Envelope, len(raws))
	for i, raw := range raws {
		// In JSON Lines, as a syntax error does: events[i] (line n).field.
		name := fmt.Sprintf("events[%d]", i)
		if lines != nil {
			name += fmt.Sprintf(" (line %d)", lines[i])
		}
		if _, err := decodeEvent(name, raw, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeEvent reads events[i] as ingest reads an event (names spelt
// exactly, unknown ones refused, Validate: no control, line-breaking or
// invisible characters in id, type or key among its checks), its
// receivedAt, when absent, its sentAt. A refusal names the event and the field:
// "events[i].field: reason", with part "events[i].field" ("events[i]" when
// no field is at fault).
func decodeEvent(name string, raw []byte, e *stream.Envelope) (part string, err error) {
	part = name
	if err := stream.UnmarshalExact(raw, e); err != nil {
		if fe, ok := errors.AsType[*stream.FieldError](err); ok && fe.Field != "" {
			return part + "." + fe.Field, fmt.Errorf("%s.%w", part, err)
		}
		return part, fmt.Errorf("%s: %w", part, err)
	}
	if err := e.Validate(); err != nil { // unprintable characters in id, type or key included
		if fe, ok := errors.AsType[*stream.FieldError](err); ok && fe.Field != "" {
			part += "." + fe.Field
		}
		return part, fmt.Errorf("%s.%w", name, err)
	}
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = e.SentAt
	}
	return part, nil
}

// pathErr is ".path: reason" (": reason" at the top of an event).
func pathErr(e *strictjson.Error) string {
	if e.Path == "" || e.Path[0] == '[' {
		return e.Path + ": " + e.Reason
	}
	return "." + e.Path + ": " + e.Reason
}

// maxEventLine bounds a line of events given one a line.
const maxEventLine = 2 << 20

// TestRules runs rules over events offline, in the order given, and
// returns the matches sorted by key, then as made.
func TestRules(rules []*Rule, events []stream.Envelope, outOfOrderness time.Duration) ([]OfflineMatch, *Offline, error) {
	return TestRulesLimited(rules, events, outOfOrderness, 0, 0)
}

// TestRulesLimited is TestRules listing only the first maxMatches matches
// made whose records add up to at most maxBytes (Offline.Limit); the
// Offline's Found counts them all and Truncated says some were left out.
func TestRulesLimited(rules []*Rule, events []stream.Envelope, outOfOrderness time.Duration, maxMatches, maxBytes int) ([]OfflineMatch, *Offline, error) {
	ms, o, _, err := TestRulesUntil(context.Background(), rules, events, outOfOrderness, maxMatches, maxBytes)
	return ms, o, err
}

// TestRulesUntil is TestRulesLimited that stops running events once ctx is
// done and returns how many it ran. A run stopped early returns the matches
// made by then without the end of input: a partial match still open is not
// closed (an absence that a later event might have broken is no match).
func TestRulesUntil(ctx context.Context, rules []*Rule, events []stream.Envelope, outOfOrderness time.Duration, maxMatches, maxBytes int) ([]OfflineMatch, *Offline, int, error) {
	o := NewOffline(rules, outOfOrderness)
	o.Limit(maxMatches, maxBytes)
	for i := range events {
		if i%testCheckEvery == 0 && ctx.Err() != nil {
			ms := slices.Clone(o.matches)
			sort.SliceStable(ms, func(i, j int) bool { return ms[i].Key < ms[j].Key })
			return ms, o, i, nil
		}
		if err := o.Add(&events[i], events[i].ReceivedAt); err != nil {
			return nil, nil, i, fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	ms, err := o.Finish()
	if err != nil {
		return nil, nil, len(events), err
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Key < ms[j].Key })
	return ms, o, len(events), nil
}

// testCheckEvery is how many events TestRulesUntil runs between looks at
// its context.
const testCheckEvery = 64
