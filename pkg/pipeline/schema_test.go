package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schema editors use for pipeline files is generated from the
// tables Parse reads (schema.go). These tests check that the committed file
// is what the generator writes, that a real validator (draft 2020-12) takes
// every example the repository ships, and that it refuses what Parse
// refuses for its shape: unknown fields, wrong types, bad enums, missing
// fields, fields a window kind or an aggregate does not take.

const schemaFile = "../../pipelines/pipeline.schema.json"

func TestSchemaFileIsGenerated(t *testing.T) {
	want, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v: run `make schema`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("pipelines/pipeline.schema.json differs from what pkg/pipeline generates: run `make schema` and commit it")
	}
	again, _ := JSONSchema()
	if !bytes.Equal(again, want) {
		t.Error("JSONSchema is not the same bytes on a second call")
	}
}

// compiled compiles the generated schema with the validator, which also
// checks it against the draft 2020-12 meta-schema.
func compiled(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the generated schema does not compile as draft 2020-12: %v", err)
	}
	return s
}

func validate(s *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// examples are every pipeline file the repository shows a user: pipelines/*.json,
// examples/**/pipelines/*.json and the pipeline blocks of README.md and
// docs/*.md (a ```json block holding an object with "name" and "windows",
// or "name" and "kind" join or cep);
// README.md must hold one (its "Your first pipeline").
func examples(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	files, _ := filepath.Glob("../../pipelines/*.json")
	shipped := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".schema.json") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(f, "../../")] = b
		shipped++
	}
	if shipped == 0 {
		t.Fatal("no pipelines/*.json: the repository ships its pipelines there")
	}
	err := filepath.WalkDir("../../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "cdk.out") {
			return fs.SkipDir
		}
		if !d.IsDir() && filepath.Base(filepath.Dir(path)) == "pipelines" && strings.HasSuffix(path, ".json") && !strings.HasSuffix(path, ".schema.json") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[strings.TrimPrefix(path, "../../")] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		blocks := 0
		for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatchIndex(text, -1) {
			block := text[m[2]:m[3]]
			var probe map[string]json.RawMessage
			if json.Unmarshal(block, &probe) != nil || probe["name"] == nil ||
				(probe["windows"] == nil && string(probe["kind"]) != `"join"` && string(probe["kind"]) != `"cep"`) {
				continue
			}
			line := 1 + bytes.Count(text[:m[0]], []byte("\n"))
			out[fmt.Sprintf("%s:%d", name, line)] = block
			blocks++
		}
		if blocks == 0 && name == "README.md" {
			t.Fatal("README.md: no ```json block with a pipeline (an object with name and windows)")
		}
	}
	return out
}

// parseAny parses doc as NewFile does by its kind, the file name aside.
func parseAny(doc []byte) error {
	k, err := fileKind(doc)
	switch {
	case err != nil:
		return err
	case k == KindAggregate:
		_, err = Parse(doc)
	default:
		var m *mistakes
		if _, m, err = checkOperator(k, doc); err == nil {
			err = m.err()
		}
	}
	return err
}

func TestSchemaAcceptsEveryExample(t *testing.T) {
	s := compiled(t)
	for name, doc := range examples(t) {
		t.Run(name, func(t *testing.T) {
			if err := parseAny(doc); err != nil {
				t.Fatalf("it does not parse: %v", err)
			}
			if err := validate(s, doc); err != nil {
				t.Errorf("the schema refuses it:\n%v", err)
			}
		})
	}
}

