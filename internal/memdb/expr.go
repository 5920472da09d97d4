package memdb

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expression language, as far as the callers use it: condition and key
// condition expressions (comparisons, BETWEEN, begins_with,
// attribute_exists/attribute_not_exists, AND, OR, NOT, parentheses) and
// update expressions (SET with if_not_exists, list_append, + and -; ADD;
// REMOVE), over attribute names and paths into maps (a.b, #a.#b; no list
// indexes). Parsed once per distinct string.

type tokenKind uint8

const (
	tkEOF tokenKind = iota
	tkIdent
	tkName  // #name
	tkValue // :value
	tkOp    // = <> < <= > >= + - ( ) ,
)

type token struct {
	kind tokenKind
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case c == '#' || c == ':' || c == '_' || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)):
			j := i + 1
			// A path goes on through its dots: a.b, #a.#b.
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] == '#' && s[j-1] == '.' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			k := tkIdent
			if c == '#' {
				k = tkName
			} else if c == ':' {
				k = tkValue
			}
			out = append(out, token{k, s[i:j]})
			i = j
		case c == '<' && i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '>'):
			out = append(out, token{tkOp, s[i : i+2]})
			i += 2
		case c == '>' && i+1 < len(s) && s[i+1] == '=':
			out = append(out, token{tkOp, ">="})
			i += 2
		case strings.IndexByte("=<>+-(),", c) >= 0:
			out = append(out, token{tkOp, s[i : i+1]})
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at %d in %q", c, i, s)
		}
	}
	return append(out, token{kind: tkEOF}), nil
}

// operand is a path, a value placeholder or a function of operands.
type operand struct {
	kind byte // 'p' path, 'v' value, 'f' function, '+' or '-'
	name string
	args []*operand
}

// cond is a condition tree.
type cond struct {
	op   string // "and", "or", "not", "cmp", "between", "fn"
	cmp  string
	l, r *cond
	args []*operand
	fn   string
}

type parser struct {
	toks []token
	i    int
	src  string
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) expect(text string) error {
	if t := p.next(); t.text != text {
		return fmt.Errorf("expected %q, got %q in %q", text, t.text, p.src)
	}
	return nil
}

func (p *parser) isKeyword(t token, kw string) bool {
	return t.kind == tkIdent && strings.EqualFold(t.text, kw)
}

func (p *parser) condition() (*cond, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.isKeyword(p.peek(), "OR") {
		p.next()
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &cond{op: "or", l: l, r: r}
	}
	return l, nil
}

func (p *parser) and() (*cond, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.isKeyword(p.peek(), "AND") {
		p.next()
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = &cond{op: "and", l: l, r: r}
	}
	return l, nil
}

func (p *parser) not() (*cond, error) {
	if p.isKeyword(p.peek(), "NOT") {
		p.next()
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return &cond{op: "not", l: c}, nil
	}
	return p.primary()
}

var condFuncs = map[string]bool{"attribute_exists": true, "attribute_not_exists": true, "begins_with": true, "contains": true}

