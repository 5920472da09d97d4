package state

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tributary-dev/tributary/pkg/window"
)

// Fixed request shapes. Every request Views makes on the write path has
// one of a few forms fixed by the code (which attributes it sets, adds,
// removes and tests), and only its values change from call to call.
// Building the expressions per call with the expression package cost more
// than everything else a batch does (a batch of the deployed pipeline makes
// hundreds of writes), so each form is built with the expression package
// once, on first use, with a placeholder value for each value a call
// supplies (slot) and the writing shard's fence attribute as a placeholder
// name (fenceName); a call then takes the texts and names as built and
// fills in only its values. The request is the one the builder would make
// from the same values, text, names and values alike (shapes_test.go checks
// each form against the builder).

const (
	// slotMarker starts the placeholder value standing for slot i: a
	// string no caller writes (it starts with a NUL byte).
	slotMarker = "\x00slot"
	// fenceMarker is the placeholder name standing for the writing
	// shard's fence attribute (fenceAttr).
	fenceMarker = "\x00fence"
)

// slot is the placeholder for the i-th value a call fills in.
func slot(i int) expression.ValueBuilder { return expression.Value(slotMarker + strconv.Itoa(i)) }

// fenceName stands for the writing shard's fence attribute in a shape.
var fenceName = expression.Name(fenceMarker)

// shapeValue is one ExpressionAttributeValues entry of a shape: a value the
// form fixes (shared by every request made from the shape, never changed:
// requests are read-only to the store) or the slot a call fills.
type shapeValue struct {
	alias string
	fixed types.AttributeValue
	slot  int
}

// shape is one built form: its expression texts and names, and where each
// value comes from.
type shape struct {
	update, condition, keyCondition *string // nil when the form has none
	names                           map[string]string
	fenceAlias                      string // the alias of fenceMarker in names, "" if none
	values                          []shapeValue
	slots                           int

	byShard sync.Map // shard → its names, fenceMarker replaced by fenceAttr(shard)
}

// newShape builds b once and records which value each alias takes.
func newShape(b expression.Builder) (*shape, error) {
	ex, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("state: building a request shape: %w", err)
	}
	s := &shape{update: ex.Update(), condition: ex.Condition(), keyCondition: ex.KeyCondition(), names: ex.Names()}
	for alias, name := range s.names {
		if name == fenceMarker {
			s.fenceAlias = alias
		}
	}
	for alias, av := range ex.Values() {
		sv := shapeValue{alias: alias, fixed: av, slot: -1}
		if str, ok := av.(*types.AttributeValueMemberS); ok && strings.HasPrefix(str.Value, slotMarker) {
			n, err := strconv.Atoi(str.Value[len(slotMarker):])
			if err != nil {
				return nil, fmt.Errorf("state: request shape value %q: %w", str.Value, err)
			}
			sv.fixed, sv.slot = nil, n
			s.slots = max(s.slots, n+1)
		}
		s.values = append(s.values, sv)
	}
	return s, nil
}

// namesFor returns the shape's names for a request from shard: built once
// per shard and shared by its requests (read-only).
func (s *shape) namesFor(shard string) map[string]string {
	if s.fenceAlias == "" {
		return s.names
	}
	if m, ok := s.byShard.Load(shard); ok {
		return m.(map[string]string)
	}
	m := make(map[string]string, len(s.names))
	for k, v := range s.names {
		m[k] = v
	}
	m[s.fenceAlias] = fenceAttr(shard)
	actual, _ := s.byShard.LoadOrStore(shard, m)
	return actual.(map[string]string)
}

// valuesFor returns a request's ExpressionAttributeValues: the form's fixed
// values and slots[i] for slot i.
func (s *shape) valuesFor(slots []types.AttributeValue) map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(s.values))
	for _, sv := range s.values {
		if sv.fixed != nil {
			m[sv.alias] = sv.fixed
		} else {
			m[sv.alias] = slots[sv.slot]
		}
	}
	return m
}

// shapeSet holds a family of shapes (one per variant of a form), each
// built on first use.
type shapeSet struct {
	build func(variant uint) expression.Builder
	m     sync.Map // variant → *shape
}

func (ss *shapeSet) get(variant uint) (*shape, error) {
	if s, ok := ss.m.Load(variant); ok {
		return s.(*shape), nil
	}
	s, err := newShape(ss.build(variant))
	if err != nil {
		return nil, err
	}
	actual, _ := ss.m.LoadOrStore(variant, s)
	return actual.(*shape), nil
}

