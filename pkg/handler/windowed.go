package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// StateKind is the keyed state kind of a windowed handler's state items.
const StateKind = "windowed"

// The types of the records a windowed handler puts on its output stream.
const (
	// ResultType is a window's final result (revision 1).
	ResultType = "final"
	// CorrectionType is a final window's new result under the correct
	// late policy: a late record changed it. Previous is the result it
	// retracts (the previous revision's).
	CorrectionType = "correction"
	// RetractionType withdraws a final session that a late record merged
	// into a larger one (the larger one is a result of its own). Previous
	// is the result it retracts; Result is null.
	RetractionType = "retraction"
)

// maxLoggedError bounds the bytes a log line repeats of a user's error or
// panic, which may echo a whole record (up to 1 MB on Kinesis, 1 MiB on
// SQS): each log byte is billed, and the line comes again on every retry.
// A set-aside item or a dead-letter message keeps its own reason, bounded
// there.
const maxLoggedError = 1024

// MaxKeyChars bounds a key a Selector returns, in Unicode characters: it
// is its results' partition key on the output stream, which Kinesis bounds
// at 256 characters (a longer one refuses the whole PutRecords call, so
// the key's results could never be put and its records would be retried
// for ever), and part of item keys (at most 1,024 bytes in UTF-8, far
// under DynamoDB's 2,048 for a partition key). A record whose key is
// longer is set aside; a key of 256 characters of any script is kept, as
// Kinesis would take it.
const MaxKeyChars = stream.MaxKeyLength

// Result is one record on the output stream: the final result of one key's
// window, emitted once its shard's watermark passed the window's end, or,
// under the correct late policy, a correction or a retraction of one.
// Emission is at least once; ID is the same for every copy, so a consumer
// deduplicates by it.
type Result struct {
	// ID is "<name>/<key>/<window id>" for a final result and
	// "<name>/<key>/<window id>/r<revision>" for the revisions after it.
	ID          string    `json:"id"`
	Type        string    `json:"type"` // ResultType, CorrectionType or RetractionType
	Name        string    `json:"name"` // the handler's name
	Key         string    `json:"key"`
	WindowStart time.Time `json:"windowStart"`
	WindowEnd   time.Time `json:"windowEnd"`
	// Revision counts the window's results: 1 for the final result, one
	// more for each correction, and for the retraction.
	Revision int   `json:"revision"`
	Records  int64 `json:"records"` // distinct records in the window (0 in a retraction)
	// Final is true for a final result and a correction (the window is
	// final), false for a retraction (the window is no more).
	Final  bool            `json:"final"`
	Result json.RawMessage `json:"result"` // the aggregate, as json.Marshal renders it (null in a retraction)
	// Previous is the result a correction or a retraction retracts.
	Previous json.RawMessage `json:"previous,omitempty"`
}

// Limits bound a key's state, so that it fits its DynamoDB item whatever
// the input: a record past them is set aside (kind state-budget), never
// fails its batch.
type Limits struct {
	// MaxOpenWindows is how many windows of one key may be open at once
	// (the out-of-orderness allowance keeps more than one open); with
	// hopping windows, how many of their panes (windows of the advance's
	// size). Together with MaxAggregateBytes it also bounds everything a
	// key holds (MaxOpenWindows × MaxAggregateBytes, with 24 bytes per
	// pane or record): the panes hopping windows and the allowed lateness
	// keep after their windows closed, and the records session and sliding
	// windows are computed from.
	MaxOpenWindows int
	// MaxAggregateBytes bounds one pane's aggregate, encoded (a tumbling
	// window is one pane), or one held record's (session and sliding
	// windows). A hopping, session or sliding window's result merges
	// several and is not bounded by it.
	MaxAggregateBytes int
}

// DefaultLimits keep a key's open windows within half a state item
// (keyed.DefaultMaxStateBytes): a fold stops there, so closed windows not
// yet sent fit the other half.
var DefaultLimits = Limits{MaxOpenWindows: 8, MaxAggregateBytes: 16 << 10}

