package cep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The state's encoding: compact binary, rewritten whole on each fold. Rule
// ids and event types repeat across events and partial matches, so they are
// written once in a string table and referred to by index.

const cepStateVersion = 1

var errEncoding = errors.New("cep: state: malformed encoding")

type strTable struct {
	idx  map[string]uint64
	list []string
}

func (t *strTable) ref(s string) uint64 {
	if i, ok := t.idx[s]; ok {
		return i
	}
	if t.idx == nil {
		t.idx = map[string]uint64{}
	}
	i := uint64(len(t.list))
	t.idx[s] = i
	t.list = append(t.list, s)
	return i
}

func encodeCEP(dst []byte, st *cepState) []byte {
	var tab strTable
	var body []byte
	body = binary.AppendUvarint(body, uint64(st.ord))
	body = binary.AppendUvarint(body, uint64(len(st.pending)))
	for i := range st.pending {
		e := &st.pending[i]
		body = binary.AppendVarint(body, e.t)
		body = binary.AppendUvarint(body, uint64(e.ord))
		body = appendStr(body, e.id)
		body = binary.AppendUvarint(body, tab.ref(e.typ))
		body = binary.AppendUvarint(body, uint64(len(e.hits)))
		for _, h := range e.hits {
			body = binary.AppendUvarint(body, tab.ref(h.rule))
			body = binary.AppendUvarint(body, uint64(h.mask))
			body = binary.LittleEndian.AppendUint64(body, math.Float64bits(h.value))
		}
	}
	body = binary.AppendUvarint(body, uint64(len(st.partials)))
	for _, p := range st.partials {
		body = binary.AppendUvarint(body, tab.ref(p.rule))
		body = append(body, p.next)
		body = binary.AppendVarint(body, p.start)
		body = appendRefs(body, &tab, p.events)
	}
	body = binary.AppendUvarint(body, uint64(len(st.out)))
	for _, m := range st.out {
		body = binary.AppendUvarint(body, tab.ref(m.Rule))
		body = append(body, byte(m.Kind))
		body = appendStr(body, m.Absent)
		body = binary.LittleEndian.AppendUint64(body, math.Float64bits(m.Sum))
		body = appendRefs(body, &tab, m.Events)
	}
	dst = append(dst, cepStateVersion)
	dst = binary.AppendUvarint(dst, uint64(len(tab.list)))
	for _, s := range tab.list {
		dst = appendStr(dst, s)
	}
	return append(dst, body...)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendRefs(dst []byte, tab *strTable, refs []evRef) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(refs)))
	for _, r := range refs {
		dst = appendStr(dst, r.id)
		dst = binary.AppendUvarint(dst, tab.ref(r.typ))
		dst = binary.AppendVarint(dst, r.t)
		dst = binary.AppendUvarint(dst, uint64(r.ord))
		dst = append(dst, r.step)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.v))
	}
	return dst
}

func decodeCEP(b []byte) (*cepState, error) {
	st := &cepState{}
	if len(b) == 0 {
		return st, nil
	}
	if b[0] != cepStateVersion {
		return nil, fmt.Errorf("%w: version %d", errEncoding, b[0])
	}
	r := &rd{b: b[1:]}
	tab := make([]string, r.count(len(b)))
	for i := range tab {
		tab[i] = r.str()
	}
	s := func() string {
		i := r.uvarint()
		if i >= uint64(len(tab)) {
			r.fail()
			return ""
		}
		return tab[i]
	}
	st.ord = uint32(r.uvarint())
	st.pending = make([]pendingEv, r.count(len(b)))
	for i := range st.pending {
		e := &st.pending[i]
		e.t, e.ord, e.id, e.typ = r.varint(), uint32(r.uvarint()), r.str(), s()
		e.hits = make([]hit, r.count(len(b)))
		for j := range e.hits {
			e.hits[j] = hit{rule: s(), mask: uint16(r.uvarint()), value: r.float()}
		}
	}
	st.partials = make([]partial, r.count(len(b)))
	for i := range st.partials {
		p := &st.partials[i]
		p.rule, p.next, p.start = s(), r.byte(), r.varint()
		p.events = r.refs(s, len(b))
	}
	st.out = make([]Match, r.count(len(b)))
	for i := range st.out {
		m := &st.out[i]
		m.Rule, m.Kind, m.Absent, m.Sum = s(), Kind(r.byte()), r.str(), r.float()
		m.Events = r.refs(s, len(b))
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errEncoding, len(r.b))
	}
	return st, nil
}

type rd struct {
	b   []byte
	err error
}

func (r *rd) fail() { r.err, r.b = errEncoding, nil }

func (r *rd) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *rd) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rd) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that cannot exceed the encoding's size.
func (r *rd) count(limit int) int {
	n := r.uvarint()
	if n > uint64(limit) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *rd) str() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *rd) float() float64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *rd) refs(s func() string, limit int) []evRef {
	out := make([]evRef, r.count(limit))
	for i := range out {
		out[i] = evRef{id: r.str(), typ: s(), t: r.varint(), ord: uint32(r.uvarint()), step: r.byte(), v: r.float()}
	}
	return out
}
