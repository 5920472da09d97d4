package eventsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Filter is a compiled FilterCriteria: a record passes when any of its
// patterns matches. Patterns use EventBridge's syntax as Lambda event
// filtering does: exact values (strings, numbers compared by their text,
// booleans, null), "" for empty, prefix, suffix, equals-ignore-case,
// anything-but (a value, a list, or a prefix/suffix), numeric comparisons and
// ranges, exists, nested objects and $or.
type Filter struct {
	patterns []*pattern
}

// NewFilter compiles FilterCriteria patterns (each one JSON). No patterns
// means every record passes.
func NewFilter(patterns []string) (*Filter, error) {
	f := &Filter{}
	for i, src := range patterns {
		var raw any
		dec := json.NewDecoder(strings.NewReader(src))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("FilterPatterns[%d]: not valid JSON: %w", i, err)
		}
		obj, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("FilterPatterns[%d]: a pattern must be a JSON object, got %s", i, src)
		}
		p, err := compilePattern(obj, "")
		if err != nil {
			return nil, fmt.Errorf("FilterPatterns[%d]: %w", i, err)
		}
		f.patterns = append(f.patterns, p)
	}
	return f, nil
}

// Empty reports whether the filter lets everything through.
func (f *Filter) Empty() bool { return f == nil || len(f.patterns) == 0 }

// Match reports whether a record, seen as a JSON object (numbers as
// json.Number), passes the filter.
func (f *Filter) Match(record map[string]any) bool {
	if f.Empty() {
		return true
	}
	for _, p := range f.patterns {
		if p.match(record) {
			return true
		}
	}
	return false
}

// decodeJSON decodes b keeping numbers as json.Number, so that 300 and 300.0
// stay different as they do for Lambda.
func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

// notJSON stands for a data field (Kinesis data, SQS body) whose content is
// not JSON where a pattern expects JSON: it never matches.
type notJSON struct{}

// pattern is an object pattern: every field must match, and one of the $or
// alternatives if there are any.
type pattern struct {
	fields map[string]*fieldPattern
	or     [][]*pattern // each $or lists alternatives; all $or groups must hold
}

type fieldPattern struct {
	sub   *pattern // nested object
	rules []rule   // leaf: any rule matches
}

