package tail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Bounds of the filters a command line gives.
const (
	// MaxConditions bounds -where conditions (all must hold).
	MaxConditions = 16
	// MaxTypes bounds -type values (any may match).
	MaxTypes = 64
	// MaxPathSteps bounds a -where path's steps.
	MaxPathSteps = 32
	// MaxConditionBytes bounds one -where expression.
	MaxConditionBytes = 1024
	// MaxKeyBytes is a partition key's longest (256 Unicode characters,
	// at most 4 bytes each).
	MaxKeyBytes = 1024
)

// Condition is one -where expression: the JSON value at Path equals (or,
// with Not, differs from) Value.
type Condition struct {
	// Expr is the expression as given; Path its parsed path.
	Expr  string
	Path  []Step
	Value string
	Not   bool
}

// Step is one step of a path: an object's field, or with Index >= 0 an
// array's element.
type Step struct {
	Field string
	Index int
}

// ParseCondition reads a -where expression: a JSON path, "=" or "!=", a
// value. The path is dotted field names, each optionally followed by
// array indexes, with an optional "$." in front: data.page,
// $.data.items[0].sku. The value is compared with the field's JSON value:
// a string as it is, a number as a number (1 equals 1.0), true, false or
// null as written.
func ParseCondition(expr string) (Condition, error) {
	if len(expr) > MaxConditionBytes {
		return Condition{}, fmt.Errorf("%q: an expression has at most %d bytes", strictjson.Cut(expr, 40), MaxConditionBytes)
	}
	if !utf8.ValidString(expr) {
		// Records are JSON, which is UTF-8: a path or value typed in
		// another encoding (Latin-1) would silently match nothing.
		return Condition{}, fmt.Errorf("%s: not valid UTF-8, so no JSON field or value can match it", strictjson.QuoteCut(expr, 64))
	}
	i := strings.IndexByte(expr, '=')
	if i < 0 {
		return Condition{}, fmt.Errorf("%q: want path=value (data.page=/home) or path!=value", strictjson.Cut(expr, 64))
	}
	c := Condition{Expr: expr, Value: expr[i+1:]}
	path := expr[:i]
	if strings.HasSuffix(path, "!") {
		c.Not, path = true, path[:len(path)-1]
	}
	steps, err := parsePath(strings.TrimSpace(path))
	if err != nil {
		return Condition{}, fmt.Errorf("%q: %w", strictjson.Cut(expr, 64), err)
	}
	c.Path = steps
	return c, nil
}

// parsePath reads a dotted path with array indexes.
func parsePath(p string) ([]Step, error) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
	if p == "" {
		return nil, fmt.Errorf("the path is empty: name a field (data.page)")
	}
	var steps []Step
	for _, part := range strings.Split(p, ".") {
		name := part
		var idx []int
		if b := strings.IndexByte(part, '['); b >= 0 {
			name = part[:b]
			rest := part[b:]
			for rest != "" {
				e := strings.IndexByte(rest, ']')
				if rest[0] != '[' || e < 0 {
					return nil, fmt.Errorf("%q: an index is written [n] after a field (items[0])", part)
				}
				n, err := strconv.Atoi(rest[1:e])
				if err != nil || n < 0 || n > 1<<20 {
					return nil, fmt.Errorf("%q: an index is a whole number from 0 to %d", part, 1<<20)
				}
				idx = append(idx, n)
				rest = rest[e+1:]
			}
		}
		if name == "" && len(idx) == 0 {
			return nil, fmt.Errorf("an empty step (two dots, or a dot at an end)")
		}
		if strings.ContainsAny(name, "[]") {
			return nil, fmt.Errorf("%q: an index is written [n] after a field (items[0])", part)
		}
		if name != "" {
			steps = append(steps, Step{Field: name, Index: -1})
		}
		for _, n := range idx {
			steps = append(steps, Step{Index: n})
		}
		if len(steps) > MaxPathSteps {
			return nil, fmt.Errorf("a path has at most %d steps", MaxPathSteps)
		}
	}
	return steps, nil
}

// PathString writes a parsed path back (data.items[0].sku).
func PathString(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		if s.Index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.Index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.Field)
	}
	return b.String()
}

// holds reports whether the condition holds of doc (a decoded JSON value).
// A missing field differs from every value.
func (c Condition) holds(doc any) bool {
	v, ok := lookup(doc, c.Path)
	if !ok {
		return c.Not
	}
	return equal(v, c.Value) != c.Not
}

func lookup(doc any, path []Step) (any, bool) {
	v := doc
	for _, s := range path {
		if s.Index >= 0 {
			a, ok := v.([]any)
			if !ok || s.Index >= len(a) {
				return nil, false
			}
			v = a[s.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.Field]; !ok {
			return nil, false
		}
	}
	return v, true
}

func equal(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case json.Number:
		if x.String() == want {
			return true
		}
		a, errA := strconv.ParseFloat(x.String(), 64)
		b, errB := strconv.ParseFloat(strings.TrimSpace(want), 64)
		return errA == nil && errB == nil && a == b
	case bool:
		return strconv.FormatBool(x) == want
	case nil:
		return want == "null"
	default: // an object or array: its compact JSON text
		b, err := json.Marshal(x)
		return err == nil && string(b) == want
	}
}

// Filter chooses the records to print. The zero Filter chooses all.
type Filter struct {
	// Key is the partition key a record must have ("" for any).
	Key string
	// Types are the values of the top-level "type" field a record may
	// have (none: any). Envelopes, window results, matches and joins
	// all carry one.
	Types []string
	// Where are conditions that must all hold of the record's JSON.
	Where []Condition
}

// Match reports whether r passes the filter. A record that is not JSON
// passes only a filter with no Types and no Where.
func (f *Filter) Match(r *Record) bool {
	if f.Key != "" && r.PartitionKey != f.Key {
		return false
	}
	if len(f.Types) == 0 && len(f.Where) == 0 {
		return true
	}
	doc, ok := r.decoded()
	if !ok {
		return false
	}
	if len(f.Types) > 0 {
		m, _ := doc.(map[string]any)
		t, _ := m["type"].(string)
		found := false
		for _, want := range f.Types {
			if t == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, c := range f.Where {
		if !c.holds(doc) {
			return false
		}
	}
	return true
}

// decodeJSON decodes b keeping numbers as written; ok is false when b is
// not one JSON value the consumers read: the one strict reader refuses a
// key twice (encoding/json would take the last), a key in another case, text
// that is not UTF-8, so a filter never matches a record the consumers set
// aside as something it is not.
func decodeJSON(b []byte) (any, bool) {
	if strictjson.Check(b, strictjson.Options{MaxBytes: MaxRecordBytes, Name: "record"}) != nil {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}