// Defaults of the options.
const (
	DefaultWindow         = time.Minute
	DefaultOutOfOrderness = 5 * time.Second
	DefaultIdleTimeout    = 30 * time.Second
	DefaultDedupeHorizon  = time.Hour
)

// The bounds of the options' durations: a declared pipeline's, so that a
// handler takes what a pipeline file may say and no more (package
// pipeline says why each is what it is). Past them a sum of durations
// could wrap round, closing windows at once.
const (
	// MaxDedupeHorizon is the events stream's longest retention.
	MaxDedupeHorizon = pipeline.MaxDedupeHorizon
	// MaxWindow bounds WithWindow's and WithHopping's size and advance,
	// WithSliding's difference and WithSession's gap: a year.
	MaxWindow = pipeline.MaxWindowDuration
	// MaxOutOfOrderness bounds WithOutOfOrderness, which delays every
	// window's result: a day (later records are for WithAllowedLateness).
	MaxOutOfOrderness = pipeline.MaxOutOfOrderness
	// MaxIdleTimeout bounds WithIdleTimeout: a day.
	MaxIdleTimeout = pipeline.MaxIdleTimeout
	// MaxAllowedLateness bounds WithAllowedLateness: a year, the longest a
	// declared pipeline keeps a window's item.
	MaxAllowedLateness = pipeline.MaxRetention
)

// value is one selected record: its event time and its value lifted into a
// one-value aggregate. It is shared by every attempt to fold it, so it is
// only ever merged from, never into.
type value[A any] struct {
	t      int64 // event time, Unix ms
	single A
	size   int // single's encoded size
}

// windowed is the windowed aggregation as a keyed.Operator.
type windowed[T any, V any, A interface {
	*T
	Aggregate[V, A]
}] struct {
	name string
	kind windows
	late window.LateRule
	lim  Limits
	sel  Selector[V]
	log  *slog.Logger
}

var _ keyed.Operator[value[*nopAgg]] = (*windowed[nopAgg, int, *nopAgg])(nil)

// Select decodes an event with the user's Selector and lifts its value. A
// panic of the Selector or the aggregate (Add, MarshalBinary) is a bug the
// record triggers, as it would on every retry: the record is set aside
// with the panic as its reason, rather than failing the batch for good.
func (o *windowed[T, V, A]) Select(_ *stream.KinesisRecord, env *stream.Envelope) (key string, r value[A], sel keyed.Selection, err error) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("the Selector or the aggregate panicked: the record is set aside", "handler", o.name, "id", env.ID,
				"panic", strictjson.Cut(fmt.Sprint(p), maxLoggedError))
			key, r, sel = "", value[A]{}, keyed.Ignore
			err = &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid, Reason: fmt.Sprintf("the Selector or the aggregate panicked on this record: %v", p)}
		}
	}()
	ev := Event{ID: env.ID, Type: env.Type, Key: env.Key, Time: env.EventTime().UTC().Truncate(time.Millisecond), Data: env.Data}
	var v V
	key, v, err = o.sel(&ev)
	switch {
	case errors.Is(err, ErrSkip):
		return "", r, keyed.Ignore, nil
	case err != nil:
		var fe *FieldError
		if errors.As(err, &fe) {
			return "", r, keyed.Ignore, &keyed.RecordError{Field: fe.Field, Kind: setaside.KindInvalid, Reason: fe.Reason}
		}
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid, Reason: err.Error()}
	case key == "":
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "key", Kind: setaside.KindInvalid, Reason: "the selected key is empty"}
	case !utf8.ValidString(key):
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "key", Kind: setaside.KindInvalid, Reason: "the selected key is not valid UTF-8"}
	}
	if n, ok := stream.KeyLength(key); !ok {
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "key", Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("the selected key is %d characters; at most %d", n, MaxKeyChars)}
	}
	r.single = A(new(T))
	r.single.Add(v)
	b, err := r.single.MarshalBinary()
	if err != nil {
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid, Reason: "the aggregate cannot encode this value: " + err.Error()}
	}
	if err := notFinite(r.single); err != nil {
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("the Selector's value for this record (%s) makes the aggregate's result not render as JSON (%v): every window with it would have no result, so the record is set aside and its windows' results come from the other records",
				strictjson.Cut(fmt.Sprint(v), 256), err)}
	}
	r.size = len(b)
	r.t = env.EventTime().UnixMilli()
	return strings.Clone(key), r, keyed.Fold, nil
}

