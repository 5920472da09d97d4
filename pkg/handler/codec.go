package handler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tributary-dev/tributary/pkg/strictjson"
	"github.com/tributary-dev/tributary/pkg/window"
)

// stateVersion is the first byte of a state blob. Version 1 (tumbling
// windows only: open windows and an outbox of final results) still decodes.
const (
	stateVersion1 = 1
	stateVersion  = 2
)

// Encode appends: version; frozen and at (varints; a time never set is
// window.NoThreshold); the parts (t, records, threshold − t or 0 for none,
// aggregate length, aggregate); the final windows within the allowed
// lateness (start, end − start, revision, records, aggregate); the outbox
// (type, start, end − start, revision, records, aggregate and retracted
// aggregate, each with its length, 0 for none). An aggregate that fails to
// encode (a bug of the aggregate) is the error, whether a part's or a
// closing window's (see encode): the runner writes nothing, so the stored
// state is kept, and sets the key's records aside saying so.
func (s *keyState[T, V, A]) Encode(dst []byte) (_ []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("encoding the state of key %q: %w", s.key, panicked(p))
		}
	}()
	if s.encErr != nil {
		return dst, s.encErr
	}
	dst = append(dst, stateVersion)
	dst = binary.AppendVarint(dst, s.frozen)
	dst = binary.AppendVarint(dst, s.at)
	dst = binary.AppendUvarint(dst, uint64(len(s.parts)))
	for i := range s.parts {
		p := &s.parts[i]
		b, err := p.agg.MarshalBinary()
		if err != nil {
			s.o.log.Error("an aggregate failed to encode: the key's state is not written", "handler", s.o.name, "key", s.key, "error", strictjson.Cut(err.Error(), maxLoggedError))
			return dst, fmt.Errorf("the aggregate of the window part at %s failed to encode (MarshalBinary): %w", time.UnixMilli(p.t).UTC().Format(time.RFC3339Nano), err)
		}
		dst = binary.AppendVarint(dst, p.t)
		dst = binary.AppendUvarint(dst, uint64(p.n))
		var th uint64
		if p.th != window.NoThreshold {
			th = uint64(p.th - p.t)
		}
		dst = binary.AppendUvarint(dst, th)
		dst = appendBytes(dst, b)
	}
	ws := make([]span, 0, len(s.emitted))
	for w := range s.emitted {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, cmpSpan) // the same bytes for the same state
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	for _, w := range ws {
		e := s.emitted[w]
		dst = appendSpan(dst, w)
		dst = binary.AppendUvarint(dst, uint64(e.rev))
		dst = binary.AppendUvarint(dst, uint64(e.n))
		dst = appendBytes(dst, e.blob)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.out)))
	for i := range s.out {
		r := &s.out[i]
		dst = append(dst, typeCode(r.typ))
		dst = appendSpan(dst, r.w)
		dst = binary.AppendUvarint(dst, uint64(r.rev))
		dst = binary.AppendUvarint(dst, uint64(r.n))
		dst = appendBytes(dst, r.blob)
		dst = appendBytes(dst, r.prev)
	}
	return dst, nil
}

func appendSpan(dst []byte, w span) []byte {
	dst = binary.AppendVarint(dst, w.start)
	return binary.AppendUvarint(dst, uint64(w.end-w.start))
}

// appendBytes appends b's length plus one (0 for nil), then b.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

var typeCodes = []string{ResultType, CorrectionType, RetractionType}

func typeCode(t string) byte { return byte(slices.Index(typeCodes, t)) }

// reader reads a state blob; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated state")
	}
}

func (r *reader) varint() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return v
}

// count reads a count of items of at least one byte each.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n-1 > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	b := slices.Clone(r.b[:n-1])
	r.b = r.b[n-1:]
	return b
}

func (r *reader) span() span {
	start := r.varint()
	return span{start, start + int64(r.uvarint())}
}

func (s *keyState[T, V, A]) decode(b []byte) error {
	switch b[0] {
	case stateVersion1:
		return s.decodeV1(b[1:])
	case stateVersion:
	default:
		return fmt.Errorf("state version %d, this handler reads %d and %d", b[0], stateVersion1, stateVersion)
	}
	r := &reader{b: b[1:]}
	s.frozen, s.at = r.varint(), r.varint()
	n := r.count()
	s.parts = make([]part[A], 0, n)
	for range n {
		p := part[A]{t: r.varint(), n: int64(r.uvarint()), th: window.NoThreshold}
		if th := r.uvarint(); th != 0 {
			p.th = p.t + int64(th)
		}
		blob := r.bytes()
		if r.err != nil {
			return r.err
		}
		p.agg, p.size = A(new(T)), len(blob)
		if err := p.agg.UnmarshalBinary(blob); err != nil {
			return fmt.Errorf("part at %d: %w", p.t, err)
		}
		s.parts = append(s.parts, p)
	}
	for range r.count() {
		w := r.span()
		e := &emitted{rev: int(r.uvarint()), n: int64(r.uvarint()), blob: r.bytes()}
		s.emitted[w] = e
	}
	n = r.count()
	s.out = make([]result, 0, n)
	for range n {
		if len(r.b) == 0 {
			r.fail()
			break
		}
		code := int(r.b[0])
		r.b = r.b[1:]
		if code >= len(typeCodes) {
			return fmt.Errorf("output type %d", code)
		}
		res := result{typ: typeCodes[code], w: r.span(), rev: int(r.uvarint()), n: int64(r.uvarint())}
		res.blob, res.prev = r.bytes(), r.bytes()
		s.out = append(s.out, res)
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d bytes after the state", len(r.b))
	}
	return nil
}

// decodeV1 reads a state of the first version (tumbling windows only): a
// count and (start, records, aggregate length, aggregate) per window, for
// the open windows, then for the outbox. Open windows become panes, the
// outbox final results.
func (s *keyState[T, V, A]) decodeV1(b []byte) error {
	if s.o.kind.kind != "tumbling" {
		return fmt.Errorf("a tumbling handler's state (version %d): this handler has %s windows", stateVersion1, s.o.kind.kind)
	}
	r := &reader{b: b}
	size := s.o.kind.sizeMs()
	for section := range 2 {
		n := r.count()
		for range n {
			start, cnt := r.varint(), int64(r.uvarint())
			l := r.uvarint()
			if r.err != nil || l > uint64(len(r.b)) {
				return errors.New("truncated state")
			}
			blob := r.b[:l]
			r.b = r.b[l:]
			if section == 1 {
				s.out = append(s.out, result{typ: ResultType, w: span{start, start + size}, rev: 1, n: cnt, blob: slices.Clone(blob)})
				continue
			}
			agg := A(new(T))
			if err := agg.UnmarshalBinary(blob); err != nil {
				return fmt.Errorf("window at %d: %w", start, err)
			}
			s.parts = append(s.parts, part[A]{t: start, th: window.NoThreshold, n: cnt, agg: agg, size: len(blob)})
		}
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d bytes after the state", len(r.b))
	}
	return nil
}