// Values as the expression package encodes them (attributevalue.Marshal).

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// avInt is n as a number. Small numbers (counts, revisions, versions) and
// numbers that repeat across a batch's writes (the expiry of a window's
// items) are shared values.
func avInt(n int64) types.AttributeValue {
	if n >= 0 && n < int64(len(smallNumbers)) {
		return smallNumbers[n]
	}
	e := &sharedNumbers[(uint64(n)*0x9E3779B97F4A7C15)>>(64-sharedNumberBits)]
	if c := e.Load(); c != nil && c.n == n {
		return c.av
	}
	c := &numberEntry{n: n, av: &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}}
	e.Store(c)
	return c.av
}

var smallNumbers = func() (t [256]types.AttributeValue) {
	for i := range t {
		t[i] = &types.AttributeValueMemberN{Value: strconv.Itoa(i)}
	}
	return t
}()

type numberEntry struct {
	n  int64
	av *types.AttributeValueMemberN
}

const sharedNumberBits = 8

var sharedNumbers [1 << sharedNumberBits]atomic.Pointer[numberEntry]

func avUint(n uint64) types.AttributeValue {
	if n < 1<<63 {
		return avInt(int64(n))
	}
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

// avB is a []byte as the encoder writes it: NULL for nil.
func avB(b []byte) types.AttributeValue {
	if b == nil {
		return &types.AttributeValueMemberNULL{Value: true}
	}
	return &types.AttributeValueMemberB{Value: b}
}

// avList1 is []any{b}: a list of one binary, made in one allocation.
func avList1(b []byte) types.AttributeValue {
	if b == nil {
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{avB(b)}}
	}
	l := &list1{b: types.AttributeValueMemberB{Value: b}}
	l.elems[0] = &l.b
	l.l.Value = l.elems[:]
	return &l.l
}

// list1 is a list of one binary and its parts, allocated together.
type list1 struct {
	l     types.AttributeValueMemberL
	elems [1]types.AttributeValue
	b     types.AttributeValueMemberB
}

// timeText is t formatted with TimeLayout. Window bounds and update times
// repeat across the writes of a batch (every key's item of one window has
// its bounds), so the text of recent instants is kept in a small table
// instead of formatted for each write.
func timeText(t time.Time) string { return timeAV(t).Value }

// timeAV is timeText as a value, shared by the requests that write it.
func timeAV(t time.Time) *types.AttributeValueMemberS {
	ms := t.UnixMilli()
	// Fibonacci hashing: window bounds are whole minutes apart, which a
	// plain modulus would crowd into a few entries.
	e := &timeTexts[(uint64(ms)*0x9E3779B97F4A7C15)>>(64-timeTextBits)]
	if c := e.Load(); c != nil && c.ms == ms {
		return c.av
	}
	c := &timeTextEntry{ms: ms, av: &types.AttributeValueMemberS{Value: t.UTC().Format(TimeLayout)}}
	e.Store(c)
	return c.av
}

// timeTextEntry is the text of the instant ms (Unix milliseconds): the
// layout shows milliseconds, so every instant within one has the same text.
type timeTextEntry struct {
	ms int64
	av *types.AttributeValueMemberS
}

const timeTextBits = 8

var timeTexts [1 << timeTextBits]atomic.Pointer[timeTextEntry]

// sharedS is avS(s) for a string that repeats across requests (a pipeline,
// window kind or index partition; a key's partition key, sort key and
// fence, the same in each of its windows' writes): a value made earlier for
// the same string is shared while it stays in a small table. The table
// keeps a copy of s, not s: a batch's strings share one allocation.
func sharedS(s string) types.AttributeValue {
	e := &sharedTexts[maphash.String(sharedSeed, s)%sharedTextsLen]
	if av := e.Load(); av != nil && av.Value == s {
		return av
	}
	av := &types.AttributeValueMemberS{Value: strings.Clone(s)}
	e.Store(av)
	return av
}

// sharedSBytes is sharedS(string(b)), allocating only when b is not in
// the table.
func sharedSBytes(b []byte) types.AttributeValue {
	e := &sharedTexts[maphash.Bytes(sharedSeed, b)%sharedTextsLen]
	if av := e.Load(); av != nil && av.Value == string(b) {
		return av
	}
	av := &types.AttributeValueMemberS{Value: string(b)}
	e.Store(av)
	return av
}

var (
	sharedSeed  = maphash.MakeSeed()
	sharedTexts [sharedTextsLen]atomic.Pointer[types.AttributeValueMemberS]
)

const sharedTextsLen = 1024

// windowKey is the key of u's window item: itemKey(PartitionKey(...),
// SortKey(...)) with the key values shared (sharedS).
func windowKey(pipeline, key, kind string, w window.Window) map[string]types.AttributeValue {
	var buf [160]byte
	pk := append(append(append(buf[:0], pipeline...), '#'), key...)
	pkAV := sharedSBytes(pk)
	sk := w.AppendID(append(append(buf[:0], kind...), '|'))
	return map[string]types.AttributeValue{attrPK: pkAV, attrSK: sharedSBytes(sk)}
}
