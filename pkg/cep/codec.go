package cep

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/internal/binenc"
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
		body = binenc.AppendString(body, e.id)
		body = binary.AppendUvarint(body, tab.ref(e.typ))
		body = binary.AppendUvarint(body, uint64(len(e.hits)))
		for _, h := range e.hits {
			body = binary.AppendUvarint(body, tab.ref(h.rule))
			body = binary.AppendUvarint(body, uint64(h.mask))
			body = binenc.AppendFloat64(body, h.value)
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
		body = binenc.AppendString(body, m.Absent)
		body = binenc.AppendFloat64(body, m.Sum)
		body = appendRefs(body, &tab, m.Events)
	}
	dst = append(dst, cepStateVersion)
	dst = binary.AppendUvarint(dst, uint64(len(tab.list)))
	for _, s := range tab.list {
		dst = binenc.AppendString(dst, s)
	}
	return append(dst, body...)
}

func appendRefs(dst []byte, tab *strTable, refs []evRef) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(refs)))
	for _, r := range refs {
		dst = binenc.AppendString(dst, r.id)
		dst = binary.AppendUvarint(dst, tab.ref(r.typ))
		dst = binary.AppendVarint(dst, r.t)
		dst = binary.AppendUvarint(dst, uint64(r.ord))
		dst = append(dst, r.step)
		dst = binenc.AppendFloat64(dst, r.v)
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
	r := binenc.NewReader(b[1:], errEncoding)
	tab := make([]string, r.Count(len(b)))
	for i := range tab {
		tab[i] = r.LenString()
	}
	s := func() string {
		i := r.Uvarint()
		if i >= uint64(len(tab)) {
			r.Fail()
			return ""
		}
		return tab[i]
	}
	st.ord = uint32(r.Uvarint())
	st.pending = make([]pendingEv, r.Count(len(b)))
	for i := range st.pending {
		e := &st.pending[i]
		e.t, e.ord, e.id, e.typ = r.Varint(), uint32(r.Uvarint()), r.LenString(), s()
		e.hits = make([]hit, r.Count(len(b)))
		for j := range e.hits {
			e.hits[j] = hit{rule: s(), mask: uint16(r.Uvarint()), value: r.Float64()}
		}
	}
	st.partials = make([]partial, r.Count(len(b)))
	for i := range st.partials {
		p := &st.partials[i]
		p.rule, p.next, p.start = s(), r.Byte(), r.Varint()
		p.events = readRefs(&r, s, len(b))
	}
	st.out = make([]Match, r.Count(len(b)))
	for i := range st.out {
		m := &st.out[i]
		m.Rule, m.Kind, m.Absent, m.Sum = s(), Kind(r.Byte()), r.LenString(), r.Float64()
		m.Events = readRefs(&r, s, len(b))
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errEncoding, r.Len())
	}
	return st, nil
}

// readRefs reads appendRefs' output; s reads a string table reference.
func readRefs(r *binenc.Reader, s func() string, limit int) []evRef {
	out := make([]evRef, r.Count(limit))
	for i := range out {
		out[i] = evRef{id: r.LenString(), typ: s(), t: r.Varint(), ord: uint32(r.Uvarint()), step: r.Byte(), v: r.Float64()}
	}
	return out
}
