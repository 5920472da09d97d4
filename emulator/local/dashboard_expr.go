package local

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Metric math, the part of it a dashboard of this project needs: the four
// operators, parentheses, numbers, the ids of other rows, and the functions
// FILL(series, value), ABS, SUM, AVG, MIN and MAX over a list ([a, b]) —
// evaluated here, over the series read back, because moto answers metric
// math expressions with no data. Anything else is reported as not evaluated
// locally.

// timeSeries maps a period's start (Unix seconds) to a value.
type timeSeries map[int64]float64

// exprValue is a series or a scalar.
type exprValue struct {
	series timeSeries // nil for a scalar
	scalar float64
}

// evalExpression evaluates expr over the series by id; buckets are the
// period starts of the range, for FILL.
func evalExpression(expr string, byID map[string]timeSeries, buckets []int64) (timeSeries, error) {
	p := &exprParser{src: expr, byID: byID, buckets: buckets}
	p.next()
	v, err := p.sum()
	if err != nil {
		return nil, err
	}
	if p.tok != "" {
		return nil, fmt.Errorf("unexpected %q", p.tok)
	}
	if v.series == nil {
		out := timeSeries{}
		for _, b := range buckets {
			out[b] = v.scalar
		}
		return out, nil
	}
	return v.series, nil
}

type exprParser struct {
	src     string
	pos     int
	tok     string
	byID    map[string]timeSeries
	buckets []int64
}

// next reads the next token: a number, a name, or one character.
func (p *exprParser) next() {
	for p.pos < len(p.src) && p.src[p.pos] == ' ' {
		p.pos++
	}
	if p.pos >= len(p.src) {
		p.tok = ""
		return
	}
	start := p.pos
	c := rune(p.src[p.pos])
	switch {
	case unicode.IsDigit(c) || c == '.':
		for p.pos < len(p.src) && (unicode.IsDigit(rune(p.src[p.pos])) || p.src[p.pos] == '.') {
			p.pos++
		}
	case unicode.IsLetter(c) || c == '_':
		for p.pos < len(p.src) && (unicode.IsLetter(rune(p.src[p.pos])) || unicode.IsDigit(rune(p.src[p.pos])) || p.src[p.pos] == '_') {
			p.pos++
		}
	default:
		p.pos++
	}
	p.tok = p.src[start:p.pos]
}

func (p *exprParser) sum() (exprValue, error) {
	left, err := p.product()
	if err != nil {
		return left, err
	}
	for p.tok == "+" || p.tok == "-" {
		op := p.tok
		p.next()
		right, err := p.product()
		if err != nil {
			return left, err
		}
		left = combine(left, right, op)
	}
	return left, nil
}

func (p *exprParser) product() (exprValue, error) {
	left, err := p.unary()
	if err != nil {
		return left, err
	}
	for p.tok == "*" || p.tok == "/" {
		op := p.tok
		p.next()
		right, err := p.unary()
		if err != nil {
			return left, err
		}
		left = combine(left, right, op)
	}
	return left, nil
}

func (p *exprParser) unary() (exprValue, error) {
	if p.tok == "-" {
		p.next()
		v, err := p.unary()
		return combine(exprValue{scalar: 0}, v, "-"), err
	}
	return p.primary()
}

func (p *exprParser) primary() (exprValue, error) {
	tok := p.tok
	switch {
	case tok == "":
		return exprValue{}, fmt.Errorf("unexpected end of expression")
	case tok == "(":
		p.next()
		v, err := p.sum()
		if err != nil {
			return v, err
		}
		if p.tok != ")" {
			return v, fmt.Errorf("missing )")
		}
		p.next()
		return v, nil
	case unicode.IsDigit(rune(tok[0])) || tok[0] == '.':
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return exprValue{}, fmt.Errorf("number %q: %v", tok, err)
		}
		p.next()
		return exprValue{scalar: f}, nil
	case unicode.IsLetter(rune(tok[0])) || tok[0] == '_':
		p.next()
		if p.tok == "(" {
			return p.call(strings.ToUpper(tok))
		}
		s, ok := p.byID[tok]
		if !ok {
			return exprValue{}, fmt.Errorf("no metric or expression with id %q in this widget", tok)
		}
		return exprValue{series: s}, nil
	}
	return exprValue{}, fmt.Errorf("unexpected %q", tok)
}

