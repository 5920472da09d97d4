package template

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// noValue is what {"Ref": "AWS::NoValue"} evaluates to: the enclosing
// property or list element is removed.
type noValue struct{}

// Resolve evaluates v (a literal or an intrinsic function such as Ref,
// Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::If) against the deployment
// and returns it as a string, the way CloudFormation would pass it to a
// string property. Numbers and booleans print as written. A value that cannot
// be resolved locally is an error naming the resource and attribute.
func (d *Deployment) Resolve(v any) (string, error) {
	return d.resolveString(v, "value")
}

// resolveString is Resolve with the property path used in errors.
func (d *Deployment) resolveString(v any, path string) (string, error) {
	x, err := d.eval(v, path)
	if err != nil {
		return "", err
	}
	s, err := stringify(x)
	if err != nil {
		return "", fmt.Errorf("template: %s: %w", path, err)
	}
	return s, nil
}

// ResolveValue evaluates every intrinsic inside v and returns plain JSON
// values (string, json.Number, bool, []any, map[string]any). Properties set
// to AWS::NoValue are dropped.
func (d *Deployment) ResolveValue(v any) (any, error) {
	x, err := d.eval(v, "value")
	if err != nil {
		return nil, err
	}
	if _, ok := x.(noValue); ok {
		return nil, nil
	}
	return x, nil
}

// stringify turns an evaluated scalar into its string form.
func stringify(x any) (string, error) {
	switch v := x.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(v), nil
	case nil:
		return "", errors.New("value is null")
	case noValue:
		return "", errors.New("value is AWS::NoValue")
	case []any:
		return "", errors.New("value is a list, not a string")
	case map[string]any:
		return "", errors.New("value is an object, not a string")
	}
	return "", fmt.Errorf("value of type %T is not a string", x)
}

// isIntrinsic reports whether m is a one-member object naming an intrinsic
// function, and returns its name and argument.
func isIntrinsic(m map[string]any) (string, any, bool) {
	if len(m) != 1 {
		return "", nil, false
	}
	for k, v := range m {
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return k, v, true
		}
	}
	return "", nil, false
}

