package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Limits on envelope fields. MaxKeyLength is Kinesis' partition key limit:
// the key becomes the record's partition key.
const (
	MaxIDLength   = 256
	MaxTypeLength = 256
	MaxKeyLength  = 256
)

// KeyLength is the length of key in characters, as Kinesis counts a
// partition key, and whether it is at most MaxKeyLength; a key of at most
// MaxKeyLength bytes is not counted (its characters are fewer still). For
// the keys a consumer selects from data, which become partition keys of
// its outputs.
func KeyLength(key string) (chars int, ok bool) {
	if len(key) <= MaxKeyLength {
		return len(key), true
	}
	n := utf8.RuneCountInString(key)
	return n, n <= MaxKeyLength
}

// Envelope is one event as producers send it and every stage passes it on.
// Times are RFC 3339 with an optional fraction ("t" and "z" in either
// case; a leap second, second 60, is refused); ReceivedAt is stamped by
// ingest from the server's clock (producers' values are overwritten).
type Envelope struct {
	// ID is the producer's idempotency key.
	ID string `json:"id"`
	// Type names the kind of event, for example "page_view".
	Type string `json:"type"`
	// Key is the entity the event is about; it is the Kinesis partition key,
	// so all events of one key are in one shard, in order.
	Key string `json:"key"`
	// OccurredAt is when the event happened, by the producer's clock.
	OccurredAt time.Time `json:"occurredAt"`
	// SentAt is when the producer sent it, by the same producer clock.
	SentAt time.Time `json:"sentAt"`
	// ReceivedAt is when ingest accepted it, by the server's clock.
	ReceivedAt time.Time `json:"receivedAt,omitzero"`
	// Data is the event's payload, any JSON value.
	Data json.RawMessage `json:"data,omitempty"`
}

// FieldError says which field of an envelope is wrong and why.
type FieldError struct {
	Field  string // JSON name, for example "occurredAt"; "" means the whole document
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// EventTime is the time the event happened on the server's clock:
// OccurredAt + (ReceivedAt − SentAt). The producer's clock offset cancels out
// because OccurredAt and SentAt come from the same clock. Without ReceivedAt
// or SentAt there is nothing to correct with and EventTime is OccurredAt.
func (e *Envelope) EventTime() time.Time {
	if e.ReceivedAt.IsZero() || e.SentAt.IsZero() {
		return e.OccurredAt
	}
	return e.OccurredAt.Add(e.ReceivedAt.Sub(e.SentAt))
}

// Validate checks what a producer must send. It does not require ReceivedAt,
// which ingest stamps after validating. Every time it holds must fall in
// [EarliestTime, LatestTime). The error is a *FieldError.
func (e *Envelope) Validate() error {
	if err := checkString("id", e.ID, MaxIDLength); err != nil {
		return err
	}
	if err := checkString("type", e.Type, MaxTypeLength); err != nil {
		return err
	}
	if err := CheckKey(e.Key); err != nil {
		return err
	}
	if e.OccurredAt.IsZero() {
		return &FieldError{Field: "occurredAt", Reason: "is required"}
	}
	if e.SentAt.IsZero() {
		return &FieldError{Field: "sentAt", Reason: "is required"}
	}
	for _, f := range [...]struct {
		name string
		t    time.Time
	}{{"occurredAt", e.OccurredAt}, {"sentAt", e.SentAt}, {"receivedAt", e.ReceivedAt}} {
		if err := checkTimeRange(f.name, f.t); err != nil {
			return err
		}
	}
	if e.SentAt.Before(e.OccurredAt) {
		return &FieldError{Field: "sentAt", Reason: fmt.Sprintf("%s is before occurredAt %s; both are read from the producer's clock, so an event cannot be sent before it occurred",
			e.SentAt.Format(time.RFC3339Nano), e.OccurredAt.Format(time.RFC3339Nano))}
	}
	return nil
}

// The range every envelope time must fall in, [EarliestTime, LatestTime):
// a clock reset to the Unix epoch is still corrected (EventTime), while the
// difference of any two times stays far inside what a time.Duration holds
// (about 292 years), so EventTime never saturates, and every window an
// event time can fall in has an end that formats as a four-digit year.
var (
	EarliestTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestTime   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkTimeRange refuses a time outside [EarliestTime, LatestTime); a zero
// time is not checked (a missing field has its own error, and ReceivedAt is
// optional; a zero time sent is refused as it is decoded, sentTime).
func checkTimeRange(field string, t time.Time) error {
	if t.IsZero() || (!t.Before(EarliestTime) && t.Before(LatestTime)) {
		return nil
	}
	return outsideRange(field, t)
}

// outsideRange is the refusal of t, a time of field outside
// [EarliestTime, LatestTime).
func outsideRange(field string, t time.Time) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf("%s is outside %s to %s, the times an envelope may hold: a clock that far off cannot be corrected",
		t.Format(time.RFC3339Nano), EarliestTime.Format(time.RFC3339), LatestTime.Format(time.RFC3339))}
}