// notFinite is the error of rendering a one-value aggregate if it holds a
// value JSON has no number for (a NaN, an infinity): that record alone
// would make every window it is in unrenderable, so it is set aside, not
// its windows' results (which, once merged, name no record). Other render
// failures (a MarshalJSON that fails or panics on every aggregate) are
// left to the window's result, which sets it aside naming result.
func notFinite(a any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = nil
		}
	}()
	_, err = json.Marshal(a)
	if unsupported := (*json.UnsupportedValueError)(nil); errors.As(err, &unsupported) {
		return err
	}
	return nil
}

// NewState decodes a key's state.
func (o *windowed[T, V, A]) NewState(key string, blob []byte) (_ keyed.State[value[A]], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: state of key %q: %w", o.name, key, panicked(p))
		}
	}()
	s := &keyState[T, V, A]{o: o, key: key, frozen: window.NoThreshold, at: window.NoThreshold, wake: window.NoThreshold, emitted: map[span]*emitted{}}
	if len(blob) == 0 {
		return s, nil
	}
	if err := s.decode(blob); err != nil {
		return nil, fmt.Errorf("%s: state of key %q: %w", o.name, key, err)
	}
	return s, nil
}

// part is what a key holds of its records: a pane (tumbling and hopping
// windows: the aggregate of the records in [t, t + the pane's size)) or one
// record (session and sliding windows, which the records define).
type part[A any] struct {
	t   int64 // the pane's start, or the record's event time (Unix ms)
	th  int64 // a record's threshold (window.Held); window.NoThreshold for a pane
	n   int64 // records in it
	agg A
	// size is an upper bound of agg's encoded size.
	size int
}

// HeldAt is the record's event time (window.Held).
func (p part[A]) HeldAt() int64 { return p.t }

// Threshold is the close time the record arrived at, if after its time
// (window.Held).
func (p part[A]) Threshold() int64 { return p.th }

// HeldUntil is the record's event time: a part is one record or a pane,
// never a held run (window.Held).
func (p part[A]) HeldUntil() int64 { return p.t }

// span is a window's bounds, Unix ms.
type span struct{ start, end int64 }

func (w span) window() window.Window { return window.Of(w.start, w.end) }

// emitted is what was last put out for a final window not yet frozen: its
// revision, record count and aggregate (to retract it when a late record
// changes it).
type emitted struct {
	rev  int
	n    int64
	blob []byte
}

// result is one output waiting in the outbox.
type result struct {
	typ        string
	w          span
	rev        int
	n          int64
	blob, prev []byte // the window's aggregate (nil in a retraction), the one retracted
}

// keyState is one key's state: what it holds of its records (parts, in
// time order), the final windows still within the allowed lateness
// (emitted), and the outputs not yet known to be on the stream (out).
type keyState[T any, V any, A interface {
	*T
	Aggregate[V, A]
}] struct {
	o     *windowed[T, V, A]
	key   string
	parts []part[A]
	// frozen is the latest close time the state was advanced to (Unix
	// ms): windows ending at or before it never change again, and the
	// parts only they need are gone.
	frozen int64
	// at is the latest watermark the state was advanced to (Unix ms).
	at      int64
	emitted map[span]*emitted
	out     []result
	judge   *window.Judge // session and sliding: the records held, replayed; nil until needed
	// wake is the earliest end of a window not frozen (a lower bound):
	// before the close time reaches it, closing changes nothing. Not
	// stored: a decoded state closes once to learn it.
	wake int64
	// encErr is the first closing window whose aggregate failed to
	// encode: Encode returns it. Not stored: the state is not written.
	encErr error
}