// eval evaluates v; path names where v sits in the template, for errors.
func (d *Deployment) eval(v any, path string) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for i, e := range x {
			r, err := d.eval(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); skip {
				continue
			}
			out = append(out, r)
		}
		return out, nil
	case map[string]any:
		if fn, arg, ok := isIntrinsic(x); ok && fn != "Condition" {
			return d.intrinsic(fn, arg, path)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := d.eval(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); skip {
				continue
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

func (d *Deployment) intrinsic(fn string, arg any, path string) (any, error) {
	at := path + "." + fn
	bad := func(format string, a ...any) error {
		return fmt.Errorf("template: %s: %s", at, fmt.Sprintf(format, a...))
	}
	switch fn {
	case "Ref":
		name, ok := arg.(string)
		if !ok {
			return nil, bad("argument must be a logical id, got %T", arg)
		}
		return d.ref(name, at)
	case "Fn::GetAtt":
		var id, attr string
		switch a := arg.(type) {
		case string:
			i := strings.IndexByte(a, '.')
			if i < 0 {
				return nil, bad("%q is not LogicalId.Attribute", a)
			}
			id, attr = a[:i], a[i+1:]
		case []any:
			if len(a) != 2 {
				return nil, bad("want [LogicalId, Attribute], got %d elements", len(a))
			}
			id, _ = a[0].(string)
			at2, err := d.eval(a[1], at+"[1]")
			if err != nil {
				return nil, err
			}
			attr, _ = at2.(string)
		}
		if id == "" || attr == "" {
			return nil, bad("want [LogicalId, Attribute]")
		}
		return d.getAtt(id, attr, at)
	case "Fn::Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, bad("want [delimiter, [values]]")
		}
		delim, ok := a[0].(string)
		if !ok {
			return nil, bad("delimiter must be a string")
		}
		lv, err := d.eval(a[1], at+"[1]")
		if err != nil {
			return nil, err
		}
		list, ok := lv.([]any)
		if !ok {
			return nil, bad("second argument must be a list")
		}
		parts := make([]string, len(list))
		for i, e := range list {
			s, err := stringify(e)
			if err != nil {
				return nil, bad("element %d: %v", i, err)
			}
			parts[i] = s
		}
		return strings.Join(parts, delim), nil
	case "Fn::Sub":
		return d.sub(arg, at)
	case "Fn::Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, bad("want [index, [values]]")
		}
		iv, err := d.eval(a[0], at+"[0]")
		if err != nil {
			return nil, err
		}
		is, err := stringify(iv)
		if err != nil {
			return nil, bad("index: %v", err)
		}
		idx, err := strconv.Atoi(is)
		if err != nil {
			return nil, bad("index %q is not a number", is)
		}
		lv, err := d.eval(a[1], at+"[1]")
		if err != nil {
			return nil, err
		}
		list, ok := lv.([]any)
		if !ok {
			return nil, bad("second argument must be a list")
		}
		if idx < 0 || idx >= len(list) {
			return nil, bad("index %d out of range for a list of %d", idx, len(list))
		}
		return list[idx], nil
	case "Fn::Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, bad("want [delimiter, string]")
		}
		delim, ok := a[0].(string)
		if !ok {
			return nil, bad("delimiter must be a string")
		}
		sv, err := d.eval(a[1], at+"[1]")
		if err != nil {
			return nil, err
		}
		s, err := stringify(sv)
		if err != nil {
			return nil, bad("%v", err)
		}
		parts := strings.Split(s, delim)
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	case "Fn::If":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, bad("want [condition, valueIfTrue, valueIfFalse]")
		}
		name, ok := a[0].(string)
		if !ok {
			return nil, bad("condition must be a name")
		}
		c, err := d.condition(name)
		if err != nil {
			return nil, fmt.Errorf("template: %s: %w", at, err)
		}
		if c {
			return d.eval(a[1], at+"[1]")
		}
		return d.eval(a[2], at+"[2]")
	case "Fn::GetAZs":
		out := []any{}
		letters := "abc"
		if d.region == "us-east-1" {
			letters = "abcdef"
		}
		for _, l := range letters {
			out = append(out, d.region+string(l))
		}
		return out, nil
	case "Fn::FindInMap":
		a, ok := arg.([]any)
		if !ok || len(a) < 3 {
			return nil, bad("want [MapName, TopLevelKey, SecondLevelKey]")
		}
		keys := make([]string, 3)
		for i := range 3 {
			kv, err := d.eval(a[i], fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			if keys[i], err = stringify(kv); err != nil {
				return nil, bad("key %d: %v", i, err)
			}
		}
		if v, ok := d.t.Mappings[keys[0]][keys[1]][keys[2]]; ok {
			return d.eval(v, at)
		}
		if len(a) == 4 {
			if m, ok := a[3].(map[string]any); ok {
				if dv, ok := m["DefaultValue"]; ok {
					return d.eval(dv, at+"[3]")
				}
			}
		}
		return nil, bad("no value at Mappings.%s.%s.%s", keys[0], keys[1], keys[2])
	case "Fn::Base64":
		sv, err := d.eval(arg, at)
		if err != nil {
			return nil, err
		}
		s, err := stringify(sv)
		if err != nil {
			return nil, bad("%v", err)
		}
		return base64.StdEncoding.EncodeToString([]byte(s)), nil
	case "Fn::ToJsonString":
		v, err := d.eval(arg, at)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, bad("%v", err)
		}
		return string(b), nil
	case "Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not":
		b, err := d.condExpr(map[string]any{fn: arg}, at)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "Fn::ImportValue":
		return nil, bad("cross-stack exports are not available locally")
	}
	return nil, bad("intrinsic function %s is not supported locally", fn)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub evaluates Fn::Sub in its string and [string, {vars}] forms.