func (p *parser) primary() (*cond, error) {
	t := p.peek()
	if t.kind == tkOp && t.text == "(" {
		p.next()
		c, err := p.condition()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t.kind == tkIdent && condFuncs[strings.ToLower(t.text)] {
		p.next()
		args, err := p.args()
		if err != nil {
			return nil, err
		}
		return &cond{op: "fn", fn: strings.ToLower(t.text), args: args}, nil
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	t = p.next()
	if p.isKeyword(t, "BETWEEN") {
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword(p.next(), "AND") {
			return nil, fmt.Errorf("BETWEEN without AND in %q", p.src)
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &cond{op: "between", args: []*operand{l, lo, hi}}, nil
	}
	switch t.text {
	case "=", "<>", "<", "<=", ">", ">=":
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &cond{op: "cmp", cmp: t.text, args: []*operand{l, r}}, nil
	}
	return nil, fmt.Errorf("unexpected %q in %q", t.text, p.src)
}

func (p *parser) args() ([]*operand, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []*operand
	for {
		a, err := p.operand()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		t := p.next()
		if t.text == ")" {
			return out, nil
		}
		if t.text != "," {
			return nil, fmt.Errorf("unexpected %q in %q", t.text, p.src)
		}
	}
}

// operand parses a path, a placeholder or a function call.
func (p *parser) operand() (*operand, error) {
	t := p.next()
	switch t.kind {
	case tkName, tkIdent:
		if t.kind == tkIdent && p.peek().text == "(" {
			args, err := p.args()
			if err != nil {
				return nil, err
			}
			return &operand{kind: 'f', name: strings.ToLower(t.text), args: args}, nil
		}
		return &operand{kind: 'p', name: t.text}, nil
	case tkValue:
		return &operand{kind: 'v', name: t.text}, nil
	}
	return nil, fmt.Errorf("unexpected %q in %q", t.text, p.src)
}

// setValue parses the right side of a SET action: operand [+|- operand].
func (p *parser) setValue() (*operand, error) {
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tkOp && (t.text == "+" || t.text == "-") {
		p.next()
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &operand{kind: t.text[0], args: []*operand{l, r}}, nil
	}
	return l, nil
}

// action is one update action.
type action struct {
	clause string // SET, ADD, REMOVE, DELETE
	path   string
	value  *operand
}

func parseUpdate(s string) ([]action, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, src: s}
	var out []action
	clause := ""
	for p.peek().kind != tkEOF {
		t := p.peek()
		if t.kind == tkIdent {
			switch up := strings.ToUpper(t.text); up {
			case "SET", "ADD", "REMOVE", "DELETE":
				p.next()
				clause = up
				continue
			}
		}
		if t.kind == tkOp && t.text == "," {
			p.next()
			continue
		}
		if clause == "" {
			return nil, fmt.Errorf("update expression %q has no clause", s)
		}
		path := p.next()
		if path.kind != tkName && path.kind != tkIdent {
			return nil, fmt.Errorf("unexpected %q in %q", path.text, s)
		}
		a := action{clause: clause, path: path.text}
		switch clause {
		case "SET":
			if err := p.expect("="); err != nil {
				return nil, err
			}
			if a.value, err = p.setValue(); err != nil {
				return nil, err
			}
		case "ADD", "DELETE":
			if a.value, err = p.operand(); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func parseCondition(s string) (*cond, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, src: s}
	c, err := p.condition()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tkEOF {
		return nil, fmt.Errorf("trailing %q in %q", p.peek().text, s)
	}
	return c, nil
}

var (
	condCache   sync.Map // string → *cond
	updateCache sync.Map // string → []action
)

func cachedCondition(s string) (*cond, error) {
	if c, ok := condCache.Load(s); ok {
		return c.(*cond), nil
	}
	c, err := parseCondition(s)
	if err != nil {
		return nil, err
	}
	condCache.Store(s, c)
	return c, nil
}

func cachedUpdate(s string) ([]action, error) {
	if a, ok := updateCache.Load(s); ok {
		return a.([]action), nil
	}
	a, err := parseUpdate(s)
	if err != nil {
		return nil, err
	}
	updateCache.Store(s, a)
	return a, nil
}

// env resolves names and values of one request.
type env struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (e env) attr(path string) (string, error) {
	if strings.HasPrefix(path, "#") {
		n, ok := e.names[path]
		if !ok {
			return "", fmt.Errorf("ExpressionAttributeNames has no %s", path)
		}
		return n, nil
	}
	return path, nil
}

// resolve is a path's names, top-level attribute first, then the keys of
// the maps it goes through.
func (e env) resolve(path string) ([]string, error) {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		n, err := e.attr(p)
		if err != nil {
			return nil, err
		}
		parts[i] = n
	}
	return parts, nil
}

// at is the value at a resolved path of item, nil when it is missing or
// goes through something that is not a map.
func at(item map[string]types.AttributeValue, names []string) types.AttributeValue {
	v := types.AttributeValue(&types.AttributeValueMemberM{Value: item})
	for _, n := range names {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil
		}
		if v = m.Value[n]; v == nil {
			return nil
		}
	}
	return v
}

// setAt sets (v not nil) or removes the value at a resolved path of item,
// copying the maps it goes through (they may be shared with the item as it
// was). A path through a map that is missing is DynamoDB's refusal, for a
// SET; a REMOVE of it does nothing.
func setAt(item map[string]types.AttributeValue, names []string, v types.AttributeValue) error {
	if len(names) == 1 {
		if v == nil {
			delete(item, names[0])
		} else {
			item[names[0]] = v
		}
		return nil
	}
	m, ok := item[names[0]].(*types.AttributeValueMemberM)
	if !ok {
		if v == nil {
			return nil
		}
		return validation("The document path provided in the update expression is invalid for update")
	}
	inner := clone(m.Value)
	if err := setAt(inner, names[1:], v); err != nil {
		return err
	}
	item[names[0]] = &types.AttributeValueMemberM{Value: inner}
	return nil
}

// eval evaluates an operand against item; nil means the attribute is missing.
func (e env) eval(o *operand, item map[string]types.AttributeValue) (types.AttributeValue, error) {
	switch o.kind {
	case 'p':
		names, err := e.resolve(o.name)
		if err != nil {
			return nil, err
		}
		return at(item, names), nil
	case 'v':
		v, ok := e.values[o.name]
		if !ok {
			return nil, fmt.Errorf("ExpressionAttributeValues has no %s", o.name)
		}
		return v, nil
	case '+', '-':
		l, err := e.eval(o.args[0], item)
		if err != nil {
			return nil, err
		}
		r, err := e.eval(o.args[1], item)
		if err != nil {
			return nil, err
		}
		return arith(o.kind, l, r)
	case 'f':
		switch o.name {
		case "if_not_exists":
			v, err := e.eval(o.args[0], item)
			if err != nil || v != nil {
				return v, err
			}
			return e.eval(o.args[1], item)
		case "list_append":
			l, err := e.eval(o.args[0], item)
			if err != nil {
				return nil, err
			}
			r, err := e.eval(o.args[1], item)
			if err != nil {
				return nil, err
			}
			ll, ok1 := l.(*types.AttributeValueMemberL)
			rl, ok2 := r.(*types.AttributeValueMemberL)
			if !ok1 || !ok2 {
				return nil, validation("An operand in the update expression has an incorrect data type")
			}
			out := make([]types.AttributeValue, 0, len(ll.Value)+len(rl.Value))
			out = append(append(out, ll.Value...), rl.Value...)
			return &types.AttributeValueMemberL{Value: out}, nil
		case "size":
			v, err := e.eval(o.args[0], item)
			if err != nil || v == nil {
				return nil, err
			}
			n := 0
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				n = len(v.Value)
			case *types.AttributeValueMemberB:
				n = len(v.Value)
			case *types.AttributeValueMemberL:
				n = len(v.Value)
			case *types.AttributeValueMemberM:
				n = len(v.Value)
			}
			return &types.AttributeValueMemberN{Value: fmt.Sprint(n)}, nil
		}
	}
	return nil, fmt.Errorf("unsupported operand %q", o.name)
}

func arith(op byte, l, r types.AttributeValue) (types.AttributeValue, error) {
	ln, ok1 := l.(*types.AttributeValueMemberN)
	rn, ok2 := r.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, validation("An operand in the update expression has an incorrect data type")
	}
	if a, err1 := strconv.ParseInt(ln.Value, 10, 64); err1 == nil {
		if b, err2 := strconv.ParseInt(rn.Value, 10, 64); err2 == nil && a < 1<<62 && b < 1<<62 && a > -1<<62 && b > -1<<62 {
			if op == '-' {
				b = -b
			}
			return &types.AttributeValueMemberN{Value: strconv.FormatInt(a+b, 10)}, nil
		}
	}
	a, b := number(ln.Value), number(rn.Value)
	if op == '+' {
		a.Add(a, b)
	} else {
		a.Sub(a, b)
	}
	return &types.AttributeValueMemberN{Value: formatNumber(a)}, nil
}

