package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Watermark is one shard's event-time progress: the claim that no more
// records with an event time before Value are expected. It is the maximum
// event time seen minus the allowed out-of-orderness, and it never moves
// back. A window [Start, End) is final once Value ≥ End; a record for a final
// window is late.
//
// A shard with no traffic would hold its windows open forever, so
// AdvanceIdle (called by the ticker on a schedule) moves an idle shard's
// watermark with processing time.
//
// The fields are exported so the state can be carried between invocations
// (JSON, DynamoDB attributes, or MarshalBinary); change it only through the
// methods. The zero value with OutOfOrderness set is a fresh watermark.
type Watermark struct {
	// OutOfOrderness is how far behind the newest event time a record may be
	// and still be on time.
	OutOfOrderness time.Duration `json:"outOfOrderness"`
	// MaxEventTime is the newest event time observed.
	MaxEventTime time.Time `json:"maxEventTime,omitzero"`
	// Value is the watermark; zero until the first observation.
	Value time.Time `json:"value,omitzero"`
	// IdleMax and IdleSince are AdvanceIdle's memory: the MaxEventTime at
	// the tick that first saw it, and that tick's processing time.
	IdleMax   time.Time `json:"idleMax,omitzero"`
	IdleSince time.Time `json:"idleSince,omitzero"`
}

// NewWatermark returns a fresh watermark allowing outOfOrderness.
func NewWatermark(outOfOrderness time.Duration) *Watermark {
	return &Watermark{OutOfOrderness: outOfOrderness}
}

// Current is the watermark's value (zero before any observation).
func (w *Watermark) Current() time.Time { return w.Value }

// Observe records an event time. It reports whether the watermark moved.
func (w *Watermark) Observe(eventTime time.Time) bool {
	if !eventTime.After(w.MaxEventTime) {
		return false
	}
	w.MaxEventTime = eventTime
	return w.raise(before(eventTime, w.OutOfOrderness))
}

// AdvanceIdle moves the watermark of a shard that has been idle: when the
// newest event time has not changed for at least idleTimeout of processing
// time (measured between AdvanceIdle calls: the first call that sees a
// MaxEventTime starts the clock), the watermark advances as if a record with
// event time now − idleTimeout had arrived: to now − idleTimeout −
// OutOfOrderness. That assumes a record still to come did not happen more
// than idleTimeout before it is processed. A shard that is busy, even with a
// backlog far behind now, keeps moving MaxEventTime and is not idle; one
// whose function is stuck does not, and the caller bounds the advance with
// hold (the aggregate's ticker: by the arrival of the first record the
// function has not processed, package backlog).
// AdvanceIdle reports whether the watermark moved.
func (w *Watermark) AdvanceIdle(now time.Time, idleTimeout time.Duration) bool {
	return w.AdvanceIdleHeld(now, idleTimeout, time.Time{})
}

// AdvanceIdleHeld is AdvanceIdle, moving the watermark no further than hold
// when hold is set: the earliest window start of records the shard has
// read but not applied yet (held between invocations, as Lambda's tumbling
// window state holds them until the interval's flush). Those records are
// not late, although the shard looks idle while they are held; a watermark
// at or below hold closes no window that contains one of them.
func (w *Watermark) AdvanceIdleHeld(now time.Time, idleTimeout time.Duration, hold time.Time) bool {
	if w.IdleSince.IsZero() || !w.IdleMax.Equal(w.MaxEventTime) {
		w.IdleMax, w.IdleSince = w.MaxEventTime, now
		return false
	}
	if now.Sub(w.IdleSince) < idleTimeout {
		return false
	}
	to := w.IdleBound(now, idleTimeout)
	if !hold.IsZero() && to.After(hold) {
		to = hold
	}
	return w.raise(to)
}

// IdleBound is where an idle advance at processing time t moves the
// watermark: t − idleTimeout − OutOfOrderness. Each is subtracted from t
// in turn, never summed first: a sum past the largest duration wrapped
// round to a time far after t, which closed every window at once. A time
// saturates at its range instead (package time), so the bound is never
// after t for durations that are not negative.
func (w *Watermark) IdleBound(t time.Time, idleTimeout time.Duration) time.Time {
	return before(before(t, idleTimeout), w.OutOfOrderness)
}

