package stream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// UnmarshalExact is Unmarshal for envelopes from outside (ingest): it also
// refuses a key that is not one of the fields spelt exactly, as CheckNames
// does. A well-formed envelope with exact names is decoded in Unmarshal's
// one pass; CheckNames runs only when a name is not exact or the document
// is not one the fast path decodes.
func UnmarshalExact(data []byte, e *Envelope) error {
	var s scanned
	if s.scan(data) && !s.inexact {
		return s.decode(data, e)
	}
	if err := CheckNames(data); err != nil {
		return err
	}
	return Unmarshal(data, e)
}

// CheckStrict refuses an envelope that decodes (Unmarshal) but that the
// one strict reader refuses — a key twice in any object, data included;
// text that is not UTF-8; nesting deeper than strictjson.MaxDepth — or
// whose object names a field in another case or one it does not have
// (CheckNames). Ingest refuses these, but a producer may put records on
// the events stream or a queue itself, and what it wrote must mean one
// thing to every consumer: {"key":"a","key":"b"} would be key b here and
// may be key a to another reader, and a duplicated data field (a version,
// an amount) would be whichever copy a reader takes. Its error is a
// *FieldError naming the place ("data.version").
func CheckStrict(data []byte) error {
	if err := checkJSON(data); err != nil {
		return err
	}
	return CheckNames(data)
}

// checkJSON is CheckStrict without the names, for a decoder that checked
// them in its own pass (UnmarshalExact, decodeShared).
func checkJSON(data []byte) error {
	if err := strictjson.Check(data, strictjson.Options{MaxBytes: max(len(data), 1), Name: "record"}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return &FieldError{Field: se.Path, Reason: se.Reason}
		}
		return &FieldError{Reason: err.Error()}
	}
	return nil
}

// CheckNames refuses an envelope whose object holds a key that is not one
// of its fields spelt exactly (id, type, key, occurredAt, sentAt,
// receivedAt, data). Unmarshal matches names as encoding/json does, case
// folded, so {"id":"a","ID":"b"} would take b for the id, and it skips
// keys it does not know; an entry point that takes envelopes from outside
// (ingest) checks the names first, so that what a producer sent means one
// thing. data must already be well-formed JSON (strictjson.Split); the
// error is a *FieldError naming the key as a path step
// (strictjson.KeyPath: ID, or ["data.amount"] for a key that is no
// identifier).
func CheckNames(data []byte) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil // not an object: Unmarshal says so
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] == '"' {
		ks := i + 1
		var flags uint8
		if i, flags = scanString(data, ks); i < 0 {
			return nil // malformed: Unmarshal says so
		}
		key := data[ks : i-1]
		if flags&strEscape != 0 {
			key = appendUnquoted(nil, key)
		}
		if !isFieldName(key) {
			reason := fmt.Sprintf("unknown field (names are case-sensitive; known: %s)", strings.Join(fieldNames[:], ", "))
			if near := strictjson.Nearest(string(key), fieldNames[:]); near != "" {
				reason = fmt.Sprintf("unknown field; did you mean %q? (names are case-sensitive; known: %s)", near, strings.Join(fieldNames[:], ", "))
			}
			// Named as the strict reader names a key in a path: a key
			// that is no identifier ("data.amount", one holding ESC or
			// U+202E) quoted in brackets, cut to 64 bytes, so it names
			// no other place and reaches no log or terminal raw.
			return &FieldError{Field: strictjson.KeyPath("", string(key)), Reason: reason}
		}
		if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
			return nil
		}
		if i = skipValue(data, skipSpace(data, i+1)); i < 0 {
			return nil
		}
		if i = skipSpace(data, i); i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

func isFieldName(k []byte) bool {
	for _, name := range fieldNames {
		if string(k) == name {
			return true
		}
	}
	return false
}