// TestSchemaAcceptsWhatParseAccepts runs the configs the parser's own tests
// and fuzz corpus accept through the schema: it must take them all, or an
// editor would mark a valid file as wrong.
func TestSchemaAcceptsWhatParseAccepts(t *testing.T) {
	s := compiled(t)
	docs := [][]byte{with(nil)}
	for _, changes := range []map[string]any{
		{"windows": windows(w{"kind": "sliding", "difference": "10s"}, w{"kind": "session", "gap": "30m"}), "partitionKeyIsGroupingKey": true},
		{"windows": windows(w{"kind": "tumbling", "size": "24h", "offset": "-5h"}), "latePolicy": "drop", "allowedLateness": nil},
		{"windows": windows(w{"kind": "hopping", "size": "1h30m", "advance": "1.5m", "offset": "+30m"})},
		{"aggregates": []any{"min", "max", "mean", "quantiles"}, "distinct": nil, "quantiles": []any{0.25, 0.75}},
		{"aggregates": []any{"count", "distinct"}, "value": nil, "distinctPrecision": 14},
		{"aggregates": nil, "value": nil, "distinct": nil, "latePolicy": nil, "allowedLateness": nil},
		{"key": "key", "parallelizationFactor": 10},
		{"key": "type", "eventTypes": []any{"a", "b"}, "outputs": w{"stream": true, "table": false}},
		{"outputs": w{"table": true}, "eventTypes": []any{}, "outOfOrderness": "0s", "dedupeHorizon": "0s"},
		{"idleTimeout": "1500ms", "dedupeHorizon": "168h", "distinct": "id"},
		{"$schema": "./pipeline.schema.json"},
	} {
		docs = append(docs, with(changes))
	}
	for _, d := range []string{
		`{"name": "n", "windows": [{"kind": "session", "gap": "30m"}]}`,
		`{"name": "n", "key": "data.region", "partitionKeyIsGroupingKey": true, "parallelizationFactor": 4, "windows": [{"kind": "tumbling", "size": "1m"}]}`,
		`{"name":"n","windows":[{"kind":"tumbling","size":"1500000us"}]}`,
		`{"name":"n","windows":[{"kind":"tumbling","size":"1000µs"}],"latePolicy":"drop"}`,
	} {
		docs = append(docs, []byte(d))
	}
	for _, d := range []string{
		`{"kind": "aggregate", "name": "n", "windows": [{"kind": "session", "gap": "30m"}]}`,
		`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "30s"}`,
		`{"$schema": "./pipeline.schema.json", "kind": "join", "name": "j", "left": "search", "right": "click", "key": "data.session", "partitionKeyIsJoinKey": true,
		  "within": "30s", "before": "5s", "joinType": "outer", "allowedLateness": "5s", "idleTimeout": "20s", "rateWindow": "1m", "dedupeHorizon": "0s"}`,
		`{"kind": "cep", "name": "detect"}`,
		`{"$schema": "./pipeline.schema.json", "kind": "cep", "name": "detect", "outOfOrderness": "2s", "idleTimeout": "20s", "dedupeHorizon": "1h"}`,
	} {
		docs = append(docs, []byte(d))
	}
	n := 0
	for _, doc := range docs {
		if err := parseAny(doc); err != nil {
			t.Errorf("Parse(%s): %v (the case must be valid)", doc, err)
			continue
		}
		n++
		if err := validate(s, doc); err != nil {
			t.Errorf("Parse accepts %s, the schema refuses it:\n%v", doc, err)
		}
	}
	if n < len(docs) {
		t.Errorf("only %d of %d cases parsed", n, len(docs))
	}
}