func (s *keyState[T, V, A]) Compact() { s.out = nil }

// Add adds r to what the key holds, after closing what wm passed (without
// corrections of windows still within the allowed lateness: those come
// when the fold ends, so a batch corrects a window once). Whether the
// record is late, and whether it is set aside for the key's limits, depend
// only on the records added before (never on how the batches were cut), so
// every retry decides alike.
func (s *keyState[T, V, A]) Add(r value[A], wm time.Time) (fate keyed.Fate, rerr *keyed.RecordError) {
	defer func() {
		if p := recover(); p != nil {
			err := panicked(p)
			s.fail(fmt.Errorf("when a record came to key %q: %w", s.key, err))
			fate, rerr = keyed.Aside, &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid,
				Reason: fmt.Sprintf("the aggregate of key %q, with this record, %v", strictjson.Cut(s.key, 256), err)}
		}
	}()
	closeAt := window.NoThreshold
	if !wm.IsZero() {
		s.close(wm.UnixMilli(), false)
		closeAt = s.closeTime(wm.UnixMilli())
	}
	th := window.Threshold(r.t, closeAt, s.frozen)
	if s.o.kind.held() {
		return s.addHeld(r, th)
	}
	return s.addToPane(r, wm, th)
}

// closeTime is the close time of a watermark: windows ending at or before
// it take no more records (under correct, the watermark less the allowed
// lateness).
func (s *keyState[T, V, A]) closeTime(wm int64) int64 {
	if s.o.late.Policy == window.Correct {
		return wm - s.o.late.AllowedLateness.Milliseconds()
	}
	return wm
}

// addToPane adds r to its pane (tumbling and hopping windows), unless every
// window of the pane ends at or before th.
func (s *keyState[T, V, A]) addToPane(r value[A], wm time.Time, th int64) (keyed.Fate, *keyed.RecordError) {
	ps, pe := s.o.kind.pane(r.t)
	first, last := s.o.kind.paneWindowEnds(ps)
	if last <= th {
		return keyed.Late, nil // in no window that is not closed
	}
	fate := keyed.Added
	if first <= th {
		fate = keyed.AddedLate // dropped from its windows ending by th, added to the rest
	}
	i, found := slices.BinarySearchFunc(s.parts, ps, func(p part[A], t int64) int { return cmpInt(p.t, t) })
	if !found {
		open := 0
		for j := range s.parts {
			if wm.IsZero() || s.parts[j].t+s.o.kind.paneMs() > wm.UnixMilli() {
				open++
			}
		}
		if open >= s.o.lim.MaxOpenWindows && (wm.IsZero() || pe > wm.UnixMilli()) {
			return keyed.Aside, &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
				Reason: fmt.Sprintf("key %q has %d %s open, its limit; this record would open %s %s (the key takes records again as they close)",
					s.key, open, s.o.kind.paneNoun(), s.o.kind.paneNoun1(), window.Of(ps, pe).ID())}
		}
		if r.size > s.o.lim.MaxAggregateBytes {
			return keyed.Aside, s.tooBig(ps, pe, r.size)
		}
		if err := s.checkHeld(partOverhead + r.size); err != nil {
			return keyed.Aside, err
		}
		agg := A(new(T))
		agg.Merge(r.single)
		s.parts = slices.Insert(s.parts, i, part[A]{t: ps, th: window.NoThreshold, n: 1, agg: agg, size: r.size})
		s.wake = min(s.wake, first)
		return fate, nil
	}
	p := &s.parts[i]
	if p.size+r.size <= s.o.lim.MaxAggregateBytes {
		// Merging never makes an encoding longer than its operands': the
		// bound holds without encoding the pane.
		if err := s.checkHeld(r.size); err != nil {
			return keyed.Aside, err
		}
		p.agg.Merge(r.single)
		p.size += r.size
		p.n++
		return fate, nil
	}
	// Near the bound: measure the merged pane exactly, on a copy.
	m, err := clone[T, V, A](p.agg)
	if err != nil {
		return keyed.Aside, s.unencodable(err)
	}
	m.Merge(r.single)
	b, err := m.MarshalBinary()
	if err != nil {
		return keyed.Aside, s.unencodable(err)
	}
	if len(b) > s.o.lim.MaxAggregateBytes {
		return keyed.Aside, s.tooBig(ps, pe, len(b))
	}
	if err := s.checkHeld(len(b) - p.size); err != nil {
		return keyed.Aside, err
	}
	p.agg, p.size = m, len(b)
	p.n++
	return fate, nil
}

