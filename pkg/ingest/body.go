package ingest

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest in a request body,
// counting the top-level array. It bounds the scanner's work per byte and
// keeps a body of six million '[' from being more than a 400.
const MaxDepth = 64

// bodyError is a request body the scanner refuses: elem is the index of the
// event it is in (-1: the body itself, outside any event), field the JSON
// path inside that event ("" for the event as a whole).
type bodyError struct {
	status int // 400, or 413 for too many events
	elem   int
	field  string
	reason string
}

// pathStep is one step of the path to the value being scanned: an object
// key (raw JSON text between the quotes, or its decoded form when it has
// escapes) or an array index.
type pathStep struct {
	key     []byte
	index   int
	isIndex bool
}

// scanner checks a whole request body in one pass before anything is
// decoded: well-formed JSON (RFC 8259), valid UTF-8 everywhere (raw bytes and
// \u escapes: a lone surrogate is refused, where encoding/json would turn it
// into U+FFFD without a word), no object with the same key twice (parsers
// disagree on which one wins, so a duplicate is ambiguous input), and
// nesting at most MaxDepth. It splits a top-level array into its elements
// without copying.
type scanner struct {
	b     []byte
	i     int
	elem  int // index of the event being scanned; -1 outside
	path  []pathStep
	keys  []keySet // keys seen per open object, by depth (reused)
	err   *bodyError
	depth int
}

// splitBody scans body and returns its events: the elements of a top-level
// array, or the body itself when it is one object. maxEvents bounds the
// array's length (a longer one is a 413).
func splitBody(body []byte, maxEvents int) ([][]byte, *bodyError) {
	s := &scanner{b: body, elem: -1, keys: make([]keySet, MaxDepth+1)}
	s.ws()
	if s.i == len(s.b) {
		return nil, &bodyError{status: 400, elem: -1, reason: "is empty; send one envelope or a JSON array of envelopes"}
	}
	var out [][]byte
	switch s.b[s.i] {
	case '[':
		s.i++
		s.depth = 1
		s.ws()
		if s.peek() == ']' {
			return nil, &bodyError{status: 400, elem: -1, reason: "is an empty array; send at least one envelope"}
		}
		for n := 0; ; n++ {
			if n == maxEvents {
				return nil, &bodyError{status: 413, elem: -1, field: "",
					reason: fmt.Sprintf("holds more than %d events; send at most %d per request", maxEvents, maxEvents)}
			}
			s.elem = n
			start := s.i
			if !s.value() {
				return nil, s.err
			}
			out = append(out, s.b[start:s.i])
			s.elem = -1
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				s.ws()
				continue
			case ']':
				s.i++
			default:
				return nil, s.syntax("after events[" + strconv.Itoa(n) + "], want ',' or ']'")
			}
			break
		}
	case '{':
		s.elem = 0
		start := s.i
		if !s.value() {
			return nil, s.err
		}
		out = append(out, s.b[start:s.i])
		s.elem = -1
	default:
		return nil, &bodyError{status: 400, elem: -1, reason: "must be one envelope (a JSON object) or a JSON array of envelopes"}
	}
	s.ws()
	if s.i < len(s.b) {
		return nil, s.syntax("after the JSON value: the body must hold exactly one value")
	}
	return out, nil
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// fail records the first error and returns false, so callers can
// `return s.fail(...)`.
func (s *scanner) fail(reason string) bool {
	if s.err == nil {
		s.err = &bodyError{status: 400, elem: s.elem, field: s.fieldPath(), reason: reason}
	}
	return false
}

// syntax is a malformed-JSON error at the current byte.
func (s *scanner) syntax(what string) *bodyError {
	s.fail(s.syntaxReason(what))
	return s.err
}

func (s *scanner) syntaxReason(what string) string {
	if s.i >= len(s.b) {
		return fmt.Sprintf("not valid JSON: the body ends at byte %d %s", s.i, what)
	}
	return fmt.Sprintf("not valid JSON: unexpected %s at byte %d %s", describeByte(s.b[s.i]), s.i, what)
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// value scans one JSON value at s.i.
func (s *scanner) value() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		_, ok := s.str(false)
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.fail(s.syntaxReason("where a value should start"))
	}
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > MaxDepth {
		return s.fail(fmt.Sprintf("nests arrays and objects deeper than %d levels (counting the request's array)", MaxDepth))
	}
	return true
}

func (s *scanner) object() bool {
	if !s.enter() {
		return false
	}
	s.i++                    // {
	seen := &s.keys[s.depth] // enter bounds depth by MaxDepth
	seen.reset()
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		if s.peek() != '"' {
			return s.fail(s.syntaxReason("where an object key should start"))
		}
		key, ok := s.str(true)
		if !ok {
			return false
		}
		if !seen.add(key) {
			s.path = append(s.path, pathStep{key: key})
			return s.fail(fmt.Sprintf("duplicate object key %s: each key may appear once in an object (parsers disagree on which copy wins)", quoteKey(key)))
		}
		s.ws()
		if s.peek() != ':' {
			return s.fail(s.syntaxReason("after an object key, want ':'"))
		}
		s.i++
		s.ws()
		s.path = append(s.path, pathStep{key: key})
		if !s.value() {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return s.fail(s.syntaxReason("in an object, want ',' or '}'"))
		}
	}
}

// keySet holds the keys of one open object. Objects in events are small and
// a linear search is fastest; past smallObject keys a hash index takes over
// (64-bit hashes of the keys, no allocation per key), so that a body of one
// object with half a million keys costs linear time, not quadratic.
type keySet struct {
	list  [][]byte
	index map[uint64]int32 // hash → position in list of the first key with it
	seed  maphash.Seed
}

const smallObject = 32

func (k *keySet) reset() {
	k.list = k.list[:0]
	k.index = nil
}

