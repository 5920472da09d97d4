package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is Unmarshal's fast path: a single-pass scanner for exactly the
// envelope's shape. It accepts only input it is sure encoding/json accepts
// and decodes it to the same Envelope; everything else (malformed JSON, a
// field of the wrong type, a key that only matches a field by Unicode case
// folding, nesting deeper than maxFastDepth) makes decodeFast report
// done=false, and Unmarshal decodes with encoding/json, so errors are
// unchanged.

// Field numbers of the envelope's JSON keys.
const (
	fieldID = iota
	fieldType
	fieldKey
	fieldOccurredAt
	fieldSentAt
	fieldReceivedAt
	fieldData
	fieldUnknown
)

// fieldNames are the JSON names, indexed by field number.
var fieldNames = [...]string{"id", "type", "key", "occurredAt", "sentAt", "receivedAt", "data"}

// maxFastDepth is the deepest nesting of arrays and objects the fast path
// skips or keeps as data; deeper documents go to encoding/json (whose limit
// is 10000).
const maxFastDepth = 512

// Flags of a scanned string.
const (
	strEscape   = 1 << iota // has a backslash escape
	strNonASCII             // has a byte >= 0x80
)

// rawText is a JSON string in the input: the bytes between its quotes.
type rawText struct {
	start, end int
	flags      uint8
	set        bool // the key was present with a string value (not null)
}

// scanned is where the envelope's values are in the input; decoding them
// waits until the whole document is known to be well-formed.
type scanned struct {
	text      [fieldData]rawText // id, type, key, occurredAt, sentAt, receivedAt
	dataStart int
	dataEnd   int // dataEnd > dataStart when data was present
	// inexact: a key was not one of the fields spelt exactly (another
	// case, an escape, or unknown), which UnmarshalExact refuses.
	inexact bool
}

// decodeFast decodes data into e when it can be sure of decoding it exactly
// as the encoding/json path does; done=false means it did not touch e and
// the caller must decode with encoding/json. With done=true, err is a time
// field's *FieldError (the JSON itself was fine).
func decodeFast(data []byte, e *Envelope) (done bool, err error) {
	var s scanned
	if !s.scan(data) {
		return false, nil
	}
	return true, s.decode(data, e)
}

// decode decodes the values scan found into e; the error is a time
// field's *FieldError.
func (s *scanned) decode(data []byte, e *Envelope) (err error) {
	// ID, Type and Key share one allocation (so holding on to one keeps the
	// others' bytes alive: a few dozen bytes, not the record).
	var scratch [256]byte
	b := scratch[:0]
	var ends [3]int
	for f := fieldID; f <= fieldKey; f++ {
		b = appendText(b, data, s.text[f])
		ends[f] = len(b)
	}
	all := string(b)
	*e = Envelope{ID: all[:ends[0]], Type: all[ends[0]:ends[1]], Key: all[ends[1]:]}

	// In encoding/json path order: the first bad time is the error, the
	// times before it are already set.
	if e.OccurredAt, err = decodeTime(data, fieldOccurredAt, s.text[fieldOccurredAt]); err != nil {
		return err
	}
	if e.SentAt, err = decodeTime(data, fieldSentAt, s.text[fieldSentAt]); err != nil {
		return err
	}
	if e.ReceivedAt, err = decodeTime(data, fieldReceivedAt, s.text[fieldReceivedAt]); err != nil {
		return err
	}
	if raw := data[s.dataStart:s.dataEnd]; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		e.Data = make(json.RawMessage, len(raw))
		copy(e.Data, raw)
	}
	return nil
}

// appendText appends the string value of t, as encoding/json decodes it.
func appendText(b, data []byte, t rawText) []byte {
	raw := data[t.start:t.end]
	if t.flags == 0 || (t.flags == strNonASCII && utf8.Valid(raw)) {
		return append(b, raw...)
	}
	return appendUnquoted(b, raw)
}

// decodeTime decodes a time field; an absent, null or empty one is the zero
// time, and one sent as the zero time is refused, as in the encoding/json
// path.
func decodeTime(data []byte, field int, t rawText) (time.Time, error) {
	if !t.set || t.start == t.end {
		return time.Time{}, nil
	}
	raw := data[t.start:t.end]
	var scratch [64]byte
	if t.flags != 0 {
		raw = appendUnquoted(scratch[:0], raw)
	}
	if tm, ok := parseRFC3339(raw); ok {
		return sentTime(fieldNames[field], tm)
	}
	// Forms time.Parse also accepts (a one-digit hour, a comma before the
	// fraction) and errors, offsets past 23:59 among them: the
	// encoding/json path's own function.
	s := string(raw)
	return parseTime(fieldNames[field], &s)
}

