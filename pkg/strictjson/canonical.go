package strictjson

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// AppendCanonical appends doc, one JSON value, to dst in one spelling of
// its value: no white space; each object's members sorted by key, the
// keys compared as decoded, byte by byte (encoding/json's order for a
// map's keys); strings escaped as Marshal escapes them (\" \\ \b \f \n \r
// \t, the other control characters \u00XX, U+2028 and U+2029 \u2028 and
// \u2029, every other character as itself, "\/" and "\u00e9" included);
// numbers and literals as written. It is the spelling
// es.Command.Fingerprint hashes a command's data in (without time fields):
// documents that differ only in white space, key order and string escapes
// have one canonical form, and a canonical form is its own.
//
// ok is false, and dst is returned as given, for a document Check refuses:
// not one JSON value, not UTF-8, a key twice in an object, nested deeper
// than MaxDepth. It is bounded as the document is: at most 2·len(doc)
// bytes are appended (a raw U+2028, 3 bytes, becomes 6); an object whose
// keys came out of order is written once more after itself and moved back
// (so dst holds it twice for a moment, and a byte is copied at most once
// per level it is nested in, MaxDepth at most), its keys sorted in
// O(k log k). Nothing is allocated besides dst's growth, but a copy of
// each object key written with an escape, and the lists of open arrays and
// objects and of their members past 8 of each.
func AppendCanonical(dst, doc []byte) (out []byte, ok bool) {
	// One loop over an explicit stack of the open arrays and objects,
	// not a recursion, and the buffers in locals: escape analysis then
	// sees that dst and the members' array stay the caller's, on the
	// stack where they start there.
	type open struct {
		object bool
		sorted bool
		first  int // where the first member or element starts in out
		base   int // the object's first member in ms
	}
	// Room for the usual document on the stack, small: zeroing room for
	// MaxDepth levels cost more than the rest of a small document's work.
	var (
		opens   [8]open
		members [8]member
	)
	s := scanner{b: doc, elem: -1, name: "document"}
	out, ms, stack := dst, members[:0], opens[:0]
	s.ws()
	for {
		// A value starts at s.i.
		switch ch := s.peek(); {
		case ch == '{' || ch == '[':
			if !s.enter() {
				return dst, false
			}
			s.i++
			out = append(out, ch)
			stack = append(stack, open{object: ch == '{', sorted: true, first: len(out), base: len(ms)})
			s.ws()
			if c := s.peek(); c == '}' && ch == '{' || c == ']' && ch == '[' {
				break // closed below
			}
			if ch == '{' {
				var ok bool
				if out, ms, ok = canonicalKey(&s, out, ms, &stack[len(stack)-1].sorted, stack[len(stack)-1].base); !ok {
					return dst, false
				}
			}
			continue
		case ch == '"':
			var ok bool
			if out, ok = canonicalString(&s, out); !ok {
				return dst, false
			}
		case ch == 't' || ch == 'f' || ch == 'n':
			start := s.i
			lit := "null"
			if ch == 't' {
				lit = "true"
			} else if ch == 'f' {
				lit = "false"
			}
			if !s.literal(lit) {
				return dst, false
			}
			out = append(out, s.b[start:s.i]...)
		case ch == '-' || (ch >= '0' && ch <= '9'):
			start := s.i
			if !s.number() {
				return dst, false
			}
			out = append(out, s.b[start:s.i]...)
		default:
			return dst, false
		}
		// A value ended (or an empty container is to close): go on to
		// the next member or element, closing what ends on the way.
		for {
			if len(stack) == 0 {
				if s.ws(); s.i < len(doc) {
					return dst, false
				}
				return out, true
			}
			top := &stack[len(stack)-1]
			if top.object && len(ms) > top.base && ms[len(ms)-1].end == 0 {
				ms[len(ms)-1].end = len(out)
			}
			s.ws()
			c := s.peek()
			if c == ',' {
				s.i++
				s.ws()
				out = append(out, ',')
				if top.object {
					var ok bool
					if out, ms, ok = canonicalKey(&s, out, ms, &top.sorted, top.base); !ok {
						return dst, false
					}
				}
				break // the next value
			}
			if top.object && c != '}' || !top.object && c != ']' {
				return dst, false
			}
			s.i++
			s.depth--
			if top.object {
				var ok bool
				if out, ok = sortMembers(out, ms[top.base:], top.first, top.sorted); !ok {
					return dst, false
				}
				ms = ms[:top.base]
			}
			out = append(out, c)
			stack = stack[:len(stack)-1]
		}
	}
}

