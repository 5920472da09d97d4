package agg

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"
)

// State is one window's aggregates for one key. Make it with Spec.New or
// Spec.Decode; a State is not safe for concurrent use.
type State struct {
	spec     *Spec
	count    uint64
	sum      float64
	min, max float64
	distinct *hyperloglog.Sketch // nil until the first distinct value
	quant    *sketch             // nil until the first value
	spare    *sketch             // an empty sketch for quant, kept by Clear
}

// New returns an empty State for s. s must be valid (NewSpec, Validate).
func (s *Spec) New() *State { return &State{spec: s} }

// Spec is the Spec the state was made for.
func (st *State) Spec() *Spec { return st.spec }

// Count is the number of values added (over all merges).
func (st *State) Count() uint64 { return st.count }

// Reset empties st for reuse.
func (st *State) Reset() { *st = State{spec: st.spec} }

// Clear empties st for reuse, as Reset does, keeping the memory of its
// quantile sketch for the values added next: a state cleared and filled
// again encodes and answers exactly as a new one filled with those values.
func (st *State) Clear() {
	spare := st.quant
	if spare == nil {
		spare = st.spare
	}
	*st = State{spec: st.spec}
	if spare != nil {
		spare.clear()
		st.spare = spare
	}
}

// newQuant is an empty sketch for st.quant: the one Clear kept, or a new one.
func (st *State) newQuant() *sketch {
	if q := st.spare; q != nil {
		st.spare = nil
		return q
	}
	return newSketch()
}

// Add adds one record: its value (ignored unless an aggregate needs it) and
// its distinct value (ignored unless distinct is on; not retained). value
// must be finite. For count, sum, min, max and mean Add does not allocate.
func (st *State) Add(value float64, distinct []byte) {
	a := st.spec.Aggregates
	if a.keepsExtremes() {
		if st.count == 0 || value < st.min {
			st.min = value
		}
		if st.count == 0 || value > st.max {
			st.max = value
		}
	}
	st.count++
	if a.keepsSum() {
		st.sum += value
	}
	if a&Distinct != 0 {
		if st.distinct == nil {
			st.distinct = st.newDistinct()
		}
		st.distinct.Insert(distinct)
	}
	if a&Quantiles != 0 {
		if st.quant == nil {
			st.quant = st.newQuant()
		}
		// Only NaN and magnitudes beyond ~1e308 fail; they are not finite
		// JSON numbers and pipeline.Extract refuses them.
		_ = st.quant.add(value)
	}
}

func (st *State) newDistinct() *hyperloglog.Sketch {
	sk, err := hyperloglog.NewSketch(st.spec.DistinctPrecision, true)
	if err != nil {
		panic(fmt.Sprintf("agg: spec not validated: %v", err))
	}
	return sk
}

// ErrSpecMismatch is wrapped by Merge and decoding when two states or a state
// and an encoding were made for different aggregates.
var ErrSpecMismatch = errors.New("agg: states have different aggregates")

// Merge adds everything in o to st, as if o's values had been added to st.
// Merge is associative and commutative (the sum up to floating-point
// rounding; exactly for integers below 2^53). o is not changed.
func (st *State) Merge(o *State) error {
	if st.spec.Aggregates != o.spec.Aggregates {
		return fmt.Errorf("%w: %s and %s", ErrSpecMismatch, st.spec.Aggregates, o.spec.Aggregates)
	}
	if o.count == 0 {
		return nil
	}
	if st.count == 0 || o.min < st.min {
		st.min = o.min
	}
	if st.count == 0 || o.max > st.max {
		st.max = o.max
	}
	st.count += o.count
	st.sum += o.sum
	if o.distinct != nil {
		if st.distinct == nil {
			st.distinct = o.distinct.Clone()
		} else if err := st.distinct.Merge(o.distinct); err != nil {
			return fmt.Errorf("agg: distinct: %w", err)
		}
	}
	if o.quant != nil {
		if st.quant == nil {
			st.quant = st.newQuant()
		}
		st.quant.mergeWith(o.quant)
	}
	return nil
}

// Settle brings st's sketches to the form its encoding and its result
// read them in (a quantile sketch's buffer sorted and compacted, a
// distinct sketch's insert buffer folded), which both otherwise do first:
// a state encoded or read again after Settle, with nothing added or merged
// into it, is only read, so one state may be encoded by several goroutines
// at once (the windows of a pane, package aggregate).
func (st *State) Settle() {
	if st.quant != nil {
		st.quant.settle()
	}
	if st.distinct != nil {
		st.distinct.Estimate()
	}
}

// Clone returns an independent copy of st.
func (st *State) Clone() *State {
	c := *st
	c.spare = nil
	if st.distinct != nil {
		c.distinct = st.distinct.Clone()
	}
	if st.quant != nil {
		c.quant = st.quant.copy()
	}
	return &c
}

