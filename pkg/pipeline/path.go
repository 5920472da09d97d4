package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tributary-dev/tributary/pkg/stream"
	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// source is the envelope field a Path starts at.
type source uint8

const (
	fromKey source = iota + 1
	fromType
	fromID
	fromData
)

// Path points into an envelope: "key", "type", "id", or "data" followed by
// object field names separated by dots ("data.order.total"). Field names
// with a dot in them, and array elements, cannot be addressed; ParsePath
// refuses a field written as an element ("items[0]", "tags[*]").
type Path struct {
	text   string
	src    source
	fields []string
}

// ParsePath parses a path.
func ParsePath(s string) (Path, error) {
	switch s {
	case "":
		return Path{}, errors.New("is empty")
	case "key":
		return Path{text: s, src: fromKey}, nil
	case "type":
		return Path{text: s, src: fromType}, nil
	case "id":
		return Path{text: s, src: fromID}, nil
	case "data":
		return Path{text: s, src: fromData}, nil
	}
	rest, ok := strings.CutPrefix(s, "data.")
	if !ok {
		return Path{}, fmt.Errorf("%q is not a path: want \"key\", \"type\", \"id\" or \"data.<field>\"", s)
	}
	fields := strings.Split(rest, ".")
	if len(fields) > maxPathFields {
		// The envelope is the outermost object and data the second: a
		// field n deep sits in an object 1+n deep, which strictjson
		// refuses past MaxDepth, so no record could hold it.
		return Path{}, fmt.Errorf("%q names %d nested fields; a record nests at most %d objects deep (the envelope, data and %d below it), so no record holds it", strictjson.Cut(s, 128), len(fields), strictjson.MaxDepth, maxPathFields-1)
	}
	for _, f := range fields {
		if f == "" {
			return Path{}, fmt.Errorf("%q has an empty field name", s)
		}
		if isElement(f) {
			return Path{}, fmt.Errorf("%q addresses an array element (%s): a path names object fields only, and array elements cannot be read", s, f)
		}
	}
	return Path{text: s, src: fromData, fields: fields}, nil
}

// maxPathFields is the most fields a data path can name that a record
// can hold (see ParsePath).
const maxPathFields = strictjson.MaxDepth - 1

// isElement reports whether a path's field is written as an array element,
// "items[0]" or "tags[*]": taken as a field's name, it would match no
// record's data.
func isElement(f string) bool {
	open := strings.LastIndexByte(f, '[')
	if open <= 0 || !strings.HasSuffix(f, "]") {
		return false
	}
	idx := f[open+1 : len(f)-1]
	return idx == "*" || (idx != "" && strings.Trim(idx, "0123456789") == "")
}

// String is the path as written.
func (p Path) String() string { return p.text }

// IsZero reports whether p is unset.
func (p Path) IsZero() bool { return p.src == 0 }

// IsPartitionKey reports whether p is the envelope's key, which ingest makes
// the Kinesis partition key.
func (p Path) IsPartitionKey() bool { return p.src == fromKey }

// fieldError is the error Extract returns for a record.
func fieldError(env *stream.Envelope, p Path, reason string) error {
	return &stream.PoisonRecordError{RecordID: env.ID, Field: p.text, Err: &stream.FieldError{Field: p.text, Reason: reason}}
}

// raw returns the JSON text of the value at a data path.
func (p Path) raw(env *stream.Envelope) ([]byte, error) {
	v, err := find(env.Data, p.fields)
	if err != nil {
		var ne *notObjectError
		if errors.As(err, &ne) {
			at := strings.Join(append([]string{"data"}, p.fields[:ne.depth]...), ".")
			return nil, fieldError(env, p, fmt.Sprintf("is missing: %s is %s, not an object", at, strictjson.TypeOf(ne.raw)))
		}
		if errors.Is(err, errMissing) {
			return nil, fieldError(env, p, "is missing")
		}
		return nil, fieldError(env, p, "cannot be read: "+err.Error())
	}
	return v, nil
}

// str reads p as a string: the value of key, type or id; a data string's
// contents; a data number as written.
func (p Path) str(env *stream.Envelope) (string, error) {
	switch p.src {
	case fromKey:
		return env.Key, nil
	case fromType:
		return env.Type, nil
	case fromID:
		return env.ID, nil
	}
	v, err := p.raw(env)
	if err != nil {
		return "", err
	}
	switch v[0] {
	case '"':
		if b, ok := plainString(v); ok {
			return string(b), nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fieldError(env, p, "is not a valid string")
		}
		return s, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(v), nil
	}
	return "", fieldError(env, p, "must be a string or a number, not "+strictjson.TypeOf(v))
}

// maxNumberShown bounds what a reason repeats of a number it refuses; the
// cut is marked "…", so that a number of 100,000 digits cut to its first
// 40 does not read as a finite one.
const maxNumberShown = 40