// scan finds the envelope's values in data and checks that data is one JSON
// object, nothing but whitespace around it, whose values have the types
// encoding/json needs for the fields. It reports false for anything else.
func (s *scanned) scan(d []byte) bool {
	i := skipSpace(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return skipSpace(d, i+1) == len(d)
	}
	for {
		// Key.
		if i >= len(d) || d[i] != '"' {
			return false
		}
		ks := i + 1
		var kflags uint8
		if i, kflags = scanString(d, ks); i < 0 {
			return false
		}
		field, exact, ok := lookupField(d[ks:i-1], kflags)
		if !ok {
			return false
		}
		s.inexact = s.inexact || !exact
		if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
			return false
		}
		if i = skipSpace(d, i+1); i >= len(d) {
			return false
		}

		// Value.
		switch field {
		case fieldID, fieldType, fieldKey, fieldOccurredAt, fieldSentAt, fieldReceivedAt:
			switch d[i] {
			case '"':
				vs := i + 1
				var vflags uint8
				if i, vflags = scanString(d, vs); i < 0 {
					return false
				}
				s.text[field] = rawText{start: vs, end: i - 1, flags: vflags, set: true}
			case 'n':
				if !hasLiteral(d, i, "null") {
					return false
				}
				i += len("null")
				// null leaves a string as it was and sets a *string
				// (the times) to nil.
				if field >= fieldOccurredAt {
					s.text[field] = rawText{}
				}
			default:
				return false // wrong type: encoding/json's error
			}
		case fieldData:
			start := i
			if i = skipValue(d, i); i < 0 {
				return false
			}
			s.dataStart, s.dataEnd = start, i
		default:
			if i = skipValue(d, i); i < 0 {
				return false
			}
		}

		i = skipSpace(d, i)
		if i >= len(d) {
			return false
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case '}':
			return skipSpace(d, i+1) == len(d)
		default:
			return false
		}
	}
}

// lookupField maps a key (the bytes between its quotes) to its field as
// encoding/json does: by the unescaped name, exactly first, then
// case-insensitively. ok=false for keys containing U+017F (ſ) or U+212A
// (K), the only non-ASCII runes that fold to ASCII letters: those are left
// to encoding/json's Unicode folding.
func lookupField(k []byte, flags uint8) (field int, exact, ok bool) {
	exact = flags&strEscape == 0
	if flags&strEscape != 0 {
		var scratch [64]byte
		k = appendUnquoted(scratch[:0], k)
		flags = 0
		for _, c := range k {
			if c >= utf8.RuneSelf {
				flags = strNonASCII
				break
			}
		}
	}
	switch string(k) {
	case "id":
		return fieldID, exact, true
	case "type":
		return fieldType, exact, true
	case "key":
		return fieldKey, exact, true
	case "occurredAt":
		return fieldOccurredAt, exact, true
	case "sentAt":
		return fieldSentAt, exact, true
	case "receivedAt":
		return fieldReceivedAt, exact, true
	case "data":
		return fieldData, exact, true
	}
	if flags&strNonASCII != 0 {
		if bytes.Contains(k, []byte("\u017f")) || bytes.Contains(k, []byte("\u212a")) {
			return 0, false, false
		}
		return fieldUnknown, false, true
	}
	for f, name := range fieldNames {
		if asciiEqualFold(k, name) {
			return f, false, true
		}
	}
	return fieldUnknown, false, true
}

