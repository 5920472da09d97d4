package strictjson

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Decode checks doc as Check does, then decodes it into v (a non-nil
// pointer) with encoding/json, refusing first, by path, every object key
// that is not a field of the Go type it lands in (json tags spelt exactly:
// encoding/json would also take "Name" for "name") and every value whose
// JSON type the field cannot hold (a string for a number, 1.5 or 1e40 for an
// int). A json.RawMessage, an interface or a type with its own UnmarshalJSON
// or UnmarshalText takes any (valid) value. A document that is null where v
// is a struct or a map is refused as any other type is ("must be a JSON
// object, not null"): encoding/json would leave v as it was, and every field
// would read as not sent. Its error is an *Error.
func Decode(doc []byte, v any, o Options) error {
	if err := check(doc, o); err != nil {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, not %T", v)
	}
	w := walker{b: doc, allowUnknown: o.AllowUnknown}
	w.ws()
	if err := w.nullDocument(rv.Type().Elem()); err != nil {
		return err
	}
	if err := w.value(rv.Type().Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal(doc, v); err != nil {
		// The walk saw the types encoding/json needs; what is left is a
		// custom UnmarshalJSON's own refusal.
		e := &Error{Kind: Type, Index: -1, Offset: -1, Reason: err.Error()}
		if reason, ok := TypeReason(err); ok {
			var te *json.UnmarshalTypeError
			errors.As(err, &te)
			e.Path, e.Reason = te.Field, reason
		}
		return e
	}
	return nil
}

// TypeReason says what an encoding/json *json.UnmarshalTypeError in err
// means for the sender, in Decode's words ("must be a JSON array, not a
// string"), where encoding/json names the Go type the value was decoded
// into ("cannot unmarshal string into Go value of type
// []events.KinesisEventRecord"); ok is false when err holds none. The
// error's Field (encoding/json's path, without array indexes) is not in
// it: the caller names the place.
func TypeReason(err error) (reason string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return "", false
	}
	return fmt.Sprintf("must be %s, not %s", jsonTypeOf(te.Type), sentType(te.Value)), true
}

// sentType names the JSON type encoding/json's UnmarshalTypeError.Value
// gives ("string", "number 1.5", "bool") as TypeOf does.
func sentType(v string) string {
	word, _, _ := strings.Cut(v, " ")
	switch word {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return v
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walker reads a document Check has accepted (so it need not validate),
// alongside the Go type it is decoded into.
type walker struct {
	b            []byte
	i            int
	path         []pathStep
	allowUnknown bool // Options.AllowUnknown
}

// anyType takes any value: an unknown key's, skipped (Options.AllowUnknown).
var anyType = reflect.TypeFor[any]()

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *walker) fail(kind Kind, reason string) *Error {
	return &Error{Kind: kind, Index: -1, Path: formatPath(w.path), Reason: reason, Offset: -1}
}

// nullDocument refuses a document that is null when t, read from an object,
// is a struct or a map (a null inside a document still leaves its field as
// it is: a field sent as null reads as not sent, which its checks name).
func (w *walker) nullDocument(t reflect.Type) *Error {
	if w.b[w.i] != 'n' {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	if t.Kind() == reflect.Struct || t.Kind() == reflect.Map {
		return w.wrongType(t)
	}
	return nil
}

// value walks the value at w.i as t receives it.
func (w *walker) value(t reflect.Type) *Error {
	c := w.b[w.i]
	if c == 'n' { // null leaves any Go value as it is
		w.i += len("null")
		return nil
	}
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) || t.Implements(textUnmarshalerType) {
			return w.skip()
		}
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return w.skip()
	}
	switch t.Kind() {
	case reflect.Interface:
		return w.skip()
	case reflect.Struct:
		if c != '{' {
			return w.wrongType(t)
		}
		return w.object(func(key []byte) (reflect.Type, *Error) {
			fs := fieldsOf(t)
			if ft, ok := fs.byName[string(key)]; ok {
				return ft, nil
			}
			if w.allowUnknown && !slices.ContainsFunc(fs.names, func(n string) bool { return strings.EqualFold(n, string(key)) }) {
				return anyType, nil
			}
			reason := "unknown field"
			if near := Nearest(string(key), fs.names); near != "" {
				reason += fmt.Sprintf("; did you mean %q?", near)
			}
			return nil, w.fail(Unknown, reason+" (known: "+strings.Join(fs.names, ", ")+")")
		})
	case reflect.Map:
		if c != '{' {
			return w.wrongType(t)
		}
		return w.object(func([]byte) (reflect.Type, *Error) { return t.Elem(), nil })
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			if c != '"' { // []byte is base64 text
				return w.wrongType(t)
			}
			return w.skip()
		}
		if c != '[' {
			return w.wrongType(t)
		}
		return w.array(t.Elem())
	case reflect.String:
		if c != '"' {
			return w.wrongType(t)
		}
		return w.skip()
	case reflect.Bool:
		if c != 't' && c != 'f' {
			return w.wrongType(t)
		}
		return w.skip()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		if c != '-' && (c < '0' || c > '9') {
			return w.wrongType(t)
		}
		start := w.i
		if err := w.skip(); err != nil {
			return err
		}
		return w.number(t, string(w.b[start:w.i]))
	}
	return w.fail(Type, fmt.Sprintf("a Go %s cannot be read from JSON", t))
}