func number(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return new(big.Rat)
	}
	return r
}

func formatNumber(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(38), "0"), ".")
}

// test evaluates a condition against item (nil: no item).
func (e env) test(c *cond, item map[string]types.AttributeValue) (bool, error) {
	switch c.op {
	case "and", "or":
		l, err := e.test(c.l, item)
		if err != nil {
			return false, err
		}
		r, err := e.test(c.r, item)
		if err != nil {
			return false, err
		}
		if c.op == "and" {
			return l && r, nil
		}
		return l || r, nil
	case "not":
		v, err := e.test(c.l, item)
		return !v, err
	case "fn":
		switch c.fn {
		case "attribute_exists", "attribute_not_exists":
			names, err := e.resolve(c.args[0].name)
			if err != nil {
				return false, err
			}
			ok := at(item, names) != nil
			return ok == (c.fn == "attribute_exists"), nil
		case "begins_with":
			a, err := e.eval(c.args[0], item)
			if err != nil {
				return false, err
			}
			b, err := e.eval(c.args[1], item)
			if err != nil {
				return false, err
			}
			as, ok1 := a.(*types.AttributeValueMemberS)
			bs, ok2 := b.(*types.AttributeValueMemberS)
			return ok1 && ok2 && strings.HasPrefix(as.Value, bs.Value), nil
		}
		return false, fmt.Errorf("unsupported function %s", c.fn)
	case "cmp":
		a, err := e.eval(c.args[0], item)
		if err != nil {
			return false, err
		}
		b, err := e.eval(c.args[1], item)
		if err != nil {
			return false, err
		}
		n, ok := compare(a, b)
		if !ok {
			return c.cmp == "<>", nil
		}
		switch c.cmp {
		case "=":
			return n == 0, nil
		case "<>":
			return n != 0, nil
		case "<":
			return n < 0, nil
		case "<=":
			return n <= 0, nil
		case ">":
			return n > 0, nil
		case ">=":
			return n >= 0, nil
		}
	case "between":
		v, err := e.eval(c.args[0], item)
		if err != nil {
			return false, err
		}
		lo, err := e.eval(c.args[1], item)
		if err != nil {
			return false, err
		}
		hi, err := e.eval(c.args[2], item)
		if err != nil {
			return false, err
		}
		a, ok1 := compare(v, lo)
		b, ok2 := compare(v, hi)
		return ok1 && ok2 && a >= 0 && b <= 0, nil
	}
	return false, fmt.Errorf("unsupported condition %q", c.op)
}