// addHeld judges a session or sliding record as the declared pipelines do
// (window.Judge) and holds it if it counts in a window not closed.
func (s *keyState[T, V, A]) addHeld(r value[A], th int64) (keyed.Fate, *keyed.RecordError) {
	if s.judge == nil {
		s.judge = window.NewJudge(s.o.kind.defined(), s.parts)
	}
	keep, late := s.judge.Next(r.t, th)
	if !keep {
		return keyed.Late, nil
	}
	if r.size > s.o.lim.MaxAggregateBytes {
		return keyed.Aside, &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
			Reason: fmt.Sprintf("this record's aggregate of key %q is %d bytes; at most %d", s.key, r.size, s.o.lim.MaxAggregateBytes)}
	}
	if err := s.checkHeld(partOverhead + r.size); err != nil {
		return keyed.Aside, err
	}
	s.judge.Hold()
	// After the records at the same time: parts stay in time order, and
	// among equal times in arrival order.
	i, _ := slices.BinarySearchFunc(s.parts, r.t+1, func(p part[A], t int64) int { return cmpInt(p.t, t) })
	s.parts = slices.Insert(s.parts, i, part[A]{t: r.t, th: th, n: 1, agg: r.single, size: r.size})
	s.wake = min(s.wake, s.o.kind.earliestEnd(r.t))
	if late {
		return keyed.AddedLate, nil
	}
	return keyed.Added, nil
}

// checkHeld refuses a record that would add more bytes to what the key
// holds and take it past MaxOpenWindows × (MaxAggregateBytes + 24).
func (s *keyState[T, V, A]) checkHeld(more int) *keyed.RecordError {
	budget := s.o.lim.MaxOpenWindows * (s.o.lim.MaxAggregateBytes + partOverhead)
	held := 0
	for i := range s.parts {
		held += partOverhead + s.parts[i].size
	}
	if held+more > budget {
		return &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
			Reason: fmt.Sprintf("key %q holds %d bytes of records; with this record it would hold %d, more than its limit of %d (MaxOpenWindows × MaxAggregateBytes); it takes records again as its windows close",
				s.key, held, held+more, budget)}
	}
	return nil
}

// partOverhead is what a part costs in the state besides its aggregate.
const partOverhead = 24

func (s *keyState[T, V, A]) tooBig(start, end int64, n int) *keyed.RecordError {
	return &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
		Reason: fmt.Sprintf("%s %s of key %q would hold %d bytes with this record; at most %d",
			s.o.kind.paneNoun1(), window.Of(start, end).ID(), s.key, n, s.o.lim.MaxAggregateBytes)}
}

// Advance closes what the watermark wm has passed: final results of the
// windows ending by wm, corrections of final windows that late records
// changed, retractions of final sessions merged into others; then it
// forgets what only windows past the allowed lateness needed.
func (s *keyState[T, V, A]) Advance(wm time.Time) {
	if wm.IsZero() {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.fail(fmt.Errorf("closing windows of key %q: %w", s.key, panicked(p)))
		}
	}()
	s.close(wm.UnixMilli(), true)
}