// member is an object's member being written: its key (as decoded) and
// where the member is in the output (end 0 while its value is written).
type member struct {
	key        []byte
	start, end int
}

// canonicalKey writes the key at s.i and its colon, and opens its member
// in ms; sorted goes false when the key is not after the object's last.
func canonicalKey(s *scanner, out []byte, ms []member, sorted *bool, base int) ([]byte, []member, bool) {
	if s.peek() != '"' {
		return out, ms, false
	}
	key, ok := s.str(true)
	if !ok {
		return out, ms, false
	}
	if n := len(ms); n > base && bytes.Compare(ms[n-1].key, key) >= 0 {
		*sorted = false
	}
	start := len(out)
	out = appendString(out, key)
	if s.ws(); s.peek() != ':' {
		return out, ms, false
	}
	s.i++
	s.ws()
	return append(out, ':'), append(ms, member{key: key, start: start}), true
}

// sortMembers puts an object's members, written in out from first on in
// the order sent, in the order of their keys; false for a key twice.
func sortMembers(out []byte, ms []member, first int, sorted bool) ([]byte, bool) {
	if sorted {
		return out, true // keys strictly ascending: none twice
	}
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(ms[i-1].key, ms[i].key) {
			return out, false
		}
	}
	// The members in order after the object, then moved back over it:
	// as many bytes, the commas as many.
	end := len(out)
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, out[m.start:m.end]...)
	}
	return out[:first+copy(out[first:], out[end:])], true
}

// canonicalString writes the string at s.i in its canonical spelling,
// straight from the document: runs of characters that need no escape are
// copied.
func canonicalString(s *scanner, out []byte) ([]byte, bool) {
	s.i++ // "
	out = append(out, '"')
	run := s.i
	for {
		if s.i >= len(s.b) {
			return out, false
		}
		ch := s.b[s.i]
		switch {
		case ch == '"':
			out = append(out, s.b[run:s.i]...)
			s.i++
			return append(out, '"'), true
		case ch == '\\':
			out = append(out, s.b[run:s.i]...)
			r, ok := s.escape()
			if !ok {
				return out, false
			}
			out = appendRune(out, r)
			run = s.i
		case ch < 0x20:
			return out, false
		case ch < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return out, false
			}
			if r == '\u2028' || r == '\u2029' {
				out = appendRune(append(out, s.b[run:s.i]...), r)
				run = s.i + size
			}
			s.i += size
		}
	}
}

// appendString appends s, decoded text (valid UTF-8), quoted in the
// canonical spelling.
func appendString(out, s []byte) []byte {
	out = append(out, '"')
	run := 0
	for i := 0; i < len(s); {
		ch := s[i]
		if ch < utf8.RuneSelf {
			if ch >= 0x20 && ch != '"' && ch != '\\' {
				i++
				continue
			}
			out = appendRune(append(out, s[run:i]...), rune(ch))
			i++
			run = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == '\u2028' || r == '\u2029' {
			out = appendRune(append(out, s[run:i]...), r)
			run = i + size
		}
		i += size
	}
	return append(append(out, s[run:]...), '"')
}

// appendRune appends r as the canonical spelling writes it inside a
// string: escaped as encoding/json escapes it without HTML escaping, or
// as itself.
func appendRune(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch r {
	case '"', '\\':
		return append(out, '\\', byte(r))
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	case '\u2028', '\u2029':
		return append(out, '\\', 'u', '2', '0', '2', hex[r&0xF])
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
	}
	return utf8.AppendRune(out, r)
}