// TestSchemaRefusesWhatParseRefuses: each document Parse refuses for its
// shape, the schema refuses too, at the same place.
func TestSchemaRefusesWhatParseRefuses(t *testing.T) {
	s := compiled(t)
	for _, tc := range []struct {
		name  string
		doc   []byte
		field string // Parse's ConfigError.Field
		where string // the validator's instance location, "/" for the top
	}{
		{"unknown field", with(map[string]any{"agregates": []any{"sum"}}), "agregates", "/"},
		{"unknown window field", with(map[string]any{"windows": windows(w{"kind": "tumbling", "size": "1m", "length": "1m"})}), "windows[0].length", "/windows/0"},
		{"unknown output", with(map[string]any{"outputs": w{"table": true, "queue": true}}), "outputs.queue", "/outputs"},
		{"name missing", with(map[string]any{"name": nil}), "name", "/"},
		{"name pattern", with(map[string]any{"name": "page views"}), "name", "/name"},
		{"name type", with(map[string]any{"name": 7}), "name", "/name"},
		{"windows missing", with(map[string]any{"windows": nil}), "windows", "/"},
		{"windows empty", with(map[string]any{"windows": []any{}}), "windows", "/windows"},
		{"windows type", with(map[string]any{"windows": w{"kind": "tumbling"}}), "windows", "/windows"},
		{"same window twice", with(map[string]any{"windows": windows(w{"kind": "tumbling", "size": "1m"}, w{"kind": "tumbling", "size": "1m"})}), "windows[1]", "/windows"},
		{"window kind enum", with(map[string]any{"windows": windows(w{"kind": "rolling", "size": "1m"})}), "windows[0].kind", "/windows/0/kind"},
		{"window kind missing", with(map[string]any{"windows": windows(w{"size": "1m"})}), "windows[0].kind", "/windows/0"},
		{"tumbling without size", with(map[string]any{"windows": windows(w{"kind": "tumbling"})}), "windows[0].size", "/windows/0"},
		{"hopping without advance", with(map[string]any{"windows": windows(w{"kind": "hopping", "size": "5m"})}), "windows[0].advance", "/windows/0"},
		{"tumbling with gap", with(map[string]any{"windows": windows(w{"kind": "tumbling", "size": "1m", "gap": "5m"})}), "windows[0].gap", "/windows/0/gap"},
		{"session with size", with(map[string]any{"windows": windows(w{"kind": "session", "gap": "5m", "size": "1m"})}), "windows[0].size", "/windows/0/size"},
		{"duration not a duration", with(map[string]any{"windows": windows(w{"kind": "tumbling", "size": "5 minutes"})}), "windows[0].size", "/windows/0/size"},
		{"duration a number", with(map[string]any{"outOfOrderness": 5}), "outOfOrderness", "/outOfOrderness"},
		{"negative duration", with(map[string]any{"idleTimeout": "-30s"}), "idleTimeout", "/idleTimeout"},
		{"aggregate enum", with(map[string]any{"aggregates": []any{"count", "median"}}), "aggregates[1]", "/aggregates/1"},
		{"aggregate twice", with(map[string]any{"aggregates": []any{"count", "count"}, "value": nil, "distinct": nil}), "aggregates[1]", "/aggregates"},
		{"aggregates a string", with(map[string]any{"aggregates": "count"}), "aggregates", "/aggregates"},
		{"aggregates empty", with(map[string]any{"aggregates": []any{}, "value": nil, "distinct": nil}), "aggregates", "/aggregates"},
		{"quantiles empty", with(map[string]any{"quantiles": []any{}}), "quantiles", "/quantiles"},
		{"late policy enum", with(map[string]any{"latePolicy": "later"}), "latePolicy", "/latePolicy"},
		{"correct without allowedLateness", with(map[string]any{"allowedLateness": nil}), "allowedLateness", "/"},
		{"drop with allowedLateness", with(map[string]any{"latePolicy": "drop"}), "allowedLateness", "/allowedLateness"},
		{"sum without value", with(map[string]any{"value": nil}), "value", "/"},
		{"value without a value aggregate", with(map[string]any{"aggregates": []any{"count", "distinct"}}), "value", "/value"},
		{"value not in data", with(map[string]any{"value": "key"}), "value", "/value"},
		{"key a bad path", with(map[string]any{"key": "user.id"}), "key", "/key"},
		{"key by id", with(map[string]any{"key": "id"}), "key", "/key"},
		{"distinct without the aggregate", with(map[string]any{"aggregates": []any{"count", "sum"}}), "distinct", "/distinct"},
		{"quantiles without the aggregate", with(map[string]any{"aggregates": []any{"count", "sum", "distinct"}, "quantiles": []any{0.5}}), "quantiles", "/quantiles"},
		{"quantile out of range", with(map[string]any{"quantiles": []any{0.5, 1}}), "quantiles[1]", "/quantiles/1"},
		{"distinctPrecision range", with(map[string]any{"distinctPrecision": 3}), "distinctPrecision", "/distinctPrecision"},
		{"distinctPrecision type", with(map[string]any{"distinctPrecision": "12"}), "distinctPrecision", "/distinctPrecision"},
		{"parallelizationFactor range", with(map[string]any{"parallelizationFactor": 11}), "parallelizationFactor", "/parallelizationFactor"},
		{"parallelizationFactor fraction", with(map[string]any{"parallelizationFactor": 1.5}), "parallelizationFactor", "/parallelizationFactor"},
		{"outputs both off", with(map[string]any{"outputs": w{"table": false, "stream": false}}), "outputs", "/outputs"},
		{"outputs table a string", with(map[string]any{"outputs": w{"table": "yes"}}), "outputs.table", "/outputs/table"},
		{"eventTypes empty string", with(map[string]any{"eventTypes": []any{"a", ""}}), "eventTypes[1]", "/eventTypes/1"},
		{"eventTypes twice", with(map[string]any{"eventTypes": []any{"a", "a"}}), "eventTypes[1]", "/eventTypes"},
		{"partitionKeyIsGroupingKey a string", with(map[string]any{"partitionKeyIsGroupingKey": "true"}), "partitionKeyIsGroupingKey", "/partitionKeyIsGroupingKey"},
		{"not an object", []byte(`["name"]`), "", "/"},
		{"kind enum", with(map[string]any{"kind": "joins"}), "kind", "/kind"},
		{"join without within", []byte(`{"kind": "join", "name": "j", "left": "search", "right": "click"}`), "within", "/"},
		{"join unknown field", []byte(`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "1m", "windows": []}`), "windows", "/"},
		{"join type enum", []byte(`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "1m", "joinType": "cross"}`), "joinType", "/joinType"},
		{"join key", []byte(`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "1m", "key": "type"}`), "key", "/key"},
		{"join duration", []byte(`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "a minute"}`), "within", "/within"},
		{"join empty left", []byte(`{"kind": "join", "name": "j", "left": "", "right": "click", "within": "1m"}`), "left", "/left"},
		{"cep unknown field", []byte(`{"kind": "cep", "name": "d", "within": "1m"}`), "within", "/"},
		{"cep name pattern", []byte(`{"kind": "cep", "name": "d d"}`), "name", "/name"},
		{"cep duration type", []byte(`{"kind": "cep", "name": "d", "outOfOrderness": 2}`), "outOfOrderness", "/outOfOrderness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseAny(tc.doc)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Parse(%s) = %v, want a ConfigError on %q (the case must be one Parse refuses)", tc.doc, err, tc.field)
			}
			verr := validate(s, tc.doc)
			var ve *jsonschema.ValidationError
			if !errors.As(verr, &ve) {
				t.Fatalf("the schema accepts %s, which Parse refuses: %v", tc.doc, err)
			}
			if !refusedAt(ve, tc.where) {
				t.Errorf("the schema refuses it, but not at %s:\n%v", tc.where, verr)
			}
		})
	}
}