// before is t − d, for every d: −d of the most negative duration is
// itself, so that one is added in two steps.
func before(t time.Time, d time.Duration) time.Time {
	if d == math.MinInt64 {
		return t.Add(math.MaxInt64).Add(1)
	}
	return t.Add(-d)
}

func (w *Watermark) raise(v time.Time) bool {
	if !v.After(w.Value) {
		return false
	}
	w.Value = v
	return true
}

// Merge raises w to everything o has seen (the larger of each field), for
// combining two copies of one shard's watermark, as after a concurrent
// duplicate invocation. It never lowers w. The idle clock (IdleMax,
// IdleSince) is kept while it is of the merged newest event time, the
// earlier one when both copies have one: a batch whose records move no
// event time (a type its function skips) stores its copy merged with the
// tick's, and dropping the tick's clock restarted it at every such batch,
// so a shard with steady traffic of other types never advanced as idle.
func (w *Watermark) Merge(o *Watermark) {
	if o.MaxEventTime.After(w.MaxEventTime) {
		w.MaxEventTime = o.MaxEventTime
	}
	w.raise(o.Value)
	mine := !w.IdleSince.IsZero() && w.IdleMax.Equal(w.MaxEventTime)
	theirs := !o.IdleSince.IsZero() && o.IdleMax.Equal(w.MaxEventTime)
	switch {
	case theirs && (!mine || o.IdleSince.Before(w.IdleSince)):
		w.IdleMax, w.IdleSince = o.IdleMax, o.IdleSince
	case !mine:
		w.IdleMax, w.IdleSince = time.Time{}, time.Time{}
	}
}

// Final reports whether win is complete: the watermark has reached its end,
// so no record in it is expected any more.
func (w *Watermark) Final(win Window) bool {
	return !w.Value.IsZero() && !w.Value.Before(win.End)
}

// Late reports whether a record that falls in win now is late: win is already
// final.
func (w *Watermark) Late(win Window) bool { return w.Final(win) }

// watermarkVersion is the first byte of MarshalBinary's encoding.
const watermarkVersion = 1

// MarshalBinary encodes w compactly: a version byte, then OutOfOrderness and
// the four times as varint nanoseconds (Unix; a zero time is encoded as a
// flag so it round-trips).
func (w *Watermark) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 1+5*binary.MaxVarintLen64)
	b = append(b, watermarkVersion)
	b = binary.AppendVarint(b, int64(w.OutOfOrderness))
	for _, t := range []time.Time{w.MaxEventTime, w.Value, w.IdleMax, w.IdleSince} {
		b = appendTime(b, t)
	}
	return b, nil
}

// UnmarshalBinary decodes MarshalBinary's encoding into w.
func (w *Watermark) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != watermarkVersion {
		return errors.New("window: watermark: unknown encoding version")
	}
	b = b[1:]
	ooo, n := binary.Varint(b)
	if n <= 0 {
		return errors.New("window: watermark: truncated out-of-orderness")
	}
	b = b[n:]
	var v Watermark
	v.OutOfOrderness = time.Duration(ooo)
	for i, dst := range []*time.Time{&v.MaxEventTime, &v.Value, &v.IdleMax, &v.IdleSince} {
		var err error
		if *dst, b, err = readTime(b); err != nil {
			return fmt.Errorf("window: watermark: time %d: %w", i, err)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("window: watermark: %d unexpected trailing bytes", len(b))
	}
	*w = v
	return nil
}

// appendTime writes 0 for the zero time, else 1 and Unix seconds and
// nanoseconds as varints (so any year round-trips).
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func readTime(b []byte) (time.Time, []byte, error) {
	if len(b) == 0 {
		return time.Time{}, nil, errors.New("truncated")
	}
	if b[0] == 0 {
		return time.Time{}, b[1:], nil
	}
	if b[0] != 1 {
		return time.Time{}, nil, errors.New("bad flag")
	}
	b = b[1:]
	sec, n := binary.Varint(b)
	if n <= 0 {
		return time.Time{}, nil, errors.New("truncated seconds")
	}
	b = b[n:]
	ns, n := binary.Uvarint(b)
	if n <= 0 || ns >= 1e9 {
		return time.Time{}, nil, errors.New("bad nanoseconds")
	}
	return time.Unix(sec, int64(ns)).UTC(), b[n:], nil
}