func compilePattern(obj map[string]any, path string) (*pattern, error) {
	p := &pattern{fields: map[string]*fieldPattern{}}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		at := join(path, k)
		if k == "$or" {
			alts, ok := v.([]any)
			if !ok || len(alts) < 2 {
				return nil, fmt.Errorf("%s: $or needs a list of at least two patterns", at)
			}
			var group []*pattern
			for i, a := range alts {
				ao, ok := a.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s[%d]: each $or alternative must be an object", at, i)
				}
				sp, err := compilePattern(ao, path)
				if err != nil {
					return nil, err
				}
				group = append(group, sp)
			}
			p.or = append(p.or, group)
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			sp, err := compilePattern(v, at)
			if err != nil {
				return nil, err
			}
			p.fields[k] = &fieldPattern{sub: sp}
		case []any:
			if len(v) == 0 {
				return nil, fmt.Errorf("%s: an empty list matches nothing; give at least one value or rule", at)
			}
			fp := &fieldPattern{}
			for _, r := range v {
				rl, err := compileRule(r, at)
				if err != nil {
					return nil, err
				}
				fp.rules = append(fp.rules, rl)
			}
			p.fields[k] = fp
		default:
			return nil, fmt.Errorf("%s: a value in a pattern must be a list of rules or an object, got %v", at, v)
		}
	}
	return p, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (p *pattern) match(obj map[string]any) bool {
	for k, fp := range p.fields {
		v, present := obj[k]
		if !fp.match(v, present) {
			return false
		}
	}
	for _, group := range p.or {
		ok := false
		for _, alt := range group {
			if alt.match(obj) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (fp *fieldPattern) match(v any, present bool) bool {
	if _, bad := v.(notJSON); bad {
		return false
	}
	if fp.sub != nil {
		m, _ := v.(map[string]any)
		if present && m == nil {
			return false
		}
		return fp.sub.match(m) // absent: only exists:false leaves can match
	}
	if arr, ok := v.([]any); ok && present {
		// An array matches when any element does.
		for _, r := range fp.rules {
			if r.kind == ruleExists {
				if r.match(v, true) {
					return true
				}
				continue
			}
			for _, e := range arr {
				if r.match(e, true) {
					return true
				}
			}
		}
		return false
	}
	for _, r := range fp.rules {
		if r.match(v, present) {
			return true
		}
	}
	return false
}

type ruleKind int

const (
	ruleEquals ruleKind = iota
	rulePrefix
	ruleSuffix
	ruleEqualsIgnoreCase
	ruleAnythingBut
	ruleNumeric
	ruleExists
)

type numericCmp struct {
	op string
	n  float64
}

type rule struct {
	kind    ruleKind
	value   any // equals: string, json.Number, bool or nil
	str     string
	exists  bool
	numeric []numericCmp
	not     []rule // anything-but: matches when none of these does
}

func compileRule(r any, at string) (rule, error) {
	switch r := r.(type) {
	case string, json.Number, bool, nil:
		return rule{kind: ruleEquals, value: r}, nil
	case map[string]any:
		if len(r) != 1 {
			return rule{}, fmt.Errorf("%s: a rule object must have exactly one operator, got %d", at, len(r))
		}
		for op, arg := range r {
			switch op {
			case "prefix", "suffix", "equals-ignore-case":
				s, ok := arg.(string)
				if !ok {
					return rule{}, fmt.Errorf("%s: %s needs a string", at, op)
				}
				kind := map[string]ruleKind{"prefix": rulePrefix, "suffix": ruleSuffix, "equals-ignore-case": ruleEqualsIgnoreCase}[op]
				return rule{kind: kind, str: s}, nil
			case "exists":
				b, ok := arg.(bool)
				if !ok {
					return rule{}, fmt.Errorf("%s: exists needs true or false", at)
				}
				return rule{kind: ruleExists, exists: b}, nil
			case "numeric":
				return compileNumeric(arg, at)
			case "anything-but":
				var not []rule
				switch a := arg.(type) {
				case []any:
					if len(a) == 0 {
						return rule{}, fmt.Errorf("%s: anything-but needs at least one value", at)
					}
					for _, x := range a {
						switch x.(type) {
						case string, json.Number:
						default:
							return rule{}, fmt.Errorf("%s: anything-but lists strings or numbers, got %v", at, x)
						}
						not = append(not, rule{kind: ruleEquals, value: x})
					}
				case string, json.Number:
					not = []rule{{kind: ruleEquals, value: a}}
				case map[string]any:
					inner, err := compileRule(a, at)
					if err != nil {
						return rule{}, err
					}
					if inner.kind != rulePrefix && inner.kind != ruleSuffix && inner.kind != ruleEqualsIgnoreCase {
						return rule{}, fmt.Errorf("%s: anything-but takes a value, a list, prefix, suffix or equals-ignore-case", at)
					}
					not = []rule{inner}
				default:
					return rule{}, fmt.Errorf("%s: anything-but takes a value, a list, prefix, suffix or equals-ignore-case", at)
				}
				return rule{kind: ruleAnythingBut, not: not}, nil
			default:
				return rule{}, fmt.Errorf("%s: unsupported filter operator %q", at, op)
			}
		}
	}
	return rule{}, fmt.Errorf("%s: a rule must be a value or an operator object, got %v", at, r)
}

func compileNumeric(arg any, at string) (rule, error) {
	a, ok := arg.([]any)
	if !ok || len(a) == 0 || len(a)%2 != 0 || len(a) > 4 {
		return rule{}, fmt.Errorf("%s: numeric needs one or two [operator, number] pairs", at)
	}
	var cmps []numericCmp
	for i := 0; i < len(a); i += 2 {
		op, ok := a[i].(string)
		if !ok {
			return rule{}, fmt.Errorf("%s: numeric operator must be a string", at)
		}
		switch op {
		case "=", "<", "<=", ">", ">=":
		default:
			return rule{}, fmt.Errorf("%s: numeric operator %q: want =, <, <=, > or >=", at, op)
		}
		n, ok := a[i+1].(json.Number)
		if !ok {
			return rule{}, fmt.Errorf("%s: numeric %s needs a number", at, op)
		}
		f, err := n.Float64()
		if err != nil {
			return rule{}, fmt.Errorf("%s: numeric %s: %w", at, op, err)
		}
		cmps = append(cmps, numericCmp{op: op, n: f})
	}
	if len(cmps) == 2 && (cmps[0].op == "=" || cmps[1].op == "=") {
		return rule{}, errors.New(at + ": numeric = cannot be part of a range")
	}
	return rule{kind: ruleNumeric, numeric: cmps}, nil
}

func (r rule) match(v any, present bool) bool {
	if r.kind == ruleExists {
		return present == r.exists
	}
	if !present {
		return false
	}
	switch r.kind {
	case ruleEquals:
		switch want := r.value.(type) {
		case nil:
			return v == nil
		case string:
			s, ok := v.(string)
			return ok && s == want
		case json.Number:
			n, ok := v.(json.Number)
			return ok && n.String() == want.String()
		case bool:
			b, ok := v.(bool)
			return ok && b == want
		}
		return false
	case rulePrefix:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, r.str)
	case ruleSuffix:
		s, ok := v.(string)
		return ok && strings.HasSuffix(s, r.str)
	case ruleEqualsIgnoreCase:
		s, ok := v.(string)
		return ok && strings.EqualFold(s, r.str)
	case ruleAnythingBut:
		switch v.(type) {
		case string, json.Number:
		default:
			return false
		}
		for _, n := range r.not {
			if n.match(v, true) {
				return false
			}
		}
		return true
	case ruleNumeric:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return false
		}
		for _, c := range r.numeric {
			var ok bool
			switch c.op {
			case "=":
				ok = f == c.n
			case "<":
				ok = f < c.n
			case "<=":
				ok = f <= c.n
			case ">":
				ok = f > c.n
			case ">=":
				ok = f >= c.n
			}
			if !ok {
				return false
			}
		}
		return true
	}
	return false
}