// add adds key and reports whether it was new.
func (k *keySet) add(key []byte) bool {
	if k.index == nil {
		for _, x := range k.list {
			if bytes.Equal(x, key) {
				return false
			}
		}
		k.list = append(k.list, key)
		if len(k.list) > smallObject {
			if k.seed == (maphash.Seed{}) {
				k.seed = maphash.MakeSeed()
			}
			k.index = make(map[uint64]int32, 4*len(k.list))
			for i, x := range k.list {
				if _, ok := k.index[maphash.Bytes(k.seed, x)]; !ok {
					k.index[maphash.Bytes(k.seed, x)] = int32(i)
				}
			}
		}
		return true
	}
	h := maphash.Bytes(k.seed, key)
	if i, ok := k.index[h]; ok {
		if bytes.Equal(k.list[i], key) {
			return false
		}
		// Two keys with one hash (about 1 in 2^64 per pair): compare with
		// every key.
		for _, x := range k.list {
			if bytes.Equal(x, key) {
				return false
			}
		}
	} else {
		k.index[h] = int32(len(k.list))
	}
	k.list = append(k.list, key)
	return true
}

func (s *scanner) array() bool {
	if !s.enter() {
		return false
	}
	s.i++ // [
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for n := 0; ; n++ {
		s.path = append(s.path, pathStep{index: n, isIndex: true})
		if !s.value() {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return s.fail(s.syntaxReason("in an array, want ',' or ']'"))
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.fail(s.syntaxReason("in a literal (true, false or null)"))
	}
	s.i += len(lit)
	return true
}

func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return s.fail(s.syntaxReason("in a number"))
	}
	if s.peek() == '.' {
		s.i++
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail(s.syntaxReason("after a decimal point"))
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail(s.syntaxReason("in an exponent"))
		}
		s.digits()
	}
	return true
}

func (s *scanner) digits() {
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
}

// str scans a string at s.i (on its opening quote). With decode it returns
// the string's value: the raw bytes when there is no escape, else a
// decoded copy.
func (s *scanner) str(decode bool) ([]byte, bool) {
	s.i++ // "
	start := s.i
	var buf []byte // decoded copy, once an escape is seen
	for {
		if s.i >= len(s.b) {
			return nil, s.fail(s.syntaxReason("inside a string"))
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			if buf != nil {
				v = buf
			}
			s.i++
			return v, true
		case c == '\\':
			if decode && buf == nil {
				buf = append([]byte(nil), s.b[start:s.i]...)
			}
			r, ok := s.escape()
			if !ok {
				return nil, false
			}
			if buf != nil {
				buf = utf8.AppendRune(buf, r)
			}
		case c < 0x20:
			return nil, s.fail(fmt.Sprintf("not valid JSON: control character 0x%02x at byte %d inside a string; escape it (\\n, \\t, \\u%04x)", c, s.i, c))
		case c < utf8.RuneSelf:
			if buf != nil {
				buf = append(buf, c)
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, s.fail(fmt.Sprintf("invalid UTF-8 at byte %d of the body (byte 0x%02x); the body must be UTF-8", s.i, c))
			}
			if buf != nil {
				buf = append(buf, s.b[s.i:s.i+size]...)
			}
			s.i += size
		}
	}
}

// escape scans one backslash escape at s.i and returns the rune it stands
// for. A \u escape of a UTF-16 surrogate must be a high one followed by a
// low one.
func (s *scanner) escape() (rune, bool) {
	at := s.i
	s.i++ // backslash
	if s.i >= len(s.b) {
		return 0, s.fail(s.syntaxReason("in an escape"))
	}
	c := s.b[s.i]
	s.i++
	switch c {
	case '"', '\\', '/':
		return rune(c), true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
	default:
		s.i--
		return 0, s.fail(s.syntaxReason("in an escape (want one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"))
	}
	r, ok := s.hex4()
	if !ok {
		return 0, false
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, s.fail(fmt.Sprintf("invalid UTF-8: \\u%04x at byte %d is a lone low surrogate", r, at))
	case r >= 0xD800 && r <= 0xDBFF:
		if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			s.i += 2
			lo, ok := s.hex4()
			if !ok {
				return 0, false
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				return utf16.DecodeRune(r, lo), true
			}
		}
		return 0, s.fail(fmt.Sprintf("invalid UTF-8: \\u%04x at byte %d is a high surrogate without its low half", r, at))
	}
	return r, true
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		s.i = len(s.b)
		return 0, s.fail(s.syntaxReason("in a \\u escape"))
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, s.fail(s.syntaxReason("in a \\u escape (want four hex digits)"))
		}
	}
	s.i += 4
	return r, true
}

// fieldPath is the path of the current value inside its event, such as
// data.items[2].name; a key that is not a plain identifier is written
// ["like this"].
func (s *scanner) fieldPath() string {
	return formatPath(s.path)
}

func formatPath(path []pathStep) string {
	var b strings.Builder
	for _, p := range path {
		if p.isIndex {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if identifier(p.key) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(p.key)
			continue
		}
		b.WriteByte('[')
		b.WriteString(quoteKey(p.key))
		b.WriteByte(']')
	}
	return b.String()
}

// maxKeyShown bounds how much of an object key an error message repeats.
const maxKeyShown = 64

func identifier(k []byte) bool {
	if len(k) == 0 || len(k) > maxKeyShown {
		return false
	}
	for i, c := range k {
		switch {
		case c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

func quoteKey(k []byte) string {
	if len(k) > maxKeyShown {
		return strconv.Quote(string(truncateUTF8(k, maxKeyShown))) + "…"
	}
	return strconv.Quote(string(k))
}

// truncateUTF8 cuts b to at most n bytes without splitting a character.
func truncateUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