func (d *Deployment) sub(arg any, at string) (any, error) {
	var tmpl string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("template: %s: want string or [string, {variables}]", at)
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("template: %s: first argument must be a string", at)
		}
		tmpl = s
		m, ok := a[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("template: %s: second argument must be an object", at)
		}
		vars = m
	default:
		return nil, fmt.Errorf("template: %s: want string or [string, {variables}]", at)
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if firstErr != nil {
			return ""
		}
		name = strings.TrimSpace(name)
		var v any
		var err error
		if x, ok := vars[name]; ok {
			v, err = d.eval(x, at+"."+name)
		} else if i := strings.IndexByte(name, '.'); i > 0 && !strings.HasPrefix(name, "AWS::") {
			v, err = d.getAtt(name[:i], name[i+1:], at+"."+name)
		} else {
			v, err = d.ref(name, at+"."+name)
		}
		if err == nil {
			var s string
			s, err = stringify(v)
			if err != nil {
				err = fmt.Errorf("template: %s: ${%s}: %w", at, name, err)
			}
			return s
		}
		firstErr = err
		return ""
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// ref evaluates {"Ref": name}.
func (d *Deployment) ref(name, at string) (any, error) {
	switch name {
	case "AWS::Region":
		return d.region, nil
	case "AWS::AccountId":
		return d.account, nil
	case "AWS::Partition":
		return d.partition, nil
	case "AWS::URLSuffix":
		return d.urlSuffix, nil
	case "AWS::StackName":
		return d.stack, nil
	case "AWS::StackId":
		return fmt.Sprintf("arn:%s:cloudformation:%s:%s:stack/%s/%s", d.partition, d.region, d.account, d.stack, stableUUID("stack/"+d.stack)), nil
	case "AWS::NoValue":
		return noValue{}, nil
	case "AWS::NotificationARNs":
		return []any{}, nil
	}
	if p, ok := d.t.Parameters[name]; ok {
		if p.Default == nil {
			return nil, fmt.Errorf("template: %s: parameter %s has no default, and parameters cannot be passed locally", at, name)
		}
		return p.Default, nil
	}
	r, ok := d.t.Resources[name]
	if !ok {
		return nil, fmt.Errorf("template: %s: Ref to %q: no such resource or parameter", at, name)
	}
	ph, err := d.physical(name, at)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	ref := ph.ref
	d.mu.Unlock()
	if ref == "" {
		return nil, fmt.Errorf("template: %s: Ref to %s (%s): its value is not known locally", at, name, r.Type)
	}
	return ref, nil
}

// getAtt evaluates {"Fn::GetAtt": [id, attr]}.
func (d *Deployment) getAtt(id, attr, at string) (any, error) {
	r, ok := d.t.Resources[id]
	if !ok {
		return nil, fmt.Errorf("template: %s: Fn::GetAtt %s.%s: no such resource", at, id, attr)
	}
	ph, err := d.physical(id, at)
	if err != nil {
		return nil, err
	}
	if r.Type == "AWS::Lambda::Url" && attr == "FunctionArn" {
		return d.eval(r.Properties["TargetFunctionArn"], "Resources."+id+".Properties.TargetFunctionArn")
	}
	d.mu.Lock()
	v, ok := ph.attrs[attr]
	provisioned := ph.provisioned
	d.mu.Unlock()
	if !ok {
		if !provisioned && (attr == "StreamArn" || attr == "TableId") && strings.HasPrefix(r.Type, "AWS::DynamoDB::") {
			return nil, fmt.Errorf("template: %s: Fn::GetAtt %s.%s: %s is not provisioned yet (call Provision)", at, id, attr, id)
		}
		if attr == "StreamArn" && strings.HasPrefix(r.Type, "AWS::DynamoDB::") {
			return nil, fmt.Errorf("template: %s: Fn::GetAtt %s.%s: the table has no StreamSpecification, so no stream", at, id, attr)
		}
		return nil, fmt.Errorf("template: %s: Fn::GetAtt %s.%s: attribute %s of %s is not known locally", at, id, attr, attr, r.Type)
	}
	return v, nil
}

// physical returns the local identity of resource id, failing when its
// condition does not hold.
func (d *Deployment) physical(id, at string) (*physicalResource, error) {
	d.mu.Lock()
	ph, ok := d.res[id]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("template: %s: resource %s does not exist: its Condition %q is false", at, id, d.t.Resources[id].Condition)
	}
	return ph, nil
}