// call evaluates a function call; the name and "(" are read.
func (p *exprParser) call(name string) (exprValue, error) {
	p.next()
	var args []exprValue
	for p.tok != ")" {
		if p.tok == "[" { // a list: its series, as separate arguments
			p.next()
			for p.tok != "]" {
				v, err := p.sum()
				if err != nil {
					return v, err
				}
				args = append(args, v)
				if p.tok == "," {
					p.next()
				}
			}
			p.next()
		} else {
			v, err := p.sum()
			if err != nil {
				return v, err
			}
			args = append(args, v)
		}
		if p.tok == "," {
			p.next()
		} else if p.tok != ")" {
			return exprValue{}, fmt.Errorf("%s: expected , or ) but found %q", name, p.tok)
		}
	}
	p.next()
	switch name {
	case "FILL":
		if len(args) != 2 || args[0].series == nil || args[1].series != nil {
			return exprValue{}, fmt.Errorf("FILL takes a series and a number")
		}
		out := timeSeries{}
		for _, b := range p.buckets {
			if v, ok := args[0].series[b]; ok {
				out[b] = v
			} else {
				out[b] = args[1].scalar
			}
		}
		return exprValue{series: out}, nil
	case "ABS":
		if len(args) != 1 {
			return exprValue{}, fmt.Errorf("ABS takes one argument")
		}
		return mapValue(args[0], math.Abs), nil
	case "SUM", "AVG", "MIN", "MAX":
		if len(args) == 0 {
			return exprValue{}, fmt.Errorf("%s takes a list of series", name)
		}
		return reduceSeries(name, args), nil
	}
	return exprValue{}, fmt.Errorf("function %s is not evaluated locally (metric math on AWS has it)", name)
}

// combine applies op point by point; a series meets a series only where
// both have a value, as metric math does.
func combine(a, b exprValue, op string) exprValue {
	f := func(x, y float64) float64 {
		switch op {
		case "+":
			return x + y
		case "-":
			return x - y
		case "*":
			return x * y
		}
		if y == 0 {
			return math.NaN()
		}
		return x / y
	}
	switch {
	case a.series == nil && b.series == nil:
		return exprValue{scalar: f(a.scalar, b.scalar)}
	case a.series == nil:
		return mapValue(b, func(y float64) float64 { return f(a.scalar, y) })
	case b.series == nil:
		return mapValue(a, func(x float64) float64 { return f(x, b.scalar) })
	}
	out := timeSeries{}
	for t, x := range a.series {
		if y, ok := b.series[t]; ok {
			if v := f(x, y); !math.IsNaN(v) {
				out[t] = v
			}
		}
	}
	return exprValue{series: out}
}

func mapValue(v exprValue, f func(float64) float64) exprValue {
	if v.series == nil {
		return exprValue{scalar: f(v.scalar)}
	}
	out := timeSeries{}
	for t, x := range v.series {
		if y := f(x); !math.IsNaN(y) {
			out[t] = y
		}
	}
	return exprValue{series: out}
}

// reduceSeries combines series point by point over the points any of them has.
func reduceSeries(name string, args []exprValue) exprValue {
	acc := map[int64][]float64{}
	for _, a := range args {
		for t, v := range a.series {
			acc[t] = append(acc[t], v)
		}
	}
	out := timeSeries{}
	for t, vs := range acc {
		r := vs[0]
		switch name {
		case "SUM", "AVG":
			r = 0
			for _, v := range vs {
				r += v
			}
			if name == "AVG" {
				r /= float64(len(vs))
			}
		case "MIN":
			for _, v := range vs {
				r = math.Min(r, v)
			}
		case "MAX":
			for _, v := range vs {
				r = math.Max(r, v)
			}
		}
		out[t] = r
	}
	return exprValue{series: out}
}
