package handler

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Aggregate is a user-defined mergeable aggregate of values V, implemented
// by a pointer type A (for example *StatusMix, with V a status code). The
// handler lifts each record's value into a one-value aggregate (a new
// zero T, then Add) and merges that into its window's aggregate, so Merge
// is how every value reaches the state; closed windows are rendered with
// json.Marshal (give the type a MarshalJSON to shape the result).
//
// The laws the handler relies on (check them with a table or property
// test, as examples/functions/statuscodes does):
//   - Merge is associative and commutative, and the zero value is its
//     identity: a window's result does not depend on how Lambda cut the
//     batches nor on the order keys were folded in;
//   - MarshalBinary is canonical (equal aggregates encode to equal bytes)
//     and UnmarshalBinary reads it back;
//   - merging never makes an encoding longer than its operands' together,
//     so the handler bounds a window's size without re-encoding it for
//     each record;
//   - Merge does not keep a reference to its argument.
type Aggregate[V any, A any] interface {
	// Add adds one value.
	Add(v V)
	// Merge adds every value other holds.
	Merge(other A)
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Event is a decoded record as a Selector sees it: the producer's envelope
// (package stream) with its event time. Data is the record's own memory,
// valid only during the call: a Selector decodes what it needs from it.
type Event struct {
	// ID is the producer's idempotency key (duplicates are suppressed by it).
	ID string
	// Type names the kind of event, for example "http_request".
	Type string
	// Key is the envelope's key (the stream's partition key).
	Key string
	// Time is the event time: occurredAt corrected by receivedAt − sentAt.
	Time time.Time
	// Data is the event's payload, raw JSON.
	Data json.RawMessage
}

// Selector turns an event into the key and value it adds to, or returns
// ErrSkip for an event the handler does not read (another type), or an
// error for an event that can never be added: a *FieldError (see Refuse)
// names the field, and the record is set aside with its data and the
// reason. A key's records must all come from one shard: the envelope's key
// or a refinement of it (ev.Key + "/" + a field), as the stream's partition
// key puts one envelope key's events on one shard. A key fed by several
// shards is closed by whichever shard's watermark passes its windows
// first, and the other shards' records for them are dropped as late, so
// its results depend on the order the shards were read; to group by
// another field, republish the events keyed by it (repartition) first.
// A Selector must be a pure function of the event; one that panics
// on an event (or an Add or MarshalBinary that panics on its value) would
// panic on every retry, so the record is set aside naming data, with the
// panic as the reason. A Merge, MarshalBinary or UnmarshalBinary that
// panics later, folding or closing a key's windows, is handled as an
// aggregate that fails to encode (the key's records and a copy of its
// state are set aside), a MarshalJSON that panics as a result that fails
// to render (set aside naming result): neither ends the process.
type Selector[V any] func(ev *Event) (key string, v V, err error)

// ErrSkip is what a Selector returns for an event that is not its own: it
// is ignored (no state, no watermark), as if the mapping had filtered it out.
var ErrSkip = errors.New("handler: event skipped")

// FieldError is an event that can never be added because of one field's
// value: it is set aside naming Field.
type FieldError struct {
	// Field is the JSON path of the field, for example "data.status".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Refuse returns a *FieldError naming field.
func Refuse(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