// close advances the state to watermark wm (see Advance). With all
// false (a record is about to be added) it records only what the close
// time passed: final results under drop, and under correct the results of
// the windows it is about to freeze, which no later record can change; the
// rest waits for the fold's end, so each result is a window's value at the
// end of a batch. It does nothing while the close time is before wake,
// the earliest end of a window not frozen (nothing can change then).
func (s *keyState[T, V, A]) close(wm int64, all bool) {
	s.at = max(s.at, wm)
	wm = s.at
	closeAt := s.closeTime(wm)
	if !all && closeAt < s.wake {
		// Nothing ends by closeAt: freezing to it prunes nothing, but a
		// record added now must find the windows ending by it frozen.
		s.frozen = max(s.frozen, closeAt)
		return
	}
	limit := closeAt
	if all {
		limit = wm
	}
	current := map[span]bool{}
	wake := int64(math.MaxInt64)
	for _, cw := range s.windows() {
		current[cw.w] = true
		if cw.w.end > closeAt {
			wake = min(wake, cw.w.end)
		}
		if cw.w.end > limit {
			continue
		}
		e, seen := s.emitted[cw.w]
		n := cw.count()
		switch {
		case !seen:
			blob, ok := s.encode(cw)
			if !ok {
				continue
			}
			s.out = append(s.out, result{typ: ResultType, w: cw.w, rev: 1, n: n, blob: blob})
			s.emitted[cw.w] = &emitted{rev: 1, n: n, blob: blob}
		case e.n != n:
			// Records are only ever added to a window that is not frozen:
			// its count says whether it changed.
			blob, ok := s.encode(cw)
			if !ok {
				continue
			}
			s.out = append(s.out, result{typ: CorrectionType, w: cw.w, rev: e.rev + 1, n: n, blob: blob, prev: e.blob})
			*e = emitted{rev: e.rev + 1, n: n, blob: blob}
		}
	}
	var gone []span
	for w := range s.emitted {
		switch {
		case current[w] || w.end <= s.frozen:
		case w.end <= limit:
			gone = append(gone, w)
		default:
			wake = min(wake, w.end)
		}
	}
	slices.SortFunc(gone, cmpSpan) // the same order on every retry
	for _, w := range gone {
		e := s.emitted[w]
		s.out = append(s.out, result{typ: RetractionType, w: w, rev: e.rev + 1, prev: e.blob})
		delete(s.emitted, w)
	}
	if closeAt > s.frozen {
		s.freeze(closeAt)
	}
	s.wake = wake
}

// freeze makes the windows ending at or before closed final for good and
// forgets what only they need.
func (s *keyState[T, V, A]) freeze(closed int64) {
	s.frozen = closed
	if s.o.kind.held() {
		s.parts = window.PruneHeld(s.o.kind.defined(), closed, s.parts)
	} else {
		size := s.o.kind.sizeMs()
		s.parts = slices.DeleteFunc(s.parts, func(p part[A]) bool { return p.t+size <= closed })
	}
	for w := range s.emitted {
		if w.end <= closed {
			delete(s.emitted, w)
		}
	}
	s.judge = nil // replayed from the parts kept when next needed
}

// unencodable sets a record aside whose window's aggregate fails to encode
// (or to read back) once the record is merged: a bug of the aggregate,
// which no retry mends.
func (s *keyState[T, V, A]) unencodable(err error) *keyed.RecordError {
	return &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
		Reason: fmt.Sprintf("the aggregate of key %q failed to encode (MarshalBinary, UnmarshalBinary) with this record merged: %s",
			strictjson.Cut(s.key, 256), strictjson.Cut(err.Error(), maxLoggedError))}
}

// encode is the encoding of a closing window's aggregate. One that fails
// to encode is a bug of the aggregate, which no retry mends: the error is
// kept (the first), and Encode returns it, so the state is not written
// (it still holds the window's records) and the runner sets the key's
// records, and a copy of its state, aside with the error as the reason.
func (s *keyState[T, V, A]) encode(cw currentWindow[A]) ([]byte, bool) {
	b, err := cw.value().MarshalBinary()
	if err != nil {
		s.fail(fmt.Errorf("the aggregate of window %s (%d records) failed to encode when the window closed (MarshalBinary): %w",
			cw.w.window().ID(), cw.count(), err))
		return nil, false
	}
	return b, true
}