// sentTime is t, a time decoded from field's value: the zero time
// (0001-01-01T00:00:00Z), which an Envelope holds for a time left out, is
// refused there as outside the range, so that Validate does not call a
// time that was sent missing.
func sentTime(field string, t time.Time) (time.Time, error) {
	if t.IsZero() {
		return time.Time{}, outsideRange(field, t)
	}
	return t, nil
}

// CheckKey is Validate's check of an envelope's key, which ingest and
// every consumer apply: a key it refuses is one no event can have, so a
// tool taking a key from its user (cmd/results -key) can say there is
// nothing to look for, and why, rather than look. The error is a
// *FieldError for field "key".
func CheckKey(key string) error { return checkString("key", key, MaxKeyLength) }

// CheckIdentifierPrintable is Validate's refusal of a character an
// identifier may not hold (FirstUnprintable) in one identifier v (field
// names it in the *FieldError), also for an id carried elsewhere than an
// envelope's id, type or key (a worker's task id) that is used as one.
func CheckIdentifierPrintable(field, v string) error {
	if u, found := FirstUnprintable(v); found {
		return &FieldError{Field: field, Reason: "holds " + u.String() + "; identifiers are printable text"}
	}
	return nil
}

// Unprintable is a character an identifier may not hold and where it is,
// as a refusal names it.
type Unprintable struct {
	Rune rune
	At   int    // byte offset in the identifier
	Kind string // what it is: "control character", "line separator", "paragraph separator", "invisible character" or "bidirectional control"
}

// String is the phrase a refusal holds: "control character U+0007 at byte 3".
func (u Unprintable) String() string {
	return fmt.Sprintf("%s U+%04X at byte %d", u.Kind, u.Rune, u.At)
}

// FirstUnprintable is the first character in s that Validate refuses in
// an identifier: for a rule or config naming an event type or key, which
// no event ingest takes can hold. Refused are what would make two
// identifiers look the same, or make one look like other text, in a log,
// console or listing:
//   - control characters (Unicode category Cc: C0, DEL, C1), which break
//     logs, consoles and the views' key layout;
//   - the line and paragraph separators (Zl, Zp: U+2028, U+2029), which end
//     the line in log viewers and in JavaScript;
//   - the format characters (Cf) that show as nothing and that no script
//     needs in a name: the soft hyphen U+00AD, zero-width space U+200B,
//     word joiner and invisible operators U+2060–U+2064, the deprecated
//     U+206A–U+206F, the byte order mark U+FEFF (a name copied from a
//     file a Windows tool wrote can start with one) and the interlinear
//     annotation marks U+FFF9–U+FFFB;
//   - the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
//     U+2066–U+2069), which reorder the text shown around them ("Trojan
//     Source").
//
// The rest of Cf is not refused, as much of it is part of how text is
// written: the zero-width non-joiner and joiner (U+200C, U+200D) spell
// Persian and Indic words and emoji sequences; the tag characters
// U+E0020–U+E007F spell subdivision flags (England's); the Arabic number
// signs (U+0600–U+0605) show, with the digits they stand before; the
// Mongolian vowel separator and the Egyptian hieroglyph and shorthand
// format controls lay out their scripts. The list is fixed here rather than
// read from the unicode package's tables, so a Go release with a newer
// Unicode cannot start refusing identifiers that were taken before.
func FirstUnprintable(s string) (Unprintable, bool) {
	for i, r := range s {
		if r < utf8.RuneSelf {
			// ASCII, most of what ids and keys hold: decided here, as
			// a call per character would cost more than the check.
			if r < 0x20 || r == 0x7F {
				return Unprintable{Rune: r, At: i, Kind: "control character"}, true
			}
			continue
		}
		if kind := unprintableKind(r); kind != "" {
			return Unprintable{Rune: r, At: i, Kind: kind}, true
		}
	}
	return Unprintable{}, false
}