// refusedAt reports whether e or one of its causes is at location where
// ("/windows/0/kind"; "/" is the document).
func refusedAt(e *jsonschema.ValidationError, where string) bool {
	if "/"+strings.Join(e.InstanceLocation, "/") == where {
		return true
	}
	for _, c := range e.Causes {
		if refusedAt(c, where) {
			return true
		}
	}
	return false
}

// TestNullAndEmptyAreNotDefaults: a field given as null, or a string field
// given as "", is refused by Parse naming it, as the schema refuses it.
// Neither is read as the field's default: a file is read one way, and an
// editor that marks "outOfOrderness": "" wrong must not see it deployed.
// ($schema, which the schema takes as any string, may be "".)
func TestNullAndEmptyAreNotDefaults(t *testing.T) {
	s := compiled(t)
	docs := []struct {
		doc    string
		fields []fieldSpec
		under  string // the object the fields are members of: "", "windows[0]", "outputs"
	}{
		{string(with(nil)), topSpecFields, ""},
		{string(with(w{"windows": windows(w{"kind": "hopping", "size": "5m", "advance": "1m", "offset": "1m"})})), windowSpecFields, "windows[0]"},
		{string(with(nil)), outputSpecFields, "outputs"},
		{`{"kind": "join", "name": "j", "left": "search", "right": "click", "within": "30s"}`, joinSpecFields, ""},
		{`{"kind": "cep", "name": "detect"}`, cepSpecFields, ""},
	}
	n := 0
	for _, d := range docs {
		if err := parseAny([]byte(d.doc)); err != nil {
			t.Fatalf("base %s: %v", d.doc, err)
		}
		fields := d.fields
		if d.under == "" {
			fields = append(slices.Clone(fields), fieldSpec{name: schemaField, typ: tString})
		}
		for _, f := range fields {
			for _, v := range []string{`null`, `""`} {
				if v == `""` && (f.typ != tString || f.name == schemaField) {
					continue
				}
				doc := setMember(t, []byte(d.doc), d.under, f.name, v)
				path := f.name
				if d.under != "" {
					path = d.under + "." + f.name
				}
				n++
				t.Run(path+"="+v, func(t *testing.T) {
					err := parseAny(doc)
					if err == nil || !strings.Contains(err.Error(), path+": is ") {
						t.Errorf("Parse(%s) = %v, want it refused naming %s", doc, err, path)
					}
					if validate(s, doc) == nil {
						t.Errorf("the schema accepts %s", doc)
					}
				})
			}
		}
	}
	if n < 60 {
		t.Errorf("only %d cases: the spec tables were not walked", n)
	}
}

// setMember sets the member name of the object at under ("" the document,
// "windows[0]", "outputs") to the JSON text raw.
func setMember(t *testing.T, doc []byte, under, name, raw string) []byte {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	obj := top
	switch under {
	case "":
	case "windows[0]":
		obj = top["windows"].([]any)[0].(map[string]any)
	default:
		obj = top[under].(map[string]any)
	}
	obj[name] = json.RawMessage(raw)
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
