package cep

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// Each CEP file of pipelines/ is a detect function's CEP_CONFIG: a config
// it would refuse at init fails here, in make test.
func TestRepoCEPFilesParse(t *testing.T) {
	files, err := pipeline.LoadDir(filepath.Join("..", "..", "pipelines"))
	if err != nil {
		t.Fatal(err)
	}
	ceps := pipeline.OfKind(files, pipeline.KindCEP)
	if len(ceps) == 0 {
		t.Fatal("pipelines/ holds no CEP file (kind \"cep\"): the stack's detection is declared there")
	}
	for _, f := range ceps {
		c, err := ParseConfig(f.JSON)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
		} else if c.Name != f.Name {
			t.Errorf("%s: name %q, the file says %q", f.Path, c.Name, f.Name)
		}
	}
}

// TestConfigFieldsAreTheSchemas: ParseConfig reads the fields the JSON
// Schema declares for a CEP file, and no others.
func TestConfigFieldsAreTheSchemas(t *testing.T) {
	var got []string
	typ := reflect.TypeOf(configJSON{})
	for i := range typ.NumField() {
		got = append(got, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	want := pipeline.FieldNames(pipeline.KindCEP)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ParseConfig reads %v, the schema's CEP file has %v", got, want)
	}
}

func TestParseConfigRefusesNamingTheField(t *testing.T) {
	for doc, field := range map[string]string{
		`{"name":""}`: "name", `{"name":"d","outOfOrderness":"2h"}`: "outOfOrderness", `{"name":"d","idleTimeout":"0s"}`: "idleTimeout",
		`{"name":"d","dedupeHorizon":"1.5s"}`: "dedupeHorizon", `{"name":"d","lateness":"1s"}`: "lateness",
		`{"kind":"join","name":"d"}`: "kind",
	} {
		_, err := ParseConfig([]byte(doc))
		ce, ok := err.(*pipeline.ConfigError)
		if !ok || ce.Field != field {
			t.Errorf("%s: %v, want field %s", doc, err, field)
		}
	}
}

// TestConfigErrorsAreBounded: a CEP file may hold 64 KB in one value; the
// error repeats its start and what is wanted, not the whole of it.
func TestConfigErrorsAreBounded(t *testing.T) {
	big := strings.Repeat("x", 60_000)
	for _, doc := range []string{`{"name":"` + big + `"}`, `{"name":"d","idleTimeout":"` + big + `"}`, `{"name":"d","` + big + `":1}`} {
		_, err := ParseConfig([]byte(doc))
		if err == nil || len(err.Error()) > 1500 {
			t.Errorf("error of %d bytes: %.200s…", len(fmt.Sprint(err)), err)
		}
	}
}
