package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mistakesOf is every *ConfigError err holds, in its order.
func mistakesOf(err error) []*ConfigError {
	var errs []error
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		errs = u.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	var out []*ConfigError
	for _, e := range errs {
		var ce *ConfigError
		if errors.As(e, &ce) {
			out = append(out, ce)
		}
	}
	return out
}

func fieldsOf(errs []*ConfigError) []string {
	out := make([]string, len(errs))
	for i, ce := range errs {
		out[i] = ce.Field
	}
	return out
}

// TestParseReportsEveryMistake: a pipeline file with three mistakes used
// to be refused for its first only, and its author met the next on each of
// three runs of make local or cdk synth. Every independent mistake is
// reported at once, in the document's order, and a mistake that only
// follows from another (a field left unset by a misspelling, a duration
// checked against one that did not parse) is not reported beside its
// cause.
func TestParseReportsEveryMistake(t *testing.T) {
	const tumbling = `{"kind": "tumbling", "size": "1m"}`
	tests := []struct {
		name string
		doc  string
		want []string // the fields named, in order
	}{
		{"three independent mistakes, in the document's order", `{
			"name": "orders",
			"windows": [` + tumbling + `, {"kind": "hopping", "size": "2m", "advance": "45s"}],
			"outOfOrderness": "5x",
			"dedupHorizon": "1h"}`,
			[]string{"windows[1].advance", "outOfOrderness", "dedupHorizon"}},
		{"a mistake in each of two windows and in outputs", `{
			"name": "orders", "partitionKeyIsGroupingKey": true,
			"windows": [{"kind": "tumbling", "size": "1x"}, {"kind": "session", "gap": "-1s"}],
			"outputs": {"table": false, "stream": false}}`,
			[]string{"windows[0].size", "windows[1].gap", "outputs"}},
		{"every unknown field of an object, in its order", `{
			"name": "orders", "zeta": 1, "alpha": 2,
			"windows": [{"kind": "tumbling", "size": "1m", "sise": "1m", "ofset": "1s"}]}`,
			[]string{"zeta", "alpha", "windows[0].sise", "windows[0].ofset"}},
		{"a field missing and another wrong: the missing one last", `{
			"windows": [` + tumbling + `], "idleTimeout": "0s"}`,
			[]string{"idleTimeout", "name"}},

		// Dependent mistakes: only the cause.
		{"a value that does not parse is not also required by sum", `{
			"name": "orders", "aggregates": ["sum"], "value": 5, "windows": [` + tumbling + `]}`,
			[]string{"value"}},
		{"a misspelt name is not also a missing one", `{"nmae": "orders", "windows": [` + tumbling + `]}`,
			[]string{"nmae"}},
		{"a misspelt aggregates does not leave value unused", `{
			"name": "orders", "agregates": ["sum"], "value": "data.total", "windows": [` + tumbling + `]}`,
			[]string{"agregates"}},
		{"an unknown aggregate does not leave value unused", `{
			"name": "orders", "aggregates": ["sum", "median"], "value": "data.total", "windows": [` + tumbling + `]}`,
			[]string{"aggregates[1]"}},
		{"a misspelt window size is not also a missing one", `{
			"name": "orders", "windows": [{"kind": "tumbling", "szie": "1m"}]}`,
			[]string{"windows[0].szie"}},
		{"an advance is not checked against a size that does not parse", `{
			"name": "orders", "windows": [{"kind": "hopping", "size": "2x", "advance": "45s"}]}`,
			[]string{"windows[0].size"}},
		{"a window of no kind is not checked further", `{
			"name": "orders", "windows": [{"kind": "rolling", "size": "2x", "gap": "1s"}]}`,
			[]string{"windows[0].kind"}},
		{"a late policy that does not parse leaves allowedLateness alone", `{
			"name": "orders", "latePolicy": "corect", "allowedLateness": "1h", "windows": [` + tumbling + `]}`,
			[]string{"latePolicy"}},
		{"a misspelt windows is not also missing windows", `{"name": "orders", "windwos": [` + tumbling + `]}`,
			[]string{"windwos"}},
		{"retention is not checked against an allowedLateness that does not parse", `{
			"name": "orders", "latePolicy": "correct", "allowedLateness": "2d", "retention": "24h", "windows": [` + tumbling + `]}`,
			[]string{"allowedLateness"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse accepted %s: %+v", tt.doc, c)
			}
			got := mistakesOf(err)
			if fmt.Sprint(fieldsOf(got)) != fmt.Sprint(tt.want) {
				t.Fatalf("Parse named %q, want %q; error:\n%v", fieldsOf(got), tt.want, err)
			}
			var first *ConfigError
			if !errors.As(err, &first) || first != got[0] {
				t.Errorf("errors.As finds %v, want the first, %v", first, got[0])
			}
			lines := strings.Split(err.Error(), "\n")
			if len(tt.want) == 1 {
				if len(lines) != 1 || lines[0] != got[0].Field+": "+got[0].Reason {
					t.Errorf("one mistake reads %q, want %q", err, got[0].Field+": "+got[0].Reason)
				}
				return
			}
			if want := fmt.Sprintf("%d mistakes:", len(tt.want)); lines[0] != want || len(lines) != len(tt.want)+1 {
				t.Fatalf("error reads\n%v\nwant %q and one line a mistake", err, want)
			}
			for i, ce := range got {
				if lines[i+1] != "  "+ce.Field+": "+ce.Reason {
					t.Errorf("line %d = %q, want the mistake on %s", i+1, lines[i+1], ce.Field)
				}
			}
		})
	}
}

