package handler

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/window"
)

// StateKind is the keyed state kind of a windowed handler's state items.
const StateKind = "windowed"

// ResultType is the type of every record a windowed handler puts on its
// output stream: a window's final result.
const ResultType = "final"

// MaxKeyBytes bounds a key a Selector returns: it is part of item keys.
const MaxKeyBytes = 512

// Result is one record on the output stream: the final result of one key's
// window, emitted once its shard's watermark passed the window's end.
// Emission is at least once; ID is the same for every copy, so a consumer
// deduplicates by it.
type Result struct {
	ID          string          `json:"id"`   // "<name>/<key>/<window id>"
	Type        string          `json:"type"` // ResultType
	Name        string          `json:"name"` // the handler's name
	Key         string          `json:"key"`
	WindowStart time.Time       `json:"windowStart"`
	WindowEnd   time.Time       `json:"windowEnd"`
	Records     int64           `json:"records"` // distinct records added to the window
	Final       bool            `json:"final"`   // always true: late records are dropped, never corrected
	Result      json.RawMessage `json:"result"`  // the aggregate, as json.Marshal renders it
}

// Limits bound a key's state, so that it fits its DynamoDB item whatever
// the input: a record past them is set aside (kind state-budget), never
// fails its batch.
type Limits struct {
	// MaxOpenWindows is how many windows of one key may be open at once
	// (the out-of-orderness allowance keeps more than one open).
	MaxOpenWindows int
	// MaxAggregateBytes bounds one window's aggregate, encoded.
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
	// MaxDedupeHorizon is the events stream's longest retention.
	MaxDedupeHorizon = 7 * 24 * time.Hour
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
	size int64 // window size, ms
	lim  Limits
	sel  Selector[V]
	log  *slog.Logger
}

var _ keyed.Operator[value[*nopAgg]] = (*windowed[nopAgg, int, *nopAgg])(nil)

// Select decodes an event with the user's Selector and lifts its value.
func (o *windowed[T, V, A]) Select(_ *stream.KinesisRecord, env *stream.Envelope) (string, value[A], keyed.Selection, error) {
	var r value[A]
	ev := Event{ID: env.ID, Type: env.Type, Key: env.Key, Time: env.EventTime().UTC().Truncate(time.Millisecond), Data: env.Data}
	key, v, err := o.sel(&ev)
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
	case len(key) > MaxKeyBytes:
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "key", Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("the selected key is %d bytes; at most %d", len(key), MaxKeyBytes)}
	}
	r.single = A(new(T))
	r.single.Add(v)
	b, err := r.single.MarshalBinary()
	if err != nil {
		return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindInvalid, Reason: "the aggregate cannot encode this value: " + err.Error()}
	}
	r.size = len(b)
	r.t = env.EventTime().UnixMilli()
	return strings.Clone(key), r, keyed.Fold, nil
}

// NewState decodes a key's state.
func (o *windowed[T, V, A]) NewState(key string, blob []byte) (keyed.State[value[A]], error) {
	s := &keyState[T, V, A]{o: o, key: key}
	if len(blob) == 0 {
		return s, nil
	}
	if err := s.decode(blob); err != nil {
		return nil, fmt.Errorf("%s: state of key %q: %w", o.name, key, err)
	}
	return s, nil
}

// win is one window of a key: its aggregate and an upper bound of the
// aggregate's encoded size.
type win[A any] struct {
	start int64
	n     int64
	agg   A
	size  int
}

// keyState is one key's windows: the open ones by start, and the closed
// ones whose results are not yet known to be on the stream (the outbox).
type keyState[T any, V any, A interface {
	*T
	Aggregate[V, A]
}] struct {
	o    *windowed[T, V, A]
	key  string
	open []win[A]
	out  []win[A]
}

func (s *keyState[T, V, A]) Compact() { s.out = nil }

// Add merges r's value into its window (after closing what wm passed). A
// window the watermark passed is closed: the record is late. A new window
// past MaxOpenWindows, or a window that would outgrow MaxAggregateBytes,
// sets the record aside; both decisions depend only on the records added
// before (never on how the batches were cut), so every retry decides alike.
func (s *keyState[T, V, A]) Add(r value[A], wm time.Time) (keyed.Fate, *keyed.RecordError) {
	s.Advance(wm)
	start := floorDiv(r.t, s.o.size) * s.o.size
	if !wm.IsZero() && start+s.o.size <= wm.UnixMilli() {
		return keyed.Late, nil
	}
	i, found := slices.BinarySearchFunc(s.open, start, func(w win[A], t int64) int { return cmpInt(w.start, t) })
	if !found {
		if len(s.open) >= s.o.lim.MaxOpenWindows {
			return keyed.Aside, &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
				Reason: fmt.Sprintf("key %q has %d windows open, its limit; this record would open window %s (the key takes records again as its windows close)",
					s.key, len(s.open), window.Of(start, start+s.o.size).ID())}
		}
		if r.size > s.o.lim.MaxAggregateBytes {
			return keyed.Aside, s.tooBig(start, r.size)
		}
		agg := A(new(T))
		agg.Merge(r.single)
		s.open = slices.Insert(s.open, i, win[A]{start: start, n: 1, agg: agg, size: r.size})
		return keyed.Added, nil
	}
	w := &s.open[i]
	if w.size+r.size <= s.o.lim.MaxAggregateBytes {
		// Merging never makes an encoding longer than its operands': the
		// bound holds without encoding the window.
		w.agg.Merge(r.single)
		w.size += r.size
		w.n++
		return keyed.Added, nil
	}
	// Near the bound: measure the merged window exactly, on a copy.
	m, err := clone[T, V, A](w.agg)
	if err != nil {
		return keyed.Aside, &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget, Reason: err.Error()}
	}
	m.Merge(r.single)
	b, err := m.MarshalBinary()
	if err != nil {
		return keyed.Aside, &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget, Reason: err.Error()}
	}
	if len(b) > s.o.lim.MaxAggregateBytes {
		return keyed.Aside, s.tooBig(start, len(b))
	}
	w.agg, w.size = m, len(b)
	w.n++
	return keyed.Added, nil
}