// Versions: the first byte of every encoding. Stored items are written in
// encodingVersion; compactVersion (AppendCompact) is for state that rides
// in Lambda's 1 MB window state, where integers written as 8-byte floats
// take a third of a small partial.
const (
	encodingVersion = 1
	compactVersion  = 2
)

// Flags of a compact encoding: which of sum, min and max are integers,
// written as zigzag varints rather than 8 bytes.
const (
	compactSumInt = 1 << iota
	compactMinInt
	compactMaxInt
)

// AppendBinary appends st's encoding to dst:
//
//	byte      version (1)
//	uvarint   aggregates (bit set)
//	uvarint   count
//	8 bytes   sum, little-endian IEEE 754           (sum or mean)
//	8+8 bytes min, max                              (min, max or quantiles; only when count > 0)
//	uvarint n, n bytes  HyperLogLog sketch          (distinct; n = 0 when empty)
//	uvarint n, n bytes  DDSketch, mapping omitted   (quantiles; n = 0 when empty)
func (st *State) AppendBinary(dst []byte) ([]byte, error) {
	a := st.spec.Aggregates
	dst = append(dst, encodingVersion)
	dst = binary.AppendUvarint(dst, uint64(a))
	dst = binary.AppendUvarint(dst, st.count)
	if a.keepsSum() {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(st.sum))
	}
	if a.keepsExtremes() && st.count > 0 {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(st.min))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(st.max))
	}
	return st.appendSketches(dst)
}

// AppendCompact appends st's compact encoding to dst: AppendBinary's,
// version 2, with a flags byte after the count saying which of sum, min
// and max are integers (|v| < 2^53, not −0), each such one a zigzag varint
// rather than 8 bytes. A partial of a few integer values (milliseconds,
// counts) takes some 15 bytes, not 33. Decode reads both versions; code
// from before version 2 reads neither this nor anything holding it.
func (st *State) AppendCompact(dst []byte) ([]byte, error) {
	a := st.spec.Aggregates
	dst = append(dst, compactVersion)
	dst = binary.AppendUvarint(dst, uint64(a))
	dst = binary.AppendUvarint(dst, st.count)
	sum, ext := a.keepsSum(), a.keepsExtremes() && st.count > 0
	var flags byte
	if sum && isInt(st.sum) {
		flags |= compactSumInt
	}
	if ext && isInt(st.min) {
		flags |= compactMinInt
	}
	if ext && isInt(st.max) {
		flags |= compactMaxInt
	}
	dst = append(dst, flags)
	if sum {
		dst = appendNumber(dst, st.sum, flags&compactSumInt != 0)
	}
	if ext {
		dst = appendNumber(dst, st.min, flags&compactMinInt != 0)
		dst = appendNumber(dst, st.max, flags&compactMaxInt != 0)
	}
	return st.appendSketches(dst)
}

// isInt reports whether v round-trips through an int64 varint.
func isInt(v float64) bool {
	return v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v))
}