// TestParseBoundsItsMistakes: a document of 25 mistakes lists 20 and
// counts the rest; the error stays readable and bounded whatever the file.
func TestParseBoundsItsMistakes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"name": "orders", "windows": [{"kind": "tumbling", "size": "1m"}]`)
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&b, `, "extra%02d": true`, i)
	}
	b.WriteString("}")
	_, err := Parse([]byte(b.String()))
	got := mistakesOf(err)
	if len(got) != maxMistakes || got[0].Field != "extra01" || got[maxMistakes-1].Field != "extra20" {
		t.Fatalf("Parse kept %q, want extra01 to extra20", fieldsOf(got))
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxMistakes+2 || lines[0] != "25 mistakes:" || lines[len(lines)-1] != "  … and 5 more" {
		t.Errorf("error reads\n%v\nwant 25 mistakes, 20 listed and 5 more", err)
	}
}

// TestFileReportsEveryMistake: NewFile names the file once, above the
// mistakes, so that each reads under it wherever the error is printed
// (cdk synth's "tributary infra: pipelines/orders.json: 3 mistakes:"), and
// a join or CEP file's mistakes are all reported as an aggregation's are,
// with what NewFile checks past the parse: a name that is not the file's,
// a session window without partitionKeyIsGroupingKey, used to be reported
// only once every other mistake was fixed.
func TestFileReportsEveryMistake(t *testing.T) {
	tests := []struct {
		path, doc string
		want      []string
	}{
		{"pipelines/orders.json", `{"name": "orders", "windows": [{"kind": "hopping", "size": "2m", "advance": "45s"}], "outOfOrderness": "5x", "dedupHorizon": "1h"}`,
			[]string{"windows[0].advance", "outOfOrderness", "dedupHorizon"}},
		{"pipelines/sc.json", `{"kind": "join", "name": "sc", "left": "", "rigth": "click", "within": "30x"}`,
			[]string{"left", "rigth", "within"}},
		{"pipelines/detect.json", `{"kind": "cep", "name": "detect", "outOfOrderness": 5, "idleTimeout": "1x"}`,
			[]string{"outOfOrderness", "idleTimeout"}},
		// What NewFile checks past the parse (the name is the file's, a
		// session window's records on one shard) is listed with it.
		{"pipelines/orders.json", `{"name": "order", "windows": [{"kind": "tumbling", "size": "1x"}, {"kind": "session", "gap": "30m"}], "outOfOrderness": "5x"}`,
			[]string{"name", "windows[0].size", "windows[1].kind", "outOfOrderness"}},
		{"pipelines/sc.json", `{"kind": "join", "name": "search-click", "left": "search", "right": "click", "within": "30x"}`,
			[]string{"name", "within"}},
	}
	for _, tt := range tests {
		_, err := NewFile(tt.path, []byte(tt.doc))
		got := mistakesOf(errors.Unwrap(err))
		if fmt.Sprint(fieldsOf(got)) != fmt.Sprint(tt.want) {
			t.Errorf("NewFile(%s) named %q, want %q; error:\n%v", tt.path, fieldsOf(got), tt.want, err)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if want := fmt.Sprintf("%s: %d mistakes:", tt.path, len(tt.want)); lines[0] != want || len(lines) != len(tt.want)+1 {
			t.Errorf("NewFile(%s) reads\n%v\nwant %q, then one line a mistake", tt.path, err, want)
			continue
		}
		for i, f := range tt.want {
			if !strings.HasPrefix(lines[i+1], "  "+f+": ") {
				t.Errorf("NewFile(%s) line %d = %q, want it on %s", tt.path, i+1, lines[i+1], f)
			}
		}
	}
}
