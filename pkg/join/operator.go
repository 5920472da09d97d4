package join

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/pkg/emit"
	"github.com/tributary-dev/tributary/pkg/keyed"
	"github.com/tributary-dev/tributary/pkg/setaside"
	"github.com/tributary-dev/tributary/pkg/state"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// StateKind is the keyed state kind of the join's state items.
const StateKind = "join"

// maxKeyChars bounds a join key read from data, in Unicode characters
// (the envelope key is bounded by the envelope's own limit, the same): it
// is the partition key of the key's outputs, which Kinesis bounds at 256
// characters (a longer one refuses the whole PutRecords call, so the
// outputs could never be put and the shard would retry them for ever), and
// part of an item's key (at most 1,024 bytes in UTF-8).
const maxKeyChars = stream.MaxKeyLength

// Handler is the join function: a keyed.Runner running the join. Build it
// with New.
type Handler = keyed.Runner[rec]

// New returns the join handler of cfg: state, watermarks and the dedupe
// ledger in views' table, outputs on the Kinesis stream named out.
func New(cfg *Config, views *state.Views, kin emit.Putter, out string, lim Limits, opts ...keyed.Option) *Handler {
	return keyed.New[rec](Settings(cfg, lim), &Operator{cfg: cfg, lim: lim}, views, kin, out, opts...)
}

// Settings are the runner settings of a join: its watermark is the newest
// event time of the shard minus the allowed lateness.
func Settings(cfg *Config, lim Limits) keyed.Settings {
	return keyed.Settings{Name: cfg.Name, Kind: StateKind, OutOfOrderness: cfg.AllowedLateness,
		IdleTimeout: cfg.IdleTimeout, FoldBytes: lim.FoldBytes}
}

// Operator is the join as a keyed.Operator.
type Operator struct {
	cfg *Config
	lim Limits
}

var _ keyed.Operator[rec] = (*Operator)(nil)

// Select folds records of the two types under their join key and ignores
// every other record. A record without a join key, with a join key from
// data that is not its partition key, with data that is not JSON or
// bigger than the limit is set aside naming the field.
func (o *Operator) Select(kr *stream.KinesisRecord, env *stream.Envelope) (string, rec, keyed.Selection, error) {
	var r rec
	switch env.Type {
	case o.cfg.Left:
		r.side = SideLeft
	case o.cfg.Right:
		r.side = SideRight
	default:
		return "", r, keyed.Ignore, nil
	}
	key, err := o.cfg.Key.Text(env)
	if err != nil {
		return "", r, keyed.Ignore, &keyed.RecordError{Field: o.cfg.Key.String(), Kind: setaside.KindInvalid, Reason: reasonOf(err)}
	}
	chars, fits := stream.KeyLength(key)
	switch {
	case key == "":
		return "", r, keyed.Ignore, &keyed.RecordError{Field: o.cfg.Key.String(), Kind: setaside.KindInvalid, Reason: "the join key is empty"}
	case !fits:
		return "", r, keyed.Ignore, &keyed.RecordError{Field: o.cfg.Key.String(), Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("the join key is %d characters; at most %d (it is the outputs' partition key)", chars, maxKeyChars)}
	case !o.cfg.Key.IsPartitionKey() && key != kr.PartitionKey:
		// partitionKeyIsJoinKey promised it: otherwise the two sides of a
		// key may be read from two shards, each closing the key's records
		// by its own watermark, and what joins would depend on which shard
		// Lambda reads first.
		return "", r, keyed.Ignore, &keyed.RecordError{Field: o.cfg.Key.String(), Kind: setaside.KindInvalid,
			Reason: fmt.Sprintf("the join key %q is not the record's partition key %q: with partitionKeyIsJoinKey the producer must use it as the partition key, so both sides of a key are on one shard", key, kr.PartitionKey)}
	}
	if t := bytes.TrimSpace(env.Data); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var b bytes.Buffer
		if err := json.Compact(&b, t); err != nil {
			return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindUnparseable, Reason: err.Error()}
		}
		if b.Len() > o.lim.MaxRecordData {
			return "", r, keyed.Ignore, &keyed.RecordError{Field: "data", Kind: setaside.KindStateBudget,
				Reason: fmt.Sprintf("the %s's data is %d bytes (compact JSON); the join buffers at most %d per record", env.Type, b.Len(), o.lim.MaxRecordData)}
		}
		r.data = b.Bytes()
	}
	r.t = env.EventTime().UnixMilli()
	r.id = strings.Clone(env.ID)
	return strings.Clone(key), r, keyed.Fold, nil
}

// reasonOf is the reason of a field error without the field's name (the
// set-aside record names the field apart).
func reasonOf(err error) string {
	var fe *stream.FieldError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// NewState decodes a key's state.
func (o *Operator) NewState(key string, blob []byte) (keyed.State[rec], error) {
	st, err := decodeState(blob)
	if err != nil {
		return nil, err
	}
	st.key = key
	return &stateOfKey{o: o, key: key, st: st}, nil
}

// stateOfKey is a key's state as a keyed.State.
type stateOfKey struct {
	o   *Operator
	key string
	st  *keyState
}

func (s *stateOfKey) Compact() { s.st.compact() }

func (s *stateOfKey) Add(v rec, wm time.Time) (keyed.Fate, *keyed.RecordError) {
	switch s.o.cfg.add(s.st, v, wm.UnixMilli(), s.o.lim) {
	case late:
		return keyed.Late, nil
	case overBudget:
		return keyed.Aside, &keyed.RecordError{Field: s.o.cfg.Key.String(), Kind: setaside.KindStateBudget,
			Reason: fmt.Sprintf("join key %q holds %d bytes of open records; this one would take it past its %d-byte budget (one DynamoDB item): the key takes records again as their windows close",
				s.key, s.st.openBytes(), s.o.lim.MaxOpenBytes)}
	case tooManyOutputs:
		other := s.o.cfg.Right
		if v.side == SideRight {
			other = s.o.cfg.Left
		}
		return keyed.Aside, &keyed.RecordError{Field: s.o.cfg.Key.String(), Kind: setaside.KindStateBudget,
			Reason: fmt.Sprintf("join key %q has %d open %s records this one joins: at least %d bytes of joined records; one record may make at most %d (a fold's outputs go to the joins stream in one go)",
				s.key, s.st.refused.matches, other, s.st.refused.bytes, s.o.lim.maxOutputBytes())}
	}
	return keyed.Added, nil
}

func (s *stateOfKey) Advance(wm time.Time) { s.o.cfg.advance(s.st, wm.UnixMilli()) }

func (s *stateOfKey) Outbox() int { return len(s.st.out) }

func (s *stateOfKey) Render() ([]emit.Record, error) { return s.o.cfg.render(s.key, s.st) }

func (s *stateOfKey) NextDue() time.Time {
	if due := s.o.cfg.nextDue(s.st); due != 0 {
		return time.UnixMilli(due).UTC()
	}
	return time.Time{}
}

// Size bounds the state's encoding and the size on the stream of its
// outputs, so that FoldBytes bounds both the item and a fold's outputs.
func (s *stateOfKey) Size() int {
	n := 16 + 24*len(s.st.rates) + 12*len(s.st.out) + s.st.outBytes
	for i := range s.st.recs {
		n += recBytes(&s.st.recs[i])
	}
	return n
}

func (s *stateOfKey) Encode(dst []byte) ([]byte, error) { return encodeState(dst, s.st), nil }
