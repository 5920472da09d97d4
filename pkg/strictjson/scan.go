package strictjson

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest, counting the
// outermost one. It bounds the scanner's work per byte and keeps a document
// of six million '[' from being more than a refusal.
const MaxDepth = 64

// DefaultMaxBytes is the size Check and Decode allow when Options.MaxBytes
// is 0.
const DefaultMaxBytes = 1 << 20

// Kind is the class of a refusal, for callers that answer some classes
// differently (ingest answers TooMany with 413).
type Kind uint8

// The kinds of refusal.
const (
	// Syntax: not well-formed JSON, or not one value.
	Syntax Kind = iota + 1
	// Encoding: invalid UTF-8, a lone surrogate, a raw control character.
	Encoding
	// Duplicate: an object with the same key twice.
	Duplicate
	// Depth: nested deeper than MaxDepth.
	Depth
	// TooLarge: more bytes than Options.MaxBytes.
	TooLarge
	// Unknown: an object key that is not a field of the Go type.
	Unknown
	// Type: a value of the wrong JSON type (or out of the Go type's range).
	Type
	// Empty: Split was given no value at all.
	Empty
	// EmptyArray: Split was given an empty array.
	EmptyArray
	// TooMany: Split was given an array longer than its maximum.
	TooMany
	// NotContainer: Split was given a value that is neither an object nor
	// an array.
	NotContainer
	// NotObject: an array element Split returned is not an object (set by
	// callers that check it; Split itself accepts any value).
	NotObject
)

