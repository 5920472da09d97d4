package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// Kind is what a pipeline file declares, its "kind" member: every operator
// of a repository is a file in pipelines/, and the stack deploys each by
// its kind.
type Kind string

// The kinds of pipeline files.
const (
	// KindAggregate, the default: a windowed aggregation (Parse, Config),
	// run by an aggregate and a ticker function.
	KindAggregate Kind = "aggregate"
	// KindJoin: a stream–stream join (package join reads the file, as
	// JOIN_CONFIG), run by a join function.
	KindJoin Kind = "join"
	// KindCEP: complex event processing (package cep reads the file, as
	// CEP_CONFIG), run by a detect function with its rules table.
	KindCEP Kind = "cep"
)

// Kinds lists the kinds, the default first.
var Kinds = []Kind{KindAggregate, KindJoin, KindCEP}

var kindDocs = map[Kind]string{KindAggregate: "windowed aggregation", KindJoin: "stream–stream join", KindCEP: "complex event processing detection"}

func fileKindNames() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = string(k)
	}
	return out
}

// fileKind reads the kind of a pipeline file that strictjson has checked:
// KindAggregate when "kind" is absent, or when doc is no object (Parse
// then says what is wrong with it).
func fileKind(doc []byte) (Kind, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return KindAggregate, nil
	}
	var s string
	if err := field(m, "kind", "kind", &s); err != nil {
		return "", err
	}
	switch k := Kind(s); {
	case s == "":
		return KindAggregate, nil
	case slices.Contains(Kinds, k):
		return k, nil
	}
	if near := strictjson.Nearest(s, fileKindNames()); near != "" {
		return "", cfgErr("kind", "%q is not a kind; did you mean %q? (want %s)", s, near, joinOr(fileKindNames()))
	}
	return "", cfgErr("kind", "%q is not a kind: want %s", s, joinOr(fileKindNames()))
}

// checkOperator checks a join or CEP file against its kind's table: no
// unknown field, each of the declared type, durations that parse, values
// of an enum among it, the required fields present. It returns the name
// and the file's mistakes, as parse does (NewFile adds its own), or, for a
// document that is not one object, that one error.
// What the table cannot say (a join's left and right differ, its bound is
// at most a day) is join.Parse's and cep.ParseConfig's to refuse; the
// stack runs them too.
func checkOperator(k Kind, doc []byte) (string, *mistakes, error) {
	if err := strictjson.Check(doc, strictjson.Options{MaxBytes: MaxFileBytes, Name: "config"}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return "", nil, cfgErr(se.Path, "%s", se.Reason)
		}
		return "", nil, cfgErr("", "%v", err)
	}
	specs := kindFields[k]
	m := newMistakes(doc)
	top, err := object(m, "", "", doc, fieldNames(specs), schemaField)
	if err != nil {
		return "", nil, err
	}
	var schema string // for editors; ignored
	m.add(field(top, schemaField, schemaField, &schema))
	var name string
	for _, f := range specs {
		if !m.ok(f.name) { // misspelt: the unknown field is the mistake
			continue
		}
		if _, ok := top[f.name]; !ok {
			if f.required {
				m.add(cfgErr(f.name, "required: %s", f.doc))
			}
			continue
		}
		switch f.typ {
		case tBool:
			var b bool
			m.add(field(top, f.name, f.name, &b))
			continue
		case tString:
		default:
			return "", nil, fmt.Errorf("pipeline: field %s of kind %s has type %s, which checkOperator does not read", f.name, k, f.typ)
		}
		var s string
		if m.add(field(top, f.name, f.name, &s)) {
			continue
		}
		switch {
		case f.enum != nil && !slices.Contains(f.enum, s):
			m.add(cfgErr(f.name, "%q: want %s", s, joinOr(f.enum)))
		case f.pattern != "" && !regexp.MustCompile(f.pattern).MatchString(s):
			m.add(cfgErr(f.name, "%q %s", s, f.patternReason))
		case f.duration:
			if _, err := duration(f.name, s, 0, true); err != nil {
				m.add(err)
			}
		}
		if f.name == "name" {
			name = s
		}
	}
	return name, m, nil
}