// unprintableKind is what r, not ASCII, is if FirstUnprintable refuses
// it, else "". It runs for every such character of every record's id, type
// and key, so the common cases (the letters of most scripts, CJK, emoji)
// take a comparison or two.
func unprintableKind(r rune) string {
	switch {
	case r > 0x206F && r < 0xFEFF, r > 0xFFFB:
		// CJK, emoji and the letters of most scripts: nothing refused.
	case r < 0x0100:
		switch {
		case unicode.IsControl(r):
			return "control character"
		case r == 0x00AD:
			return "invisible character"
		}
	case r < 0x2000:
		if r == 0x061C {
			return "bidirectional control"
		}
	case r == 0x2028:
		return "line separator"
	case r == 0x2029:
		return "paragraph separator"
	case r == 0x200E, r == 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return "bidirectional control"
	case r == 0x200B, r >= 0x2060 && r <= 0x2064, r >= 0x206A && r <= 0x206F, r == 0xFEFF, r >= 0xFFF9 && r <= 0xFFFB:
		return "invisible character"
	}
	return ""
}

func checkString(field, v string, max int) error {
	switch {
	case v == "":
		return &FieldError{Field: field, Reason: "is required"}
	case strings.TrimFunc(v, unicode.IsSpace) == "":
		// There in name only: no log search, listing or config tells it
		// apart. White space inside one, at its ends included, is the
		// producer's to choose: ids and keys are compared byte for byte.
		return &FieldError{Field: field, Reason: fmt.Sprintf("is blank (only white space): the event's %s is required, and must hold a character other than white space", field)}
	case !utf8.ValidString(v):
		return &FieldError{Field: field, Reason: "is not valid UTF-8"}
	case utf8.RuneCountInString(v) > max:
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %d characters long; at most %d are allowed", utf8.RuneCountInString(v), max)}
	}
	// Control characters, line separators and characters that show as
	// nothing or reorder the text (FirstUnprintable) break logs, consoles
	// and the views' key layout, or make two ids or keys look the same;
	// ingest and every consumer refuse them here, so a record written
	// straight to the stream past ingest is refused too.
	return CheckIdentifierPrintable(field, v)
}

// wire is the JSON shape with times as text, so a bad time names its field.
type wire struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Key        string          `json:"key"`
	OccurredAt *string         `json:"occurredAt"`
	SentAt     *string         `json:"sentAt"`
	ReceivedAt *string         `json:"receivedAt"`
	Data       json.RawMessage `json:"data"`
}

// Unmarshal decodes one JSON envelope into e, replacing its contents. Errors
// are *FieldError naming the field (the JSON is well-formed but a field has
// the wrong type, a time is not RFC 3339 or is sent as the zero time, which
// stands for a time left out) or the document (not JSON, not an object).
// Unmarshal does not Validate.
func Unmarshal(data []byte, e *Envelope) error {
	// The fast path (fastdecode.go) decodes well-formed envelopes exactly as
	// below; it leaves anything else to encoding/json.
	if done, err := decodeFast(data, e); done {
		return err
	}
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return jsonFieldError(err)
	}
	if got := strictjson.TypeOf(data); got != "an object" {
		// null, which encoding/json decodes as no field at all: no
		// envelope, not one missing its id.
		return &FieldError{Reason: notAnObject(got)}
	}
	*e = Envelope{ID: w.ID, Type: w.Type, Key: w.Key}
	var err error
	if e.OccurredAt, err = parseTime("occurredAt", w.OccurredAt); err != nil {
		return err
	}
	if e.SentAt, err = parseTime("sentAt", w.SentAt); err != nil {
		return err
	}
	if e.ReceivedAt, err = parseTime("receivedAt", w.ReceivedAt); err != nil {
		return err
	}
	if len(w.Data) > 0 && !bytes.Equal(w.Data, []byte("null")) {
		e.Data = w.Data
	}
	return nil
}

// UnmarshalJSON makes Envelope usable with encoding/json; see Unmarshal.
func (e *Envelope) UnmarshalJSON(data []byte) error { return Unmarshal(data, e) }

// parseTime is ParseTime for an envelope's optional time: nil or ""
// (left out) is the zero time, and a time sent that is the zero time is
// refused (sentTime).
func parseTime(field string, s *string) (time.Time, error) {
	if s == nil || *s == "" {
		return time.Time{}, nil
	}
	t, err := ParseTime(field, *s)
	if err != nil {
		return t, err
	}
	return sentTime(field, t)
}