// Error is a document the reader refuses. Path is the JSON path of the value
// at fault ("data.items[2].name", a key that is not an identifier written
// ["like this"]; "" for the document as a whole); for Split, Path is inside
// element Index (-1: outside any element).
type Error struct {
	Kind   Kind
	Index  int
	Path   string
	Reason string
	// Offset is the byte offset in the document where the problem was
	// found, -1 when it is not a place (a type or an unknown field).
	Offset int
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Options bound a document.
type Options struct {
	// MaxBytes is the largest document accepted (0: DefaultMaxBytes).
	MaxBytes int
	// Name is what messages call the document ("body", "file"; "" :
	// "document").
	Name string
	// AllowUnknown (Decode) skips an object key that is no field of the Go
	// type, with its value, as encoding/json does: for documents a service
	// writes and may add fields to (Lambda's on-failure record), where
	// refusing a new field would refuse every document. A key that is a
	// field's name spelt in another case is still refused (encoding/json
	// would take it for the field), as are a key twice and everything
	// Check refuses.
	AllowUnknown bool
}

func (o Options) maxBytes() int {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return DefaultMaxBytes
}

func (o Options) name() string {
	if o.Name != "" {
		return o.Name
	}
	return "document"
}

// pathStep is one step of the path to the value being scanned: an object
// key (raw JSON text between the quotes, or its decoded form when it has
// escapes) or an array index.
type pathStep struct {
	key     []byte
	index   int
	isIndex bool
}

// scanner checks a whole document in one pass before anything is decoded:
// well-formed JSON, valid UTF-8 everywhere (raw bytes and \u escapes), no
// object with the same key twice, nesting at most MaxDepth.
type scanner struct {
	b     []byte
	i     int
	elem  int // index of the element being scanned (Split); -1 outside
	name  string
	path  []pathStep
	keys  []keySet // keys seen per open object, by depth (reused)
	err   *Error
	depth int
}

func newScanner(b []byte, name string) *scanner {
	return &scanner{b: b, elem: -1, name: name, keys: make([]keySet, MaxDepth+1)}
}

// scanners keeps Check's scanners: a consumer checks every record of a
// stream, and a scanner's key sets (MaxDepth+1 of them) were most of the
// allocation of checking a small document.
var scanners = sync.Pool{New: func() any { return newScanner(nil, "") }}

// getScanner is a pooled scanner over b; putScanner returns it.
func getScanner(b []byte, name string) *scanner {
	s := scanners.Get().(*scanner)
	s.b, s.i, s.elem, s.name, s.err, s.depth = b, 0, -1, name, nil, 0
	return s
}

// putScanner drops what s holds of its document (keys are slices of it),
// so that the pool keeps no document alive, and pools s.
func putScanner(s *scanner) {
	for i := range s.keys {
		k := &s.keys[i]
		if cap(k.list) == 0 && k.index == nil {
			continue
		}
		clear(k.list[:cap(k.list)])
		k.list, k.index = k.list[:0], nil
	}
	clear(s.path[:cap(s.path)])
	s.path, s.b, s.err = s.path[:0], nil, nil
	scanners.Put(s)
}

// Check refuses doc unless it is one well-formed JSON value of valid UTF-8,
// with no object holding a key twice, nested at most MaxDepth deep, and at
// most o.MaxBytes long. Its error is an *Error.
func Check(doc []byte, o Options) error {
	if err := check(doc, o); err != nil {
		return err
	}
	return nil
}

func check(doc []byte, o Options) *Error {
	if max := o.maxBytes(); len(doc) > max {
		return &Error{Kind: TooLarge, Index: -1, Offset: -1,
			Reason: fmt.Sprintf("the %s is %d bytes; at most %d", o.name(), len(doc), max)}
	}
	s := getScanner(doc, o.name())
	defer putScanner(s)
	s.ws()
	if s.i == len(s.b) {
		return &Error{Kind: Syntax, Index: -1, Offset: 0, Reason: fmt.Sprintf("the %s is empty: want a JSON value", s.name)}
	}
	if !s.value() {
		return s.err
	}
	s.ws()
	if s.i < len(s.b) {
		// A file of one value per line (JSON Lines) is the usual cause:
		// say where the second begins.
		line := 1 + bytes.Count(s.b[:s.i], []byte{'\n'})
		return s.syntax(fmt.Sprintf("after the JSON value: the %s must hold exactly one value; another begins on line %d", s.name, line))
	}
	return nil
}

// Split scans body, a JSON object or an array of values, and returns the
// elements (the object itself, or the array's elements) as slices of body,
// refusing what Check refuses with Index naming the element and Path the
// place inside it. elemName names the array in messages ("events" gives
// "after events[3], want ',' or ']'"). An array of more than max elements
// is a TooMany refusal; an empty body, an empty array and any other value
// are Empty, EmptyArray and NotContainer, with Reason left for the caller
// to word.
func Split(body []byte, max int, elemName string) ([][]byte, *Error) {
	s := newScanner(body, "body")
	s.ws()
	if s.i == len(s.b) {
		return nil, &Error{Kind: Empty, Index: -1, Offset: 0}
	}
	var out [][]byte
	switch s.b[s.i] {
	case '[':
		s.i++
		s.depth = 1
		s.ws()
		if s.peek() == ']' {
			return nil, &Error{Kind: EmptyArray, Index: -1, Offset: s.i}
		}
		for n := 0; ; n++ {
			if n == max {
				return nil, &Error{Kind: TooMany, Index: -1, Offset: s.i}
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
				return nil, s.syntax("after " + elemName + "[" + strconv.Itoa(n) + "], want ',' or ']'")
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
		if r, size := utf8.DecodeRune(s.b[s.i:]); r == utf8.RuneError && size <= 1 {
			s.fail(Encoding, s.invalidUTF8())
			return nil, s.err
		}
		return nil, &Error{Kind: NotContainer, Index: -1, Offset: s.i}
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
//
// A syntax error at a byte that is not UTF-8 (a document in Latin-1 or
// UTF-16, bytes FF FE) is that: it is called invalid UTF-8, at its byte,
// as inside a string, rather than an unexpected character.
func (s *scanner) fail(kind Kind, reason string) bool {
	if kind == Syntax && s.i < len(s.b) && s.b[s.i] >= utf8.RuneSelf {
		if r, size := utf8.DecodeRune(s.b[s.i:]); r == utf8.RuneError && size <= 1 {
			kind, reason = Encoding, s.invalidUTF8()
		}
	}
	if s.err == nil {
		s.err = &Error{Kind: kind, Index: s.elem, Path: formatPath(s.path), Reason: reason, Offset: s.i}
	}
	return false
}

// syntax is a malformed-JSON error at the current byte.
func (s *scanner) syntax(what string) *Error {
	s.fail(Syntax, s.syntaxReason(what))
	return s.err
}

func (s *scanner) syntaxReason(what string) string {
	if s.i >= len(s.b) {
		return fmt.Sprintf("not valid JSON: the %s ends at byte %d %s", s.name, s.i, what)
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
		return s.fail(Syntax, s.syntaxReason("where a value should start"))
	}
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > MaxDepth {
		return s.fail(Depth, fmt.Sprintf("nests arrays and objects deeper than %d levels (counting the outermost)", MaxDepth))
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
			return s.fail(Syntax, s.syntaxReason("where an object key should start"))
		}
		key, ok := s.str(true)
		if !ok {
			return false
		}
		if !seen.add(key) {
			s.path = append(s.path, pathStep{key: key})
			return s.fail(Duplicate, fmt.Sprintf("duplicate object key %s: each key may appear once in an object (parsers disagree on which copy wins)", quoteKey(key)))
		}
		s.ws()
		if s.peek() != ':' {
			return s.fail(Syntax, s.syntaxReason("after an object key, want ':'"))
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
			return s.fail(Syntax, s.syntaxReason("in an object, want ',' or '}'"))
		}
	}
}

// keySet holds the keys of one open object. Objects are usually small and
// a linear search is fastest; past smallObject keys a hash index takes over
// (64-bit hashes of the keys, no allocation per key), so that a document of
// one object with half a million keys costs linear time, not quadratic.
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
			return s.fail(Syntax, s.syntaxReason("in an array, want ',' or ']'"))
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.fail(Syntax, s.syntaxReason("in a literal (true, false or null)"))
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
		return s.fail(Syntax, s.syntaxReason("in a number"))
	}
	if s.peek() == '.' {
		s.i++
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail(Syntax, s.syntaxReason("after a decimal point"))
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail(Syntax, s.syntaxReason("in an exponent"))
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
			return nil, s.fail(Syntax, s.syntaxReason("inside a string"))
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
				// Made, not appended to nil: a string that starts with
				// its escape has no bytes before it, and a nil buf would
				// read as "no escape seen" ({"a":1,"\u0061":2} passed).
				buf = make([]byte, 0, s.i-start+8)
				buf = append(buf, s.b[start:s.i]...)
			}
			r, ok := s.escape()
			if !ok {
				return nil, false
			}
			if buf != nil {
				buf = utf8.AppendRune(buf, r)
			}
		case c < 0x20:
			return nil, s.fail(Encoding, fmt.Sprintf("not valid JSON: control character 0x%02x at byte %d inside a string; escape it (\\n, \\t, \\u%04x)", c, s.i, c))
		case c < utf8.RuneSelf:
			if buf != nil {
				buf = append(buf, c)
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, s.fail(Encoding, s.invalidUTF8())
			}
			if buf != nil {
				buf = append(buf, s.b[s.i:s.i+size]...)
			}
			s.i += size
		}
	}
}

