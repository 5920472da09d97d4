package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/emulator/template"
)

// TestCheckFunction: CheckFunction takes every name the Invoke API takes
// for a function of the template (the runner's name, the logical id, the
// physical name and the ARN the deploy gives it), reading the template
// only, and refuses any other as the API would, listing the functions.
func TestCheckFunction(t *testing.T) {
	const path = "../template/testdata/Tributary.template.json"
	tpl, err := template.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := template.Plan(tpl, template.ProvisionOptions{Stack: "Tributary"})
	if err != nil {
		t.Fatal(err)
	}
	var ingest template.FunctionSpec
	for _, f := range d.FunctionNames() {
		if f.Binary == "ingest" {
			ingest = f
		}
	}
	if ingest.FunctionName == "" || ingest.ARN == "" {
		t.Fatalf("the template's ingest function: %+v, want its physical name and ARN planned", ingest)
	}
	for _, tc := range []struct{ fn, want string }{
		{"ingest", ""},
		{"aggregate", ""},
		{ingest.LogicalID, ""},
		{ingest.FunctionName, ""},
		{ingest.ARN, ""},
		{ingest.ARN + ":$LATEST", ""},
		{"nope", `no function "nope" in ` + path + `; the functions are: aggregate, ingest, quarantine (or their`},
		{"ingest:prod", "only $LATEST runs locally"},
	} {
		err := CheckFunction(path, "Tributary", tc.fn)
		var nf *NoFunctionError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckFunction(%q) = %v, want it taken", tc.fn, err)
		case tc.want != "" && (!errors.As(err, &nf) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckFunction(%q) = %T %v, want a *NoFunctionError saying %q", tc.fn, err, err, tc.want)
		}
	}
	if err := CheckFunction("no-such.template.json", "Tributary", "ingest"); err == nil {
		t.Error("CheckFunction of a template that is not there: nil, want its error")
	}
}