func appendNumber(dst []byte, v float64, asInt bool) []byte {
	if asInt {
		return binary.AppendVarint(dst, int64(v))
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// appendSketches appends the distinct and quantile sketches, the tail of
// both versions.
func (st *State) appendSketches(dst []byte) ([]byte, error) {
	a := st.spec.Aggregates
	if a&Distinct != 0 {
		if st.distinct == nil {
			dst = append(dst, 0)
		} else {
			// Estimate folds the sketch's unsorted insert buffer into its
			// compressed list, which is smaller on the wire.
			st.distinct.Estimate()
			var err error
			if dst, err = appendFramed(dst, st.distinct.AppendBinary); err != nil {
				return nil, fmt.Errorf("agg: distinct: %w", err)
			}
		}
	}
	if a&Quantiles != 0 {
		if st.quant == nil {
			dst = append(dst, 0)
		} else {
			dst, _ = appendFramed(dst, func(b []byte) ([]byte, error) {
				st.quant.encode(&b)
				return b, nil
			})
		}
	}
	return dst, nil
}

// appendFramed appends a uvarint length and what enc appends. enc appends
// to dst itself, past room left for the longest length, and the body is
// moved back next to the length it turns out to need: no buffer of its own.
func appendFramed(dst []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	dst, err := enc(append(dst, make([]byte, binary.MaxVarintLen64)...))
	if err != nil {
		return nil, err
	}
	body := len(dst) - start - binary.MaxVarintLen64
	n := binary.PutUvarint(dst[start:], uint64(body))
	copy(dst[start+n:], dst[start+binary.MaxVarintLen64:])
	return dst[:start+n+body], nil
}

// MarshalBinary is AppendBinary into a new buffer, sized for a state of a
// few values in one go.
func (st *State) MarshalBinary() ([]byte, error) {
	return st.AppendBinary(make([]byte, 0, marshalBytes))
}

// marshalBytes is MarshalBinary's first buffer: a state of a few values
// with every aggregate (a batch's contribution to one window) fits.
const marshalBytes = 96

// UnmarshalBinary replaces st's contents with an encoding made for the same
// aggregates as st's Spec.
func (st *State) UnmarshalBinary(b []byte) error {
	if st.spec == nil {
		return errNoSpec
	}
	v, err := st.spec.Decode(b)
	if err != nil {
		return err
	}
	*st = *v
	return nil
}

var errNoSpec = errors.New("agg: decoding into a State without a Spec: use Spec.New or Spec.Decode")

// MarshalText is the encoding in standard base64, for string-valued state
// such as Lambda's tumbling-window state.
func (st *State) MarshalText() ([]byte, error) {
	b, err := st.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.AppendEncode(nil, b), nil
}

// UnmarshalText decodes MarshalText's form.
func (st *State) UnmarshalText(text []byte) error {
	b, err := base64.StdEncoding.AppendDecode(nil, text)
	if err != nil {
		return fmt.Errorf("agg: state is not base64: %w", err)
	}
	return st.UnmarshalBinary(b)
}

// String is MarshalText as a string.
func (st *State) String() string {
	b, err := st.MarshalText()
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// DecodeString decodes MarshalText's form into a new State for s.
func (s *Spec) DecodeString(text string) (*State, error) {
	st := s.New()
	if err := st.UnmarshalText([]byte(text)); err != nil {
		return nil, err
	}
	return st, nil
}

// ErrCorrupt is wrapped by decoding errors for encodings that are not
// well-formed.
var ErrCorrupt = errors.New("agg: corrupt state encoding")

// Decode decodes an encoding (AppendBinary) into a new State for s. The
// encoding must have been made for s's aggregates (ErrSpecMismatch).
func (s *Spec) Decode(b []byte) (*State, error) {
	st := s.New()
	if err := st.decode(b); err != nil {
		return nil, err
	}
	return st, nil
}

// SetBinary makes st the state Decode(b) would return, reusing st's
// memory (as Clear does): for reading many encodings one after another,
// each merged elsewhere. On an error st is left cleared or partly filled.
func (st *State) SetBinary(b []byte) error {
	st.Clear()
	return st.decode(b)
}

// decode fills st, empty, from the encoding b.
func (st *State) decode(b []byte) error {
	s := st.spec
	r := reader{b: b}
	v := r.byte()
	if v != encodingVersion && v != compactVersion {
		return fmt.Errorf("%w: version %d, want %d or %d", ErrCorrupt, v, encodingVersion, compactVersion)
	}
	a := Aggregate(r.uvarint())
	if r.err != nil {
		return r.err
	}
	if a != s.Aggregates {
		return fmt.Errorf("%w: the state holds %s, the spec wants %s", ErrSpecMismatch, a, s.Aggregates)
	}
	st.count = r.uvarint()
	var flags byte // version 1: every number a float
	if v == compactVersion {
		if flags = r.byte(); flags&^(compactSumInt|compactMinInt|compactMaxInt) != 0 {
			return fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, flags)
		}
	}
	if a.keepsSum() {
		st.sum = r.number(flags&compactSumInt != 0)
	}
	if a.keepsExtremes() && st.count > 0 {
		st.min = r.number(flags&compactMinInt != 0)
		st.max = r.number(flags&compactMaxInt != 0)
	}
	if a&Distinct != 0 {
		if body := r.framed(); len(body) > 0 {
			st.distinct = new(hyperloglog.Sketch)
			if err := st.distinct.UnmarshalBinary(body); err != nil {
				return fmt.Errorf("%w: distinct: %v", ErrCorrupt, err)
			}
		}
	}
	if a&Quantiles != 0 {
		if body := r.framed(); len(body) > 0 {
			q := st.newQuant()
			if err := decodeSketch(q, body); err != nil {
				return fmt.Errorf("%w: quantiles: %v", ErrCorrupt, err)
			}
			st.quant = q
		}
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	return nil
}

// reader reads an encoding; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("header")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) float() float64 {
	if len(r.b) < 8 {
		r.fail("number")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// number reads a float's 8 bytes, or an integer's zigzag varint within
// ±2^53 (what AppendCompact writes).
func (r *reader) number(asInt bool) float64 {
	if !asInt {
		return r.float()
	}
	v, n := binary.Varint(r.b)
	if n <= 0 || v >= 1<<53 || v <= -(1<<53) {
		r.fail("integer")
		return 0
	}
	r.b = r.b[n:]
	return float64(v)
}

func (r *reader) framed() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if uint64(len(r.b)) < n {
		r.fail("sketch")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