// invalidUTF8 is the reason for the byte at s.i, which starts no UTF-8
// character.
func (s *scanner) invalidUTF8() string {
	hint := ""
	if s.i == 0 && (bytes.HasPrefix(s.b, []byte{0xff, 0xfe}) || bytes.HasPrefix(s.b, []byte{0xfe, 0xff})) {
		hint = " (FF FE or FE FF: a UTF-16 byte order mark)"
	}
	return fmt.Sprintf("invalid UTF-8 at byte %d of the %s (byte 0x%02x)%s; the %s must be UTF-8", s.i, s.name, s.b[s.i], hint, s.name)
}

// escape scans one backslash escape at s.i and returns the rune it stands
// for. A \u escape of a UTF-16 surrogate must be a high one followed by a
// low one.
func (s *scanner) escape() (rune, bool) {
	at := s.i
	s.i++ // backslash
	if s.i >= len(s.b) {
		return 0, s.fail(Syntax, s.syntaxReason("in an escape"))
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
		return 0, s.fail(Syntax, s.syntaxReason("in an escape (want one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"))
	}
	r, ok := s.hex4()
	if !ok {
		return 0, false
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, s.fail(Encoding, fmt.Sprintf("invalid UTF-8: \\u%04x at byte %d is a lone low surrogate", r, at))
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
		return 0, s.fail(Encoding, fmt.Sprintf("invalid UTF-8: \\u%04x at byte %d is a high surrogate without its low half", r, at))
	}
	return r, true
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		s.i = len(s.b)
		return 0, s.fail(Syntax, s.syntaxReason("in a \\u escape"))
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
			return 0, s.fail(Syntax, s.syntaxReason("in a \\u escape (want four hex digits)"))
		}
	}
	s.i += 4
	return r, true
}