// compare orders two scalar values of one type; ok is false when they
// cannot be compared (missing, different types, not scalars).
func compare(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			if a.Value == b.Value {
				return 0, true
			}
			return number(a.Value).Cmp(number(b.Value)), true
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberBOOL:
		if b, ok := b.(*types.AttributeValueMemberBOOL); ok && a.Value == b.Value {
			return 0, true
		}
	}
	return 0, false
}

// apply runs update actions on item (changed in place) and returns the
// names of the attributes they set or removed.
func (e env) apply(acts []action, item map[string]types.AttributeValue) ([]string, error) {
	// Every right side is evaluated against the item as it was.
	old := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		old[k] = v
	}
	touched := make([]string, 0, len(acts))
	for i := range acts {
		a := &acts[i]
		names, err := e.resolve(a.path)
		if err != nil {
			return nil, err
		}
		n := names[0]
		touched = append(touched, n)
		if len(names) > 1 && a.clause != "SET" && a.clause != "REMOVE" {
			return nil, fmt.Errorf("%s of a path into a map (%s) is not supported", a.clause, a.path)
		}
		switch a.clause {
		case "SET":
			v, err := e.eval(a.value, old)
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, validation("The provided expression refers to an attribute that does not exist in the item")
			}
			if err := setAt(item, names, v); err != nil {
				return nil, err
			}
		case "REMOVE":
			if err := setAt(item, names, nil); err != nil {
				return nil, err
			}
		case "ADD":
			v, err := e.eval(a.value, old)
			if err != nil {
				return nil, err
			}
			cur := old[n]
			if cur == nil {
				item[n] = v
				continue
			}
			if add, ok := v.(*types.AttributeValueMemberSS); ok {
				have, ok := cur.(*types.AttributeValueMemberSS)
				if !ok {
					return nil, validation("An operand in the update expression has an incorrect data type")
				}
				item[n] = &types.AttributeValueMemberSS{Value: unionStrings(have.Value, add.Value)}
				continue
			}
			if _, ok := v.(*types.AttributeValueMemberN); !ok {
				return nil, fmt.Errorf("ADD of a non-number to %s is not supported", n)
			}
			sum, err := arith('+', cur, v)
			if err != nil {
				return nil, err
			}
			item[n] = sum
		default:
			return nil, fmt.Errorf("%s is not supported", a.clause)
		}
	}
	return touched, nil
}

// unionStrings is a string set's ADD: have, then each of add not in it.
func unionStrings(have, add []string) []string {
	in := make(map[string]bool, len(have)+len(add))
	out := make([]string, 0, len(have)+len(add))
	for _, v := range have {
		in[v] = true
		out = append(out, v)
	}
	for _, v := range add {
		if !in[v] {
			in[v] = true
			out = append(out, v)
		}
	}
	return out
}
