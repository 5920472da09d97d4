package localdeploy_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/cli"
	"github.com/tributary-dev/tributary/internal/localdeploy"
)

// writeTemplate writes a template whose aggregate functions run the given
// pipeline configurations (by logical id), next to a function that is not
// an aggregate.
func writeTemplate(t *testing.T, configs map[string]string) string {
	t.Helper()
	res := map[string]any{
		"WorkerFn1234": map[string]any{"Type": "AWS::Lambda::Function",
			"Metadata":   map[string]any{"tributary:function": "worker"},
			"Properties": map[string]any{"Runtime": "provided.al2023", "Handler": "bootstrap"}},
	}
	for id, cfg := range configs {
		res[id] = map[string]any{"Type": "AWS::Lambda::Function",
			"Metadata": map[string]any{"tributary:function": "aggregate"},
			"Properties": map[string]any{"Runtime": "provided.al2023", "Handler": "bootstrap",
				"Environment": map[string]any{"Variables": map[string]any{"PIPELINE_CONFIG": cfg}}}}
	}
	b, err := json.Marshal(map[string]any{"Resources": res})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stack.template.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const pipelineFile = `{"name":%q,"eventTypes":["pageview"],"key":"key","value":"data.ms","windows":[{"kind":"tumbling","size":"1m"}],"aggregates":["count","sum"]}`

func config(name string) string { return strings.Replace(pipelineFile, "%q", `"`+name+`"`, 1) }

func TestPipelines(t *testing.T) {
	tests := []struct {
		name    string
		configs map[string]string
		want    []string
		wantErr string // in the usage error of -template, "" for none
	}{
		{name: "sorted by pipeline name, other functions left out",
			configs: map[string]string{"AggA1": config("pageviews"), "AggB2": config("checkouts")},
			want:    []string{"checkouts", "pageviews"}},
		{name: "none", configs: map[string]string{}},
		{name: "a configuration that does not parse is named; the rest come back",
			configs: map[string]string{"AggA1": config("pageviews"), "AggBroken9": `{"name":"x","windows":[]`},
			want:    []string{"pageviews"}, wantErr: "AggBroken9's PIPELINE_CONFIG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemplate(t, tc.configs)
			d, err := localdeploy.Plan(path, "Tributary")
			if err != nil {
				t.Fatal(err)
			}
			got, err := localdeploy.Pipelines(path, d)
			var names []string
			for _, p := range got {
				names = append(names, p.Config.Name)
				if p.Function.Binary != "aggregate" {
					t.Errorf("%s runs %s", p.Config.Name, p.Function.Binary)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("pipelines %v, want %v", names, tc.want)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var u *cli.UsageError
			if !errors.As(err, &u) || u.Flag != "template" || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want a usage error of -template naming %s and %q", err, path, tc.wantErr)
			}
		})
	}
}

func TestPlanNamesTheFlagAtFault(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.template.json")
	_, err := localdeploy.Plan(missing, "Tributary")
	var u *cli.UsageError
	if !errors.As(err, &u) || u.Flag != "template" || !strings.Contains(err.Error(), "make synth-local writes it") {
		t.Errorf("missing template: %v, want a usage error of -template pointing at make synth-local", err)
	}
	_, err = localdeploy.Plan(writeTemplate(t, nil), "not a stack name!")
	if !errors.As(err, &u) || u.Flag != "stack" {
		t.Errorf("bad stack: %v, want a usage error of -stack", err)
	}
}