func asciiEqualFold(k []byte, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range k {
		a, b := k[i], name[i]
		if 'a' <= a && a <= 'z' {
			a -= 'a' - 'A'
		}
		if 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

func hasLiteral(d []byte, i int, lit string) bool {
	return len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit
}

// plainStringByte is true for bytes a JSON string holds as themselves and
// that need no second look: printable ASCII but the quote and backslash.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString checks the JSON string whose contents start at d[i] (just past
// the opening quote). It returns the index just past the closing quote and
// the string's flags, or -1 if the string is not valid JSON. Bytes >= 0x80
// are accepted whatever they are, as encoding/json's scanner does.
func scanString(d []byte, i int) (int, uint8) {
	var flags uint8
	for i < len(d) {
		// Skip plain bytes, eight at a time where there are eight.
		if i+8 <= len(d) {
			m := specialBytes(binary.LittleEndian.Uint64(d[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		} else if plainStringByte[d[i]] {
			i++
			continue
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, flags
		case c == '\\':
			flags |= strEscape
			if i+1 >= len(d) {
				return -1, 0
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(d) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					return -1, 0
				}
				i += 6
			default:
				return -1, 0
			}
		case c < 0x20:
			return -1, 0
		default:
			flags |= strNonASCII
			i++
		}
	}
	return -1, 0
}

// specialBytes has the high bit set in each byte of x that is not a plain
// string byte, exact up to and including the lowest such byte (which is all
// scanString needs): a quote, a backslash, below 0x20 or from 0x80.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (x - ones*0x20) | x) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber checks the JSON number at d[i] and returns the index just past
// it, or -1. What follows is the caller's to check.
func skipNumber(d []byte, i int) int {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return -1
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	return i
}

// skipValue checks the JSON value starting at d[i] (not whitespace) and
// returns the index just past it, or -1 if it is not a well-formed value or
// nests deeper than maxFastDepth.
func skipValue(d []byte, i int) int {
	var inObject [maxFastDepth / 64]uint64 // bit per open container: object (1) or array (0)
	depth := 0
	for {
		// A value starts at d[i].
		if i >= len(d) {
			return -1
		}
		switch c := d[i]; c {
		case '"':
			if i, _ = scanString(d, i+1); i < 0 {
				return -1
			}
		case '{', '[':
			if depth == maxFastDepth {
				return -1
			}
			if c == '{' {
				inObject[depth/64] |= 1 << (depth % 64)
			} else {
				inObject[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if i = skipSpace(d, i+1); i >= len(d) {
				return -1
			}
			if c == '{' && d[i] == '}' || c == '[' && d[i] == ']' {
				depth--
				i++
				break
			}
			if c == '{' {
				if i = skipKey(d, i); i < 0 {
					return -1
				}
			}
			continue // the first element or member value
		case 't':
			if !hasLiteral(d, i, "true") {
				return -1
			}
			i += len("true")
		case 'f':
			if !hasLiteral(d, i, "false") {
				return -1
			}
			i += len("false")
		case 'n':
			if !hasLiteral(d, i, "null") {
				return -1
			}
			i += len("null")
		default:
			if i = skipNumber(d, i); i < 0 {
				return -1
			}
		}

		// After a value: close containers until one has a next element.
	next:
		for {
			if depth == 0 {
				return i
			}
			if i = skipSpace(d, i); i >= len(d) {
				return -1
			}
			obj := inObject[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch d[i] {
			case ',':
				if i = skipSpace(d, i+1); obj {
					if i = skipKey(d, i); i < 0 {
						return -1
					}
				}
				break next
			case '}':
				if !obj {
					return -1
				}
			case ']':
				if obj {
					return -1
				}
			default:
				return -1
			}
			depth--
			i++
		}
	}
}

// skipKey checks an object member's `"key" :` starting at d[i] and returns
// the index of the value (whitespace skipped), or -1.
func skipKey(d []byte, i int) int {
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i, _ = scanString(d, i+1); i < 0 {
		return -1
	}
	if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
		return -1
	}
	return skipSpace(d, i+1)
}

// appendUnquoted appends the value of the JSON string contents s (already
// checked by scanString) as encoding/json decodes it: escapes resolved, a
// \u surrogate pair combined, a lone surrogate and each byte of invalid
// UTF-8 replaced by U+FFFD.
func appendUnquoted(b, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						b = utf8.AppendRune(b, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // " \ /
				b = append(b, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr) // utf8.RuneError for invalid bytes
			r += size
		}
	}
	return b
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// parseRFC3339 parses what time.Parse(time.RFC3339Nano, s) parses on its own
// fast path, "2006-01-02T15:04:05[.fraction](Z|±hh:mm)", to the same Time:
// UTC for Z; for an offset, time.Local when Local has that offset at that
// instant, else an unnamed fixed zone. ok=false for anything else, which
// time.Parse may still accept.
func parseRFC3339(s []byte) (t time.Time, ok bool) {
	if len(s) < len("2006-01-02T15:04:05Z") ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := num2(s, 0)
	year2, ok2 := num2(s, 2)
	month, ok3 := num2(s, 5)
	day, ok4 := num2(s, 8)
	hour, ok5 := num2(s, 11)
	minute, ok6 := num2(s, 14)
	sec, ok7 := num2(s, 17)
	year = year*100 + year2
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	s = s[19:]

	// The fraction: any number of digits, those past nanoseconds ignored.
	nsec := 0
	if len(s) >= 2 && s[0] == '.' && isDigit(s[1]) {
		n := 1
		for ; n < len(s) && isDigit(s[n]); n++ {
			if n <= 9 {
				nsec = nsec*10 + int(s[n]-'0')
			}
		}
		for k := n; k <= 9; k++ {
			nsec *= 10
		}
		s = s[n:]
	}

	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	if len(s) == 1 && s[0] == 'Z' {
		return time.Unix(unix, int64(nsec)).UTC(), true
	}
	if len(s) != len("-07:00") || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return time.Time{}, false
	}
	hh, ok1 := num2(s, 1)
	mm, ok2 := num2(s, 4)
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return time.Time{}, false
	}
	offset := (hh*60 + mm) * 60
	if s[0] == '-' {
		offset = -offset
	}
	t = time.Unix(unix-int64(offset), int64(nsec)).UTC()
	if local := t.In(time.Local); zoneOffset(local) == offset {
		return local, true
	}
	return t.In(time.FixedZone("", offset)), true
}

func zoneOffset(t time.Time) int {
	_, offset := t.Zone()
	return offset
}

// num2 reads the two decimal digits at s[i:i+2].
func num2(s []byte, i int) (int, bool) {
	a, b := s[i]-'0', s[i+1]-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}

// daysSinceEpoch is the number of days from 1970-01-01 to the date
// (negative before), in the proleptic Gregorian calendar; year >= 0.
func daysSinceEpoch(year, month, day int) int64 {
	// Howard Hinnant's days_from_civil, with years starting in March.
	if month <= 2 {
		year--
	}
	era := (year+400)/400 - 1 // floor(year/400) for year >= -1
	yoe := year - era*400
	mp := (month + 9) % 12
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