// ParseTime parses an RFC 3339 time as ingest reads an envelope's times,
// for every other reader of a time from outside (a command's startsAt) to
// take the same ones. RFC 3339 (section 5.6) allows "t" and "z" in lower
// case, which time.Parse does not: they are read as "T" and "Z". It also
// allows second 60, a leap second, which a time.Time cannot hold: that is
// refused saying so, and what to send instead. Its error is a *FieldError
// naming field.
func ParseTime(field, s string) (time.Time, error) {
	v := upperTZ(s)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		if before, ok := beforeLeapSecond(v); ok {
			return time.Time{}, &FieldError{Field: field, Reason: fmt.Sprintf(
				"%s is a leap second (second 60), which is not accepted (a Go time cannot hold one): send %q, the last millisecond before it, or the next second", strictjson.QuoteCut(s, maxTimeShown), before)}
		}
		return time.Time{}, &FieldError{Field: field, Reason: fmt.Sprintf("%s is not an RFC 3339 time such as 2026-11-29T10:41:07.250Z", strictjson.QuoteCut(s, maxTimeShown))}
	}
	if zone, ok := offsetOutOfRange(v); ok {
		return time.Time{}, &FieldError{Field: field, Reason: fmt.Sprintf(
			"%s has the offset %s: RFC 3339 allows hours 00 to 23 and minutes 00 to 59 in an offset (a Go time cannot be written back with one of 24 hours)", strictjson.QuoteCut(s, maxTimeShown), zone)}
	}
	return t, nil
}

// offsetOutOfRange reports whether s, a time time.Parse read as RFC 3339,
// ends in an offset ±hh:mm whose hour is past 23 or minute past 59, which
// time.Parse takes (+23:60 as 24 hours) and RFC 3339 does not; such a time
// also fails to encode again (time.Time's MarshalJSON refuses an offset of
// 24 hours), so ingest, which writes the envelope back, must refuse it.
func offsetOutOfRange(s string) (zone string, ok bool) {
	if len(s) < len("+00:00") {
		return "", false
	}
	zone = s[len(s)-len("+00:00"):]
	if (zone[0] != '+' && zone[0] != '-') || zone[3] != ':' {
		return "", false
	}
	return zone, zone[1:3] > "23" || zone[4:6] > "59"
}

// maxTimeShown bounds what a reason repeats of a time that is not one
// (ingest bounds the request, a command's data is up to 64 KiB).
const maxTimeShown = 64

// upperTZ is s with a lowercase date-time separator "t" (at byte 10 of an
// RFC 3339 time) and zone designator "z" (its last byte) in upper case.
func upperTZ(s string) string {
	sep := len(s) > 10 && s[10] == 't'
	zone := len(s) > 10 && s[len(s)-1] == 'z'
	if !sep && !zone {
		return s
	}
	b := []byte(s)
	if sep {
		b[10] = 'T'
	}
	if zone {
		b[len(b)-1] = 'Z'
	}
	return string(b)
}

// beforeLeapSecond reports whether s is an RFC 3339 time whose second is
// 60 and that is otherwise valid, and if so gives the last millisecond
// before it in the same form ("2016-12-31T23:59:59.999Z").
func beforeLeapSecond(s string) (string, bool) {
	if len(s) < len("2006-01-02T15:04:60Z") || s[16] != ':' || s[17:19] != "60" {
		return "", false
	}
	zone := s[19:]
	if len(zone) > 1 && zone[0] == '.' {
		i := 1
		for i < len(zone) && '0' <= zone[i] && zone[i] <= '9' {
			i++
		}
		zone = zone[i:]
	}
	before := s[:17] + "59.999" + zone
	if _, err := time.Parse(time.RFC3339Nano, before); err != nil {
		return "", false
	}
	return before, true
}

// notAnObject is the reason a record that is JSON but no object (null, an
// array: got as strictjson.TypeOf names it, or encoding/json's
// UnmarshalTypeError.Value) is unparseable.
func notAnObject(got string) string {
	word, _, _ := strings.Cut(got, " ")
	if a, ok := map[string]string{"array": "an array", "string": "a string", "number": "a number", "bool": "a boolean"}[word]; ok {
		got = a
	}
	return "must be a JSON object, not " + got
}

func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return &FieldError{Reason: notAnObject(te.Value)}
		}
		kind := jsonKind(te.Type.Kind().String())
		if te.Field == "occurredAt" || te.Field == "sentAt" || te.Field == "receivedAt" {
			kind += ", an RFC 3339 time such as 2026-11-29T10:41:07.250Z" // as a string that does not parse is told
		}
		return &FieldError{Field: te.Field, Reason: fmt.Sprintf("must be a %s, not %s", kind, te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FieldError{Reason: fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)}
	}
	return &FieldError{Reason: "not valid JSON: " + err.Error()}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "string"
	default:
		return goKind
	}
}
