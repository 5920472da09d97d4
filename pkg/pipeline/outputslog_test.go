package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Each case is a document whose outputs member Parse refuses ("at least
// one of table and stream"; log holds no result): the schema, generated
// from the same tables, refuses it too, at /outputs (as
// TestSchemaRefusesWhatParseRefuses promises: an editor does not mark as
// valid a file the deploy refuses).
func TestSchemaRefusesOutputsWithOnlyLog(t *testing.T) {
	s := compiled(t)
	for _, tc := range []struct {
		name    string
		outputs w
	}{
		{"log alone", w{"log": true}},
		{"table and stream off, log on", w{"table": false, "stream": false, "log": true}},
		{"table off, log on", w{"table": false, "log": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := with(map[string]any{"outputs": tc.outputs})
			_, err := Parse(doc)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "outputs" {
				t.Fatalf("Parse(%s) = %v, want a ConfigError on outputs", doc, err)
			}
			verr := validate(s, doc)
			var ve *jsonschema.ValidationError
			if !errors.As(verr, &ve) {
				t.Fatalf("the schema accepts %s, which Parse refuses: %v", doc, err)
			}
			if !refusedAt(ve, "/outputs") {
				t.Errorf("the schema refuses it, but not at /outputs:\n%v", verr)
			}
		})
	}
}

// outputs.log is read as strictly as table and stream: null, a wrong type,
// a case variant, a near name, and a duplicate are each refused naming
// outputs.log (or the field given), as the schema refuses them.
func TestOutputsLogIsReadStrictly(t *testing.T) {
	s := compiled(t)
	base := `{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}], "outputs": `
	for _, tc := range []struct {
		name, outputs, want string
	}{
		{"null", `{"table": true, "log": null}`, "outputs.log: is null"},
		{"string", `{"table": true, "log": "false"}`, "outputs.log: must be true or false, not a string"},
		{"number", `{"table": true, "log": 0}`, "outputs.log: must be true or false, not a number"},
		{"case variant", `{"table": true, "Log": false}`, "outputs.Log: unknown field"},
		{"near name", `{"table": true, "logs": false}`, "outputs.logs: unknown field"},
		{"duplicate", `{"table": true, "log": false, "log": true}`, "log"},
		{"duplicate same value", `{"table": true, "log": false, "log": false}`, "log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(base + tc.outputs + "}")
			_, err := Parse(doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s) = %v, want it refused with %q", doc, err, tc.want)
			}
			if !strings.HasPrefix(tc.name, "duplicate") && validate(s, doc) == nil {
				t.Errorf("the schema accepts %s", doc)
			}
		})
	}
}

// outputs.log says whether each result is a line in the function's log:
// on unless the file sets it false, and only the value given.
func TestOutputsLog(t *testing.T) {
	for _, tt := range []struct {
		name    string
		outputs string // the outputs member, "" for none
		want    Outputs
	}{
		{"outputs left out", "", Outputs{Table: true, Log: true}},
		{"log left out", `{"stream": true}`, Outputs{Stream: true, Log: true}},
		{"log off", `{"table": true, "stream": true, "log": false}`, Outputs{Table: true, Stream: true}},
		{"log on", `{"stream": true, "log": true}`, Outputs{Stream: true, Log: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"name": "n", "windows": [{"kind": "tumbling", "size": "1m"}]`
			if tt.outputs != "" {
				doc += `, "outputs": ` + tt.outputs
			}
			c, err := Parse([]byte(doc + "}"))
			if err != nil {
				t.Fatal(err)
			}
			if c.Outputs != tt.want {
				t.Errorf("outputs %+v, want %+v", c.Outputs, tt.want)
			}
		})
	}
}
