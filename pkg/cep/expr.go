package cep

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/pkg/pipeline"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// A step's where clause is a predicate on one event, one line long:
//
//	data.amount > 100
//	data.country == 'NZ' && data.amount >= 50
//	data.tier in ('gold', 'platinum') || key == 'vip-1'
//	not exists(data.coupon) and (data.items > 3 or data.total > 250.5)
//
// A comparison is a path (key, type, id or data.<field>...), an operator
// (== != > >= < <= in, not in) and a literal: a number, a string in single
// or double quotes, true, false, null, or for in a parenthesized list of
// them. Comparisons combine with && (and), || (or), not and parentheses;
// exists(path) is true when the field is present. A comparison whose field
// is missing, or whose types differ (a number against a string), is false;
// strings order by their bytes; an event's number past what a float64
// holds (1e400) compares as ±infinity.

// value is a typed JSON value read from an event or written in a rule.
type value struct {
	kind byte // 'n' number, 's' string, 'b' bool, 'z' null, 'o' object or array, 0 missing
	num  float64
	str  string
	b    bool
}

// expr is a compiled predicate.
type expr interface {
	eval(ev *stream.Envelope) bool
}

type andExpr struct{ l, r expr }
type orExpr struct{ l, r expr }
type notExpr struct{ e expr }
type existsExpr struct{ p pipeline.Path }
type cmpExpr struct {
	p    pipeline.Path
	op   string
	lits []value // one, or the list of in / not in
}

func (e andExpr) eval(ev *stream.Envelope) bool    { return e.l.eval(ev) && e.r.eval(ev) }
func (e orExpr) eval(ev *stream.Envelope) bool     { return e.l.eval(ev) || e.r.eval(ev) }
func (e notExpr) eval(ev *stream.Envelope) bool    { return !e.e.eval(ev) }
func (e existsExpr) eval(ev *stream.Envelope) bool { return read(ev, e.p).kind != 0 }

func (e cmpExpr) eval(ev *stream.Envelope) bool {
	v := read(ev, e.p)
	if v.kind == 0 {
		return false
	}
	switch e.op {
	case "in":
		for _, l := range e.lits {
			if equal(v, l) {
				return true
			}
		}
		return false
	case "not in":
		for _, l := range e.lits {
			if equal(v, l) {
				return false
			}
		}
		return true
	case "==":
		return equal(v, e.lits[0])
	case "!=":
		return v.kind == e.lits[0].kind && !equal(v, e.lits[0])
	}
	l := e.lits[0]
	var c int
	switch {
	case v.kind == 'n' && l.kind == 'n':
		c = cmpFloat(v.num, l.num)
	case v.kind == 's' && l.kind == 's':
		c = strings.Compare(v.str, l.str)
	default:
		return false
	}
	switch e.op {
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func equal(a, b value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 'n':
		return a.num == b.num
	case 's':
		return a.str == b.str
	case 'b':
		return a.b == b.b
	case 'z':
		return true
	}
	return false
}

// read reads a path of an event; kind 0 when it is missing.
func read(ev *stream.Envelope, p pipeline.Path) value {
	if !p.IsData() {
		s, err := p.Text(ev)
		if err != nil {
			return value{}
		}
		return value{kind: 's', str: s}
	}
	raw, err := p.Raw(ev)
	if err != nil {
		return value{}
	}
	return parseJSONValue(raw)
}

// parseJSONValue types a JSON value.
func parseJSONValue(raw []byte) value {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return value{}
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return value{}
		}
		return value{kind: 's', str: s}
	case 't':
		return value{kind: 'b', b: true}
	case 'f':
		return value{kind: 'b'}
	case 'n':
		return value{kind: 'z'}
	case '{', '[':
		return value{kind: 'o'}
	}
	// A number past what a float64 holds is ±Inf (ParseFloat's ErrRange),
	// which compares with every (finite) literal as the number itself
	// does: not a missing field, or a payment of 1e400 would evade
	// "data.amount > 100" and fail exists(data.amount).
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return value{}
	}
	return value{kind: 'n', num: f}
}

// number reads a path as a number (for sum); ok false when it is missing or
// not a number.
func number(ev *stream.Envelope, p pipeline.Path) (float64, bool) {
	v := read(ev, p)
	return v.num, v.kind == 'n'
}

// ExprError is a where clause that does not parse; Col is the 1-based
// column of the problem, 0 when it is at no place (the clause is too
// long).
type ExprError struct {
	Col    int
	Reason string
}