// number reads p as a finite number; -0 reads as 0.
func (p Path) number(env *stream.Envelope) (float64, error) {
	v, err := p.raw(env)
	if err != nil {
		return 0, err
	}
	switch v[0] {
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return 0, fieldError(env, p, "must be a number, not "+strictjson.TypeOf(v))
	}
	f, err := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fieldError(env, p, fmt.Sprintf("%s is not a finite 64-bit number", strictjson.Cut(string(v), maxNumberShown)))
	}
	if f > MaxValue || f < -MaxValue {
		return 0, fieldError(env, p, fmt.Sprintf("%s is outside ±%g, %s", strictjson.Cut(string(v), maxNumberShown), MaxValue, overflowReason))
	}
	if f == 0 {
		// -0 (written so, or a negative value too small for a float64) is
		// 0: a window's min, max or quantile would read "-0".
		return 0, nil
	}
	return f, nil
}

// MaxValue bounds the magnitude of an aggregated value: 2^53, the largest
// integer a float64 holds exactly. A window's sum of such values stays
// finite for far more records than a window can hold (2^970 of them), so no
// producer's value can make an aggregate infinite; a larger one is refused
// with its field named.
const MaxValue float64 = 1 << 53

// overflowReason ends the reason of a value refused for its magnitude
// (Overflows finds it).
const overflowReason = "the range a window aggregates without overflow"

// bytes reads p as the bytes that identify a distinct value: key, type or id;
// a data string's contents; a number or boolean as written. The result may
// share memory with env and must not be modified.
func (p Path) bytes(env *stream.Envelope) ([]byte, error) {
	switch p.src {
	case fromKey:
		return unsafe.Slice(unsafe.StringData(env.Key), len(env.Key)), nil
	case fromType:
		return unsafe.Slice(unsafe.StringData(env.Type), len(env.Type)), nil
	case fromID:
		return unsafe.Slice(unsafe.StringData(env.ID), len(env.ID)), nil
	}
	v, err := p.raw(env)
	if err != nil {
		return nil, err
	}
	switch v[0] {
	case '"':
		if b, ok := plainString(v); ok {
			return b, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fieldError(env, p, "is not a valid string")
		}
		return []byte(s), nil
	case '{', '[', 'n':
		return nil, fieldError(env, p, "must be a string, number or boolean, not "+strictjson.TypeOf(v))
	}
	return v, nil
}

// plainString returns the contents of a JSON string token without escapes.
func plainString(v []byte) ([]byte, bool) {
	body := v[1 : len(v)-1]
	for _, c := range body {
		if c == '\\' {
			return nil, false
		}
	}
	return body, true
}

var errMissing = errors.New("missing")

type notObjectError struct {
	depth int    // how many fields were found before it
	raw   []byte // the value that is not an object
}

func (e *notObjectError) Error() string { return "not an object" }

// find returns the JSON text of the value at fields inside the JSON document
// data, scanning without decoding. data is expected to be valid JSON (the
// envelope decoder checked it); malformed input gives an error, not a panic.
func find(data []byte, fields []string) ([]byte, error) {
	i := skipSpace(data, 0)
	if i >= len(data) {
		return nil, errMissing // no data at all
	}
	for depth, field := range fields {
		if data[i] != '{' {
			end, err := skipValue(data, i)
			if err != nil {
				return nil, err
			}
			return nil, &notObjectError{depth: depth, raw: data[i:end]}
		}
		var err error
		if i, err = member(data, i, field); err != nil {
			return nil, err
		}
	}
	end, err := skipValue(data, i)
	if err != nil {
		return nil, err
	}
	return data[i:end], nil
}

var errSyntax = errors.New("malformed JSON")

// member finds field in the object starting at data[i] ('{') and returns
// the index of its value.
func member(data []byte, i int, field string) (int, error) {
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return 0, errMissing
	}
	for i < len(data) {
		if data[i] != '"' {
			return 0, errSyntax
		}
		end, err := skipString(data, i)
		if err != nil {
			return 0, err
		}
		match := keyEquals(data[i:end], field)
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return 0, errSyntax
		}
		i = skipSpace(data, i+1)
		if match {
			if i >= len(data) {
				return 0, errSyntax
			}
			return i, nil
		}
		if i, err = skipValue(data, i); err != nil {
			return 0, err
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, errSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return 0, errMissing
		default:
			return 0, errSyntax
		}
	}
	return 0, errSyntax
}

// keyEquals compares a JSON string token with field.
func keyEquals(tok []byte, field string) bool {
	if b, ok := plainString(tok); ok {
		return string(b) == field
	}
	var s string
	return json.Unmarshal(tok, &s) == nil && s == field
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string token starting at data[i].
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, errSyntax
		}
		q := j + k
		// The quote ends the string unless an odd number of backslashes
		// escape it.
		n := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the index after the value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errSyntax
	}
	switch c := data[i]; c {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errSyntax
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if lit[0] == c && len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
				return i + len(lit), nil
			}
		}
		return 0, errSyntax
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				j++
				continue
			}
			break
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
}