func (s *keyState[T, V, A]) tooBig(start int64, n int) *keyed.RecordError {
	return &keyed.RecordError{Field: "key", Kind: setaside.KindStateBudget,
		Reason: fmt.Sprintf("window %s of key %q would hold %d bytes with this record; at most %d",
			window.Of(start, start+s.o.size).ID(), s.key, n, s.o.lim.MaxAggregateBytes)}
}

// Advance closes the windows whose end the watermark wm reached: they move
// to the outbox.
func (s *keyState[T, V, A]) Advance(wm time.Time) {
	if wm.IsZero() {
		return
	}
	ms := wm.UnixMilli()
	n := 0
	for n < len(s.open) && s.open[n].start+s.o.size <= ms {
		n++
	}
	if n > 0 {
		s.out = append(s.out, s.open[:n]...)
		s.open = slices.Delete(s.open, 0, n)
	}
}

func (s *keyState[T, V, A]) Outbox() int { return len(s.out) }

// Render encodes the outbox as Result records, partitioned by key.
func (s *keyState[T, V, A]) Render() ([]emit.Record, error) {
	recs := make([]emit.Record, 0, len(s.out))
	for i := range s.out {
		w := &s.out[i]
		res, err := json.Marshal(w.agg)
		if err != nil {
			return nil, fmt.Errorf("%s: rendering key %q's result: %w", s.o.name, s.key, err)
		}
		win := window.Of(w.start, w.start+s.o.size)
		b, err := json.Marshal(Result{ID: s.o.name + "/" + s.key + "/" + win.ID(), Type: ResultType, Name: s.o.name, Key: s.key,
			WindowStart: win.Start, WindowEnd: win.End, Records: w.n, Final: true, Result: res})
		if err != nil {
			return nil, err
		}
		recs = append(recs, emit.Record{Data: b, PartitionKey: s.key})
	}
	return recs, nil
}

func (s *keyState[T, V, A]) NextDue() time.Time {
	if len(s.open) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(s.open[0].start + s.o.size).UTC()
}

func (s *keyState[T, V, A]) Size() int {
	n := 8
	for i := range s.open {
		n += 24 + s.open[i].size
	}
	for i := range s.out {
		n += 24 + s.out[i].size
	}
	return n
}

// stateVersion is the first byte of a state blob.
const stateVersion = 1

// Encode appends: version, then the open windows and the outbox, each as a
// count and (start, records, aggregate length, aggregate) per window.
func (s *keyState[T, V, A]) Encode(dst []byte) []byte {
	dst = append(dst, stateVersion)
	for _, ws := range [][]win[A]{s.open, s.out} {
		dst = binary.AppendUvarint(dst, uint64(len(ws)))
		for i := range ws {
			b, err := ws[i].agg.MarshalBinary()
			if err != nil {
				// A bug of the aggregate: an oversized blob is never
				// written (keyed.Settings.MaxStateBytes), so the key's
				// records are retried and its state is kept, not lost.
				s.o.log.Error("an aggregate failed to encode: the key's state is not written", "handler", s.o.name, "key", s.key, "error", err.Error())
				return make([]byte, keyed.DefaultMaxStateBytes+1)
			}
			dst = binary.AppendVarint(dst, ws[i].start)
			dst = binary.AppendUvarint(dst, uint64(ws[i].n))
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		}
	}
	return dst
}

func (s *keyState[T, V, A]) decode(b []byte) error {
	if b[0] != stateVersion {
		return fmt.Errorf("state version %d, this handler reads %d", b[0], stateVersion)
	}
	b = b[1:]
	for part := range 2 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return errors.New("truncated state")
		}
		b = b[k:]
		ws := make([]win[A], 0, n)
		for range n {
			start, k1 := binary.Varint(b)
			if k1 <= 0 {
				return errors.New("truncated state")
			}
			b = b[k1:]
			cnt, k2 := binary.Uvarint(b)
			if k2 <= 0 {
				return errors.New("truncated state")
			}
			b = b[k2:]
			l, k3 := binary.Uvarint(b)
			if k3 <= 0 || l > uint64(len(b)-k3) {
				return errors.New("truncated state")
			}
			agg := A(new(T))
			if err := agg.UnmarshalBinary(b[k3 : k3+int(l)]); err != nil {
				return fmt.Errorf("window at %d: %w", start, err)
			}
			b = b[k3+int(l):]
			ws = append(ws, win[A]{start: start, n: int64(cnt), agg: agg, size: int(l)})
		}
		if part == 0 {
			s.open = ws
		} else {
			s.out = ws
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the state", len(b))
	}
	return nil
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

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
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

// nopAgg only checks, at compile time, that windowed is a keyed.Operator.
type nopAgg struct{}

func (*nopAgg) Add(int)                        {}
func (*nopAgg) Merge(*nopAgg)                  {}
func (*nopAgg) MarshalBinary() ([]byte, error) { return nil, nil }
func (*nopAgg) UnmarshalBinary([]byte) error   { return nil }
func (*nopAgg) MarshalJSON() ([]byte, error)   { return []byte("{}"), nil }