func (e *ExprError) Error() string {
	if e.Col == 0 {
		return e.Reason
	}
	return fmt.Sprintf("at column %d: %s", e.Col, e.Reason)
}

// maxExprLength bounds a where clause, in bytes: one line.
const maxExprLength = 1024

// parseExpr compiles a where clause.
func parseExpr(src string) (expr, error) {
	if len(src) > maxExprLength {
		return nil, &ExprError{Reason: fmt.Sprintf("is %d bytes long; a where clause is at most %d bytes", len(src), maxExprLength)}
	}
	if strings.ContainsAny(src, "\n\r") {
		return nil, &ExprError{Col: strings.IndexAny(src, "\n\r") + 1, Reason: "a where clause is one line"}
	}
	p := &parser{src: src}
	p.next()
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf("unexpected %s after a complete condition", p.tok)
	}
	return e, nil
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tString
	tOp
	tLParen
	tRParen
	tComma
	tBad
)

type token struct {
	kind tokKind
	text string
	col  int
	val  value
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "the end"
	case tString:
		return strconv.Quote(t.val.str)
	}
	return strconv.Quote(t.text)
}

type parser struct {
	src   string
	pos   int
	tok   token
	depth int
}

func (p *parser) errf(format string, args ...any) error {
	return &ExprError{Col: p.tok.col, Reason: fmt.Sprintf(format, args...)}
}

// next reads the next token into p.tok.
func (p *parser) next() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
	start := p.pos
	t := token{col: start + 1}
	if p.pos >= len(p.src) {
		p.tok = token{kind: tEOF, col: start + 1}
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '(':
		p.pos++
		t.kind, t.text = tLParen, "("
	case c == ')':
		p.pos++
		t.kind, t.text = tRParen, ")"
	case c == ',':
		p.pos++
		t.kind, t.text = tComma, ","
	case c == '\'' || c == '"':
		end := p.pos + 1
		var b strings.Builder
		for end < len(p.src) && p.src[end] != c {
			if p.src[end] == '\\' && end+1 < len(p.src) {
				end++
			}
			b.WriteByte(p.src[end])
			end++
		}
		if end >= len(p.src) {
			p.tok = token{kind: tBad, col: start + 1, text: "an unterminated string"}
			p.pos = len(p.src)
			return
		}
		p.pos = end + 1
		t.kind, t.text, t.val = tString, p.src[start:p.pos], value{kind: 's', str: b.String()}
	case c == '-' || c == '.' || (c >= '0' && c <= '9'):
		end := p.pos + 1
		for end < len(p.src) && strings.IndexByte("0123456789.eE+-", p.src[end]) >= 0 {
			if (p.src[end] == '+' || p.src[end] == '-') && p.src[end-1] != 'e' && p.src[end-1] != 'E' {
				break
			}
			end++
		}
		p.pos = end
		t.kind, t.text = tNumber, p.src[start:end]
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			t.kind = tBad
			t.text = fmt.Sprintf("%q, which is not a finite number", t.text)
		}
		t.val = value{kind: 'n', num: f}
	case strings.IndexByte("=!<>&|", c) >= 0:
		end := p.pos + 1
		if end < len(p.src) && strings.IndexByte("=&|", p.src[end]) >= 0 {
			end++
		}
		p.pos = end
		t.kind, t.text = tOp, p.src[start:end]
		switch t.text {
		case "==", "!=", ">", ">=", "<", "<=", "&&", "||":
		case "=":
			t.kind, t.text = tBad, `"=": compare with "=="`
		default:
			t.kind, t.text = tBad, fmt.Sprintf("%q, which is not an operator (== != > >= < <= && ||)", t.text)
		}
	case identStart(p.src[p.pos:]):
		// By characters, not bytes: a data field may be named in any
		// script (data.größe).
		end := p.pos
		for end < len(p.src) {
			r, size := utf8.DecodeRuneInString(p.src[end:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_.-", r) {
				break
			}
			end += size
		}
		p.pos = end
		t.kind, t.text = tIdent, p.src[start:end]
	default:
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += size
		t.kind, t.text = tBad, fmt.Sprintf("%q", string(r))
	}
	p.tok = t
}

// identStart reports whether s begins with a character that begins a
// field or a word: a letter or '_'.
func identStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func (p *parser) isWord(w string) bool {
	return p.tok.kind == tIdent && strings.EqualFold(p.tok.text, w)
}

const maxExprDepth = 32

func (p *parser) or(depth int) (expr, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for (p.tok.kind == tOp && p.tok.text == "||") || p.isWord("or") {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = orExpr{l, r}
	}
	return l, nil
}

