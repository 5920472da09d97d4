package template

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// props is a resource's Properties after intrinsics were evaluated, with
// the path used in error messages.
type props struct {
	m    map[string]any
	path string
}

// resolvedProps evaluates every intrinsic in resource id's properties.
func (d *Deployment) resolvedProps(id string) (props, error) {
	path := "Resources." + id + ".Properties"
	v, err := d.eval(d.t.Resources[id].Properties, path)
	if err != nil {
		return props{}, err
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return props{m: m, path: path}, nil
}

func (p props) has(key string) bool {
	_, ok := p.m[key]
	return ok
}

func (p props) at(key string) string { return p.path + "." + key }

// str reads a string property; absent is "".
func (p props) str(key string) (string, error) {
	v, ok := p.m[key]
	if !ok {
		return "", nil
	}
	s, err := stringify(v)
	if err != nil {
		return "", fmt.Errorf("template: %s: %w", p.at(key), err)
	}
	return s, nil
}

// integer reads an integer property (a number or a numeric string);
// absent gives def.
func (p props) integer(key string, def int) (int, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	s, err := stringify(v)
	if err != nil {
		return 0, fmt.Errorf("template: %s: %w", p.at(key), err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int(f)) {
			return 0, fmt.Errorf("template: %s: %q is not an integer", p.at(key), s)
		}
		n = int(f)
	}
	return n, nil
}

// boolean reads a boolean property (true or "true"); absent gives def.
func (p props) boolean(key string, def bool) (bool, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fmt.Errorf("template: %s: %v is not a boolean", p.at(key), v)
}

// obj reads an object property; absent gives an empty one.
func (p props) obj(key string) (props, error) {
	v, ok := p.m[key]
	if !ok {
		return props{m: map[string]any{}, path: p.at(key)}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return props{}, fmt.Errorf("template: %s: want an object, got %s", p.at(key), kind(v))
	}
	return props{m: m, path: p.at(key)}, nil
}

// list reads a list of objects; absent gives none.
func (p props) objs(key string) ([]props, error) {
	v, ok := p.m[key]
	if !ok {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("template: %s: want a list, got %s", p.at(key), kind(v))
	}
	out := make([]props, len(l))
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("template: %s[%d]: want an object, got %s", p.at(key), i, kind(e))
		}
		out[i] = props{m: m, path: fmt.Sprintf("%s[%d]", p.at(key), i)}
	}
	return out, nil
}

// strs reads a list of strings; absent gives none.
func (p props) strs(key string) ([]string, error) {
	v, ok := p.m[key]
	if !ok {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("template: %s: want a list, got %s", p.at(key), kind(v))
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, err := stringify(e)
		if err != nil {
			return nil, fmt.Errorf("template: %s[%d]: %w", p.at(key), i, err)
		}
		out[i] = s
	}
	return out, nil
}

// jsonString renders an object property as the JSON string an AWS API
// attribute wants (SQS RedrivePolicy); a string property is passed through.
func (p props) jsonString(key string) (string, error) {
	v, ok := p.m[key]
	if !ok {
		return "", nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("template: %s: %w", p.at(key), err)
	}
	return string(b), nil
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