// number checks that lit fits t.
func (w *walker) number(t reflect.Type, lit string) *Error {
	var err error
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(lit, t.Bits())
		if err != nil {
			return w.fail(Type, fmt.Sprintf("%s is out of range of a number", Cut(lit, 40)))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(lit, 10, t.Bits())
		if err != nil {
			return w.fail(Type, fmt.Sprintf("must be a whole number from 0 to %d, not %s", uint64(1)<<t.Bits()-1, Cut(lit, 40)))
		}
		return nil
	}
	if _, err = strconv.ParseInt(lit, 10, t.Bits()); err != nil || lit == negativeZero {
		lo := int64(-1) << (t.Bits() - 1)
		return w.fail(Type, fmt.Sprintf("must be a whole number from %d to %d, not %s", lo, -(lo+1), Cut(lit, 40)))
	}
	return nil
}

func (w *walker) wrongType(t reflect.Type) *Error {
	return w.fail(Type, fmt.Sprintf("must be %s, not %s", jsonTypeOf(t), jsonTypeAt(w.b[w.i])))
}

// object walks an object, each value as the type field gives for its key.
func (w *walker) object(field func(key []byte) (reflect.Type, *Error)) *Error {
	w.i++ // {
	w.ws()
	if w.b[w.i] == '}' {
		w.i++
		return nil
	}
	for {
		key := w.key()
		w.path = append(w.path, pathStep{key: key})
		t, err := field(key)
		if err != nil {
			return err
		}
		w.ws()
		w.i++ // :
		w.ws()
		if err := w.value(t); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
		w.ws()
		c := w.b[w.i]
		w.i++ // , or }
		if c == '}' {
			return nil
		}
		w.ws()
	}
}

func (w *walker) array(elem reflect.Type) *Error {
	w.i++ // [
	w.ws()
	if w.b[w.i] == ']' {
		w.i++
		return nil
	}
	for n := 0; ; n++ {
		w.path = append(w.path, pathStep{index: n, isIndex: true})
		if err := w.value(elem); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
		w.ws()
		c := w.b[w.i]
		w.i++ // , or ]
		if c == ']' {
			return nil
		}
		w.ws()
	}
}

// key reads an object key (decoded: Check has seen it is valid).
func (w *walker) key() []byte {
	start := w.i
	w.skipString()
	raw := w.b[start:w.i]
	if !strings.Contains(string(raw), `\`) {
		return raw[1 : len(raw)-1]
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return []byte(s)
}

func (w *walker) skipString() {
	w.i++ // "
	for w.b[w.i] != '"' {
		if w.b[w.i] == '\\' {
			w.i++
		}
		w.i++
	}
	w.i++
}

// skip passes over one value.
func (w *walker) skip() *Error {
	switch c := w.b[w.i]; {
	case c == '"':
		w.skipString()
	case c == '{' || c == '[':
		depth := 0
		for {
			switch w.b[w.i] {
			case '"':
				w.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.i++
			if depth == 0 {
				return nil
			}
		}
	default: // a literal or a number
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
			w.i++
		}
	}
	return nil
}

// TypeOf names the JSON type of doc's value by its first byte past white
// space ("an array", "a string", "null", ...; "nothing" when there is
// none), for an error that says what was sent in place of what.
func TypeOf(doc []byte) string {
	for _, c := range doc {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return jsonTypeAt(c)
	}
	return "nothing"
}

// jsonTypeAt names the JSON type of the value starting with c.
func jsonTypeAt(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// jsonTypeOf names the JSON type a Go type is read from.
func jsonTypeOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "a JSON boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a JSON number (a whole number)"
	case reflect.Float32, reflect.Float64:
		return "a JSON number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a JSON string (base64)"
		}
		return "a JSON array"
	case reflect.Array:
		return "a JSON array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "a JSON " + t.Kind().String()
}

// fields are a struct type's JSON fields: by name, and the names in
// declaration order (for messages).
type fields struct {
	byName map[string]reflect.Type
	names  []string
}

var fieldCache sync.Map // reflect.Type → *fields

// fieldsOf lists the fields encoding/json decodes into t: exported fields
// by their json tag's name (or Go name), "-" left out, the fields of
// untagged embedded structs promoted.
func fieldsOf(t reflect.Type) *fields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fields)
	}
	fs := &fields{byName: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if sf.Anonymous && name == "" {
				et := sf.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					add(et)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if _, dup := fs.byName[name]; !dup {
				fs.names = append(fs.names, name)
			}
			fs.byName[name] = sf.Type
		}
	}
	add(t)
	f, _ := fieldCache.LoadOrStore(t, fs)
	return f.(*fields)
}

// Nearest is the name in known within two edits of name (case ignored),
// the closest one, or "" if none is: the likely intent of a typo.
func Nearest(name string, known []string) string {
	if len(name) > 4*maxKeyShown {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes; the
// names compared are short ASCII field names).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// negativeZero is 0 in the one other spelling of a whole number that JSON
// and strconv.ParseInt both take: refused, so a whole number has one.
const negativeZero = "-0"

// WholeNumber reads raw, one JSON value that Check accepted, as a whole
// number from lo to hi, for a field whose bounds are its own rather than
// its Go type's. When it is not one, reason says so quoting that range and
// what was sent (cut, the cut marked): "must be a whole number from 1 to
// 26, not 2.5". JSON has no integer type, but a whole number is read in
// one spelling, digits with no fraction or exponent, as Decode reads one
// for an int field: 2.0 and 2e0 are refused, not taken as 2, and -0 is
// refused, not taken as 0.
func WholeNumber(raw []byte, lo, hi int64) (n int64, reason string) {
	lit := strings.TrimSpace(string(raw))
	n, err := strconv.ParseInt(lit, 10, 64)
	if err == nil && n >= lo && n <= hi && lit != negativeZero {
		return n, ""
	}
	got := Cut(lit, 40)
	if lit == "" {
		got = "nothing"
	} else if c := lit[0]; c != '-' && (c < '0' || c > '9') {
		got = jsonTypeAt(c)
	}
	return 0, fmt.Sprintf("must be a whole number from %d to %d, not %s", lo, hi, got)
}