// fail keeps the first error that makes the state unwritable: Encode
// returns it.
func (s *keyState[T, V, A]) fail(err error) {
	if s.encErr == nil {
		s.encErr = err
	}
}

// panicked is a panic of the user's aggregate (Merge, MarshalBinary,
// UnmarshalBinary, MarshalJSON) as an error naming the function that
// panicked: the same state and records panic alike on every retry, so it
// is handled as an aggregate that fails to encode, not left to end the
// process (every retry of the batch would crash, holding the shard and
// every key in it). The panic's message is cut to maxLoggedError.
func panicked(p any) error {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	// The first function past the last panic (a recover that panics again,
	// as encoding/json's does, makes two), not in package runtime.
	where, past := "the aggregate", false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			past = true
		case past && !strings.HasPrefix(f.Function, "runtime."):
			where, past = f.Function, false
		}
		if !more {
			break
		}
	}
	return fmt.Errorf("panicked in %s: %s", where, strictjson.Cut(fmt.Sprint(p), maxLoggedError))
}

// currentWindow is one window of the key that ends after frozen. Its
// record count and value are computed when asked: a close lists every
// window of the key but reads only those it closes, and counting the
// members of each (a sliding window's are most of a busy key's held
// records) on every record made a hot key's batch quadratic in them.
type currentWindow[A any] struct {
	w     span
	count func() int64
	value func() A
}

// windows lists the key's windows that end after frozen, sorted by start
// then end: for tumbling and hopping windows, those of its panes (a
// window's value is the merge of its panes); for sessions and sliding
// windows, those its records define (window.HeldWindows).
func (s *keyState[T, V, A]) windows() []currentWindow[A] {
	var out []currentWindow[A]
	if s.o.kind.held() {
		for _, hw := range window.HeldWindows(s.o.kind.defined(), s.frozen, s.parts) {
			cw := currentWindow[A]{w: span{hw.Window.Start.UnixMilli(), hw.Window.End.UnixMilli()}}
			cw.count = func() (n int64) {
				window.Members(&hw, s.parts, func(int) { n++ })
				return n
			}
			cw.value = func() A {
				v := A(new(T))
				window.Members(&hw, s.parts, func(i int) { v.Merge(s.parts[i].agg) })
				return v
			}
			out = append(out, cw)
		}
		return out
	}
	var spans []span
	for i := range s.parts {
		spans = s.o.kind.appendPaneWindows(spans, s.parts[i].t)
	}
	slices.SortFunc(spans, cmpSpan)
	spans = slices.Compact(spans)
	for _, w := range spans {
		if w.end <= s.frozen {
			continue
		}
		lo, _ := slices.BinarySearchFunc(s.parts, w.start, func(p part[A], t int64) int { return cmpInt(p.t, t) })
		hi, _ := slices.BinarySearchFunc(s.parts, w.end, func(p part[A], t int64) int { return cmpInt(p.t, t) })
		cw := currentWindow[A]{w: w}
		cw.count = func() (n int64) {
			for i := lo; i < hi; i++ {
				n += s.parts[i].n
			}
			return n
		}
		cw.value = func() A {
			v := A(new(T))
			for i := lo; i < hi; i++ {
				v.Merge(s.parts[i].agg)
			}
			return v
		}
		out = append(out, cw)
	}
	return out
}

func (s *keyState[T, V, A]) Outbox() int { return len(s.out) }

