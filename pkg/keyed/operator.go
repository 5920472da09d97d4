package keyed

import (
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// Selection is what an operator does with a decoded record.
type Selection uint8

const (
	// Ignore: not the operator's record; it neither folds nor moves the
	// watermark (the join ignores other event types, so filtering them out
	// in the mapping changes nothing).
	Ignore Selection = iota
	// Observe: the record only moves its shard's watermark (CEP sees every
	// event's time, and folds only those some rule reads).
	Observe
	// Fold: the record is folded into its key's state (and moves the
	// watermark). Only these are screened for producer copies.
	Fold
)

// RecordError is a record that can never be folded: it is set aside with
// its data, naming Field, and the shard moves on.
type RecordError struct {
	Field  string
	Kind   string // a setaside kind: setaside.KindInvalid, KindStateBudget, ...
	Reason string
}

func (e *RecordError) Error() string { return e.Field + ": " + e.Reason }

// UnrenderableError is what Render returns when some outputs can never be
// encoded (an operator's value whose result does not render, such as a
// user's aggregate holding a NaN, which JSON has no number for): every
// retry would fail alike. Records are the outputs that render, in order;
// Aside the others. The Runner sets Aside aside and puts Records, so an
// output that can never be put does not hold its key, and its shard, for
// good.
type UnrenderableError struct {
	Records []emit.Record
	Aside   []Unrendered
}

// Unrendered is an output that cannot be rendered: what is known of it.
type Unrendered struct {
	Index        int    // its place in the outbox
	PartitionKey string // the partition key it would have been put with
	Data         []byte // what is known of it, kept with the record set aside
	Field        string // the part of the output that fails, for example "result"
	Reason       string
}

func (e *UnrenderableError) Error() string {
	if len(e.Aside) == 0 {
		return "no output is unrenderable"
	}
	return fmt.Sprintf("%d outputs cannot be rendered; the first: %s: %s", len(e.Aside), e.Aside[0].Field, e.Aside[0].Reason)
}

// Fate is what State.Add did with a record.
type Fate uint8

const (
	// Added: folded in.
	Added Fate = iota + 1
	// Late: the watermark had passed what the record could still change;
	// dropped and counted (LateDropped).
	Late
	// Aside: the record can never be folded (the key's state is full); it
	// is set aside with the RecordError Add returns.
	Aside
	// AddedLate: folded into what it could still change (a hopping window
	// still open, a sliding window not closed) and dropped from the rest;
	// counted in LateDropped, as a record dropped whole is.
	AddedLate
)

// Operator is the logic of a keyed stateful stage: which records it reads
// and under which key, and the state of one key. It is pure (no AWS, no
// clock): the Runner does the I/O, the fences and the retries.
type Operator[V any] interface {
	// Select decides what becomes of a decoded record and, for Fold, its
	// state key and the value folded. rec and env share the batch's
	// buffers: v must not keep their memory (clone strings and bytes). An
	// error is a *RecordError: the record is set aside, and not folded (a
	// record folded but skipped by a part of the operator is set aside by
	// State.Add instead).
	Select(rec *stream.KinesisRecord, env *stream.Envelope) (key string, v V, sel Selection, err error)
	// NewState decodes a key's state item (an empty blob is a new key).
	NewState(key string, blob []byte) (State[V], error)
}

// State is one key's state. Its outbox holds the outputs of the last fold
// until the Runner knows they are on the stream.
type State[V any] interface {
	// Compact drops the outbox and whatever only it needed: the Runner
	// calls it once the outbox is on the stream, before a new fold.
	Compact()
	// Add folds v in; wm is the shard's watermark just before the record.
	// It closes first what wm has passed (as Advance), then decides the
	// record's fate; outputs go to the outbox. With Aside the RecordError
	// says why; with another fate, a RecordError sets the record aside too,
	// for a part of the operator that skips it (a CEP sum rule that cannot
	// add its value), while the fate holds for the rest: one set-aside per
	// record, written with the fold.
	Add(v V, wm time.Time) (Fate, *RecordError)
	// Advance closes what the watermark wm has passed, adding the outputs
	// (unmatched records, timed-out patterns) to the outbox.
	Advance(wm time.Time)
	// Outbox is the number of outputs waiting.
	Outbox() int
	// Render encodes the outbox as records for the output stream, the same
	// bytes every time for the same state; an *UnrenderableError when some
	// outputs can never be encoded.
	Render() ([]emit.Record, error)
	// NextDue is the watermark at which the state next has something to
	// close; zero when nothing is open.
	NextDue() time.Time
	// Size is the state's encoded size (an upper bound is fine).
	Size() int
	// Encode appends the state's encoding to dst; an error when some of it
	// cannot be encoded (a user's aggregate failing to): the runner then
	// writes nothing and sets the key's records aside, the error in the
	// reason.
	Encode(dst []byte) ([]byte, error)
}