func (p *parser) and(depth int) (expr, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for (p.tok.kind == tOp && p.tok.text == "&&") || p.isWord("and") {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = andExpr{l, r}
	}
	return l, nil
}

func (p *parser) unary(depth int) (expr, error) {
	if depth > maxExprDepth {
		return nil, p.errf("nested more than %d deep", maxExprDepth)
	}
	switch {
	case p.tok.kind == tBad:
		return nil, p.errf("unexpected %s", p.tok.text)
	case p.tok.kind == tLParen:
		p.next()
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf("expected \")\", found %s", p.tok)
		}
		p.next()
		return e, nil
	case p.isWord("not"):
		p.next()
		e, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return notExpr{e}, nil
	case p.isWord("exists"):
		p.next()
		if p.tok.kind != tLParen {
			return nil, p.errf("expected \"(\" after exists, found %s", p.tok)
		}
		p.next()
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf("expected \")\", found %s", p.tok)
		}
		p.next()
		return existsExpr{path}, nil
	}
	return p.comparison()
}

func (p *parser) path() (pipeline.Path, error) {
	if p.tok.kind != tIdent {
		return pipeline.Path{}, p.errf("expected a field (key, type, id or data.<field>), found %s", p.tok)
	}
	path, err := pipeline.ParsePath(p.tok.text)
	if err != nil {
		return pipeline.Path{}, p.errf("%v", err)
	}
	p.next()
	return path, nil
}

func (p *parser) comparison() (expr, error) {
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	e := cmpExpr{p: path}
	switch {
	case p.tok.kind == tOp && p.tok.text != "&&" && p.tok.text != "||":
		e.op = p.tok.text
		p.next()
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		if (e.op != "==" && e.op != "!=") && lit.kind != 'n' && lit.kind != 's' {
			return nil, &ExprError{Col: p.tok.col, Reason: fmt.Sprintf("%s compares numbers or strings, not %s", e.op, kindName(lit.kind))}
		}
		e.lits = []value{lit}
	case p.isWord("in"):
		e.op = "in"
		p.next()
		if e.lits, err = p.list(); err != nil {
			return nil, err
		}
	case p.isWord("not"):
		p.next()
		if !p.isWord("in") {
			return nil, p.errf("expected \"in\" after %q not, found %s", path, p.tok)
		}
		p.next()
		e.op = "not in"
		if e.lits, err = p.list(); err != nil {
			return nil, err
		}
	case p.tok.kind == tBad:
		return nil, p.errf("unexpected %s", p.tok.text)
	default:
		return nil, p.errf("expected an operator after %s (== != > >= < <= in), found %s", path, p.tok)
	}
	return e, nil
}

func kindName(k byte) string {
	switch k {
	case 'b':
		return "a boolean"
	case 'z':
		return "null"
	}
	return "that"
}

func (p *parser) literal() (value, error) {
	t := p.tok
	switch {
	case t.kind == tNumber || t.kind == tString:
		p.next()
		return t.val, nil
	case p.isWord("true"):
		p.next()
		return value{kind: 'b', b: true}, nil
	case p.isWord("false"):
		p.next()
		return value{kind: 'b'}, nil
	case p.isWord("null"):
		p.next()
		return value{kind: 'z'}, nil
	case t.kind == tBad:
		return value{}, p.errf("unexpected %s", t.text)
	case t.kind == tIdent:
		return value{}, p.errf("expected a value, found %s (quote strings: '%s')", t, t.text)
	}
	return value{}, p.errf("expected a value (a number, 'string', true, false or null), found %s", t)
}

// setOf orders an in list's values and drops the ones given twice: in
// asks only whether a value is among them, so a rule whose list is written
// in another order is the same rule (adding it again is done already).
func setOf(vs []value) []value {
	slices.SortFunc(vs, func(a, b value) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.num, b.num), strings.Compare(a.str, b.str), cmpBool(a.b, b.b))
	})
	return slices.CompactFunc(vs, equal)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// maxInList bounds an in list.
const maxInList = 256

func (p *parser) list() ([]value, error) {
	if p.tok.kind != tLParen {
		return nil, p.errf("expected \"(\" and a list of values, found %s", p.tok)
	}
	p.next()
	var out []value
	for {
		v, err := p.literal()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if len(out) > maxInList {
			return nil, p.errf("an in list holds at most %d values", maxInList)
		}
		if p.tok.kind == tRParen {
			p.next()
			return setOf(out), nil
		}
		if p.tok.kind != tComma {
			return nil, p.errf("expected \",\" or \")\" in the list, found %s", p.tok)
		}
		p.next()
	}
}