// Render encodes the outbox as Result records, partitioned by key. A
// result whose aggregate cannot be rendered (a MarshalJSON that fails, a
// NaN) fails alike on every try: it is returned in a
// *keyed.UnrenderableError, to be set aside with its aggregate's binary
// encoding, while the others are put.
func (s *keyState[T, V, A]) Render() ([]emit.Record, error) {
	recs := make([]emit.Record, 0, len(s.out))
	var bad []keyed.Unrendered
	for i := range s.out {
		r := &s.out[i]
		w := r.w.window()
		res := Result{ID: s.o.name + "/" + s.key + "/" + w.ID(), Type: r.typ, Name: s.o.name, Key: s.key,
			WindowStart: w.Start, WindowEnd: w.End, Revision: r.rev, Records: r.n, Final: r.typ != RetractionType, Result: json.RawMessage("null")}
		if r.rev > 1 {
			res.ID += fmt.Sprintf("/r%d", r.rev)
		}
		var err error
		field := "result"
		if r.blob != nil {
			res.Result, err = s.render(r.blob)
		}
		if err == nil && r.prev != nil {
			field = "previous"
			res.Previous, err = s.render(r.prev)
		}
		if err != nil {
			bad = append(bad, s.unrendered(i, res, r, field, err))
			continue
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		recs = append(recs, emit.Record{Data: b, PartitionKey: s.key})
	}
	if bad != nil {
		return nil, &keyed.UnrenderableError{Records: recs, Aside: bad}
	}
	return recs, nil
}

// unrendered is the output i that failed to render: the Result without its
// aggregates, which it carries in their binary encoding instead (a build
// whose aggregate renders them can recover the result).
func (s *keyState[T, V, A]) unrendered(i int, res Result, r *result, field string, err error) keyed.Unrendered {
	res.Result, res.Previous = json.RawMessage("null"), nil
	data, _ := json.Marshal(struct {
		Result
		Aggregate         []byte `json:"aggregate,omitempty"`
		PreviousAggregate []byte `json:"previousAggregate,omitempty"`
	}{res, r.blob, r.prev})
	return keyed.Unrendered{Index: i, PartitionKey: s.key, Data: data, Field: field,
		Reason: fmt.Sprintf("window %s: %v; set aside with the aggregate's binary encoding", r.w.window().ID(), err)}
}

// render is the JSON of an encoded aggregate.
func (s *keyState[T, V, A]) render(blob []byte) (_ json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: rendering key %q's result: %w", s.o.name, s.key, panicked(p))
		}
	}()
	a := A(new(T))
	if err := a.UnmarshalBinary(blob); err != nil {
		return nil, fmt.Errorf("%s: key %q: decoding a window's aggregate: %w", s.o.name, s.key, err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("%s: rendering key %q's result: %w", s.o.name, s.key, err)
	}
	return b, nil
}

// NextDue is the end of the earliest window not yet final.
func (s *keyState[T, V, A]) NextDue() time.Time {
	var next int64
	for _, cw := range s.windows() {
		if cw.w.end > s.at && (next == 0 || cw.w.end < next) {
			next = cw.w.end
		}
	}
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMilli(next).UTC()
}

func (s *keyState[T, V, A]) Size() int {
	n := 32
	for i := range s.parts {
		n += partOverhead + s.parts[i].size
	}
	for _, e := range s.emitted {
		n += 32 + len(e.blob)
	}
	for i := range s.out {
		n += 40 + len(s.out[i].blob) + len(s.out[i].prev)
	}
	return n
}

// clone copies an aggregate through its encoding.
func clone[T any, V any, A interface {
	*T
	Aggregate[V, A]
}](a A) (A, error) {
	b, err := a.MarshalBinary()
	if err != nil {
		return nil, err
	}
	c := A(new(T))
	if err := c.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return c, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpSpan(a, b span) int {
	if c := cmpInt(a.start, b.start); c != 0 {
		return c
	}
	return cmpInt(a.end, b.end)
}

// nopAgg only checks, at compile time, that windowed is a keyed.Operator.
type nopAgg struct{}

func (*nopAgg) Add(int)                        {}
func (*nopAgg) Merge(*nopAgg)                  {}
func (*nopAgg) MarshalBinary() ([]byte, error) { return nil, nil }
func (*nopAgg) UnmarshalBinary([]byte) error   { return nil }
func (*nopAgg) MarshalJSON() ([]byte, error)   { return []byte("{}"), nil }