// maxKeyShown bounds how much of an object key a path repeats.
const maxKeyShown = 64

// formatPath writes a path such as data.items[2].name; a key that is not a
// plain identifier is written ["like this"], cut to maxKeyShown bytes.
// MaxDepth bounds the steps, so a path is at most a few kilobytes.
func formatPath(path []pathStep) string {
	if len(path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range path {
		if p.isIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.index))
			b.WriteByte(']')
			continue
		}
		writeKeyStep(&b, p.key)
	}
	return b.String()
}

// writeKeyStep writes the step naming an object key after the path in b:
// .name (name alone at the start) for a plain identifier, else the key
// quoted in brackets, cut to maxKeyShown bytes.
func writeKeyStep(b *strings.Builder, key []byte) {
	if identifier(key) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(key)
		return
	}
	b.WriteByte('[')
	b.WriteString(quoteKey(key))
	b.WriteByte(']')
}

// KeyPath is prefix followed by the step that names key, an object key a
// producer chose, as the reader writes the paths of its errors: a plain
// identifier after a dot (KeyPath("data", "amount") is data.amount), any
// other key quoted in brackets, escapes and all, cut to 64 bytes
// (KeyPath("data", "a.b") is data["a.b"], KeyPath("", "\x1b[2J") is
// ["\x1b[2J"]). Every field a message or a set-aside record names by a
// key it was sent is written with it: the key then cannot read as the path
// of another place (a top-level "data.amount" is not data.amount), nor put
// a control or bidirectional character into a log line or a terminal. It
// costs nothing for an identifier at the start of a path (the key itself).
func KeyPath(prefix, key string) string {
	if identifier(key) {
		return JoinPath(prefix, key) // as writeKeyStep writes it, without a copy of key
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(key) + 5)
	b.WriteString(prefix)
	writeKeyStep(&b, []byte(key))
	return b.String()
}

// JoinPath is prefix followed by path, as formatPath writes them:
// JoinPath("data", "holder.name") is "data.holder.name",
// JoinPath("rules", "[2].id") "rules[2].id".
func JoinPath(prefix, path string) string {
	switch {
	case prefix == "":
		return path
	case path == "":
		return prefix
	case path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}

func identifier[T string | []byte](k T) bool {
	if len(k) == 0 || len(k) > maxKeyShown {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
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
		return strconv.Quote(string(TruncateUTF8(k, maxKeyShown))) + "…"
	}
	return strconv.Quote(string(k))
}

// Cut is s cut to at most n bytes without splitting a character, with "…"
// after a cut: what an error or an answer repeats of a value it was sent,
// never the whole of a hostile one.
func Cut(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n {
		return s
	}
	return string(TruncateUTF8([]byte(s), n)) + "…"
}

// CutMiddle is s with its middle left out when it is over n bytes: its
// first and last n/2 bytes, whole characters, joined by "…". For a message
// that starts with what was sent and ends with what is wanted (a
// configuration error), both of which should stay.
func CutMiddle(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n {
		return s
	}
	head := TruncateUTF8([]byte(s), n/2)
	tail := s[len(s)-n/2:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return string(head) + "…" + tail
}

// QuoteCut is Cut, quoted as strconv.Quote quotes (the "…" outside the
// quotes).
func QuoteCut(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(string(TruncateUTF8([]byte(s), n))) + "…"
}

// TruncateUTF8 cuts b to at most n bytes without splitting a character.
func TruncateUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