// condition evaluates the named template condition.
func (d *Deployment) condition(name string) (bool, error) {
	d.mu.Lock()
	if v, ok := d.conds[name]; ok {
		d.mu.Unlock()
		return v, nil
	}
	if d.evaluating[name] {
		d.mu.Unlock()
		return false, fmt.Errorf("Conditions.%s: refers to itself", name)
	}
	d.evaluating[name] = true
	d.mu.Unlock()
	expr, ok := d.t.Conditions[name]
	if !ok {
		return false, fmt.Errorf("Conditions.%s: no such condition", name)
	}
	v, err := d.condExpr(expr, "Conditions."+name)
	d.mu.Lock()
	delete(d.evaluating, name)
	if err == nil {
		d.conds[name] = v
	}
	d.mu.Unlock()
	return v, err
}

// condExpr evaluates a condition expression (Fn::Equals, Fn::And, Fn::Or,
// Fn::Not, {"Condition": name}).
func (d *Deployment) condExpr(expr any, at string) (bool, error) {
	m, ok := expr.(map[string]any)
	if !ok {
		if b, ok := expr.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("template: %s: not a condition expression", at)
	}
	fn, arg, ok := isIntrinsic(m)
	if !ok {
		return false, fmt.Errorf("template: %s: not a condition expression", at)
	}
	args, _ := arg.([]any)
	switch fn {
	case "Condition":
		name, _ := arg.(string)
		v, err := d.condition(name)
		if err != nil {
			return false, fmt.Errorf("template: %s: %w", at, err)
		}
		return v, nil
	case "Fn::Equals":
		if len(args) != 2 {
			return false, fmt.Errorf("template: %s.Fn::Equals: want two values", at)
		}
		a, err := d.eval(args[0], at+".Fn::Equals[0]")
		if err != nil {
			return false, err
		}
		b, err := d.eval(args[1], at+".Fn::Equals[1]")
		if err != nil {
			return false, err
		}
		ja, _ := json.Marshal(normalize(a))
		jb, _ := json.Marshal(normalize(b))
		return string(ja) == string(jb), nil
	case "Fn::And", "Fn::Or":
		if len(args) == 0 {
			return false, fmt.Errorf("template: %s.%s: want a list of conditions", at, fn)
		}
		for i, e := range args {
			v, err := d.condExpr(e, fmt.Sprintf("%s.%s[%d]", at, fn, i))
			if err != nil {
				return false, err
			}
			if fn == "Fn::And" && !v {
				return false, nil
			}
			if fn == "Fn::Or" && v {
				return true, nil
			}
		}
		return fn == "Fn::And", nil
	case "Fn::Not":
		if len(args) != 1 {
			return false, fmt.Errorf("template: %s.Fn::Not: want one condition", at)
		}
		v, err := d.condExpr(args[0], at+".Fn::Not[0]")
		return !v, err
	}
	return false, fmt.Errorf("template: %s: %s is not a condition function", at, fn)
}

// normalize turns scalars into strings so that Fn::Equals compares
// "1" and 1 the way CloudFormation does.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// refsOf lists the logical ids v refers to (Ref, Fn::GetAtt, Fn::Sub
// variables), sorted and without duplicates. Pseudo parameters and template
// parameters are left out.
func (t *Template) refsOf(v any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if fn, arg, ok := isIntrinsic(x); ok {
				switch fn {
				case "Ref":
					if s, ok := arg.(string); ok {
						seen[s] = true
					}
				case "Fn::GetAtt":
					switch a := arg.(type) {
					case string:
						seen[strings.SplitN(a, ".", 2)[0]] = true
					case []any:
						if len(a) > 0 {
							if s, ok := a[0].(string); ok {
								seen[s] = true
							}
						}
					}
				case "Fn::Sub":
					var s string
					switch a := arg.(type) {
					case string:
						s = a
					case []any:
						if len(a) > 0 {
							s, _ = a[0].(string)
						}
						if len(a) > 1 {
							walk(a[1])
						}
					}
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						if strings.HasPrefix(m[1], "!") {
							continue
						}
						seen[strings.SplitN(strings.TrimSpace(m[1]), ".", 2)[0]] = true
					}
				default:
					walk(arg)
				}
				return
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	var out []string
	for id := range seen {
		if _, ok := t.Resources[id]; ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
