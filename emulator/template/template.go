package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tributary-dev/tributary/pkg/limits"
)

// Template is a CloudFormation template as cdk synth writes it.
type Template struct {
	// Name is the stack name guessed from the file name
	// (Tributary.template.json → Tributary); empty when Parse was used.
	Name       string
	Resources  map[string]Resource
	Outputs    map[string]Output
	Conditions map[string]any
	Parameters map[string]Parameter
	Mappings   map[string]map[string]map[string]any
}

// Resource is one entry of the template's Resources section.
type Resource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
	// DependsOn is a logical id or a list of them, as in the template.
	DependsOn any
	// Condition names a condition that must hold for the resource to exist.
	Condition string
}

// Output is one entry of the template's Outputs section.
type Output struct {
	Value       any
	Description string
	Condition   string
	Export      map[string]any
}

// Parameter is one entry of the template's Parameters section. Only the
// default is used locally (CDK's BootstrapVersion has one).
type Parameter struct {
	Type    string
	Default any
}

// MaxBytes bounds the template Load reads: CloudFormation takes a
// template of at most 1 MB (from S3), and a larger file is no synthesized
// template (a -template /dev/zero, a log given by mistake).
const MaxBytes = 1 << 20

// Load reads a cdk.out <Stack>.template.json, refusing one of more than
// MaxBytes without reading past MaxBytes+1.
func Load(path string) (*Template, error) {
	b, over, err := limits.ReadFileAtMost(path, MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	if over {
		return nil, fmt.Errorf("template: %s: more than %d bytes, more than CloudFormation takes (1 MB): not a synthesized template", path, MaxBytes)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("template: %s: %w", path, err)
	}
	t.Name = strings.TrimSuffix(filepath.Base(path), ".template.json")
	if t.Name == filepath.Base(path) {
		t.Name = strings.TrimSuffix(t.Name, filepath.Ext(t.Name))
	}
	return t, nil
}

// Parse decodes a template from JSON. Numbers are kept as json.Number so
// that they print as written.
func Parse(b []byte) (*Template, error) {
	var raw struct {
		Resources  map[string]Resource                  `json:"Resources"`
		Outputs    map[string]Output                    `json:"Outputs"`
		Conditions map[string]any                       `json:"Conditions"`
		Parameters map[string]Parameter                 `json:"Parameters"`
		Mappings   map[string]map[string]map[string]any `json:"Mappings"`
		Transform  any                                  `json:"Transform"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if raw.Transform != nil {
		return nil, fmt.Errorf("Transform: templates with macros (e.g. AWS::Serverless) are not supported locally")
	}
	if len(raw.Resources) == 0 {
		return nil, fmt.Errorf("Resources: the template has no resources")
	}
	for id, r := range raw.Resources {
		if r.Type == "" {
			return nil, fmt.Errorf("Resources.%s.Type: missing", id)
		}
		if r.Properties == nil {
			r.Properties = map[string]any{}
			raw.Resources[id] = r
		}
	}
	return &Template{
		Resources:  raw.Resources,
		Outputs:    raw.Outputs,
		Conditions: raw.Conditions,
		Parameters: raw.Parameters,
		Mappings:   raw.Mappings,
	}, nil
}

// dependsOn lists the logical ids in r's DependsOn attribute.
func (r Resource) dependsOn() []string {
	switch v := r.DependsOn.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// ids returns the logical ids of the template's resources in a stable order.
func (t *Template) ids() []string {
	ids := make([]string, 0, len(t.Resources))
	for id := range t.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// UnmarshalJSON accepts the template's member names.
func (r *Resource) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type       string         `json:"Type"`
		Properties map[string]any `json:"Properties"`
		Metadata   map[string]any `json:"Metadata"`
		DependsOn  any            `json:"DependsOn"`
		Condition  string         `json:"Condition"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*r = Resource(raw)
	return nil
}

// UnmarshalJSON accepts the template's member names.
func (o *Output) UnmarshalJSON(b []byte) error {
	var raw struct {
		Value       any            `json:"Value"`
		Description string         `json:"Description"`
		Condition   string         `json:"Condition"`
		Export      map[string]any `json:"Export"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*o = Output(raw)
	return nil
}
