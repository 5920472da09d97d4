package pipeline_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/pkg/aggregate"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// The stack deploys every file in pipelines/ (TestRepoPipelines loads
// them) and hands each to its aggregate and ticker functions as
// PIPELINE_CONFIG. A config those functions would refuse at init must fail
// here, in `make test`, not after a deploy.

// TestSynthesizedPipelineConfigParses checks what the stack actually put in
// PIPELINE_CONFIG (the file goes through a Go struct on the way) in the
// template `cdk synth` last wrote; `make test` synthesizes first.
func TestSynthesizedPipelineConfigParses(t *testing.T) {
	path := filepath.Join("..", "..", "infra", "cdk.out", "Tributary.template.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no synthesized template at %s: run `make synth` first (`make test` does): %v", path, err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				Environment struct {
					Variables map[string]any
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := 0
	for id, r := range tmpl.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		v, ok := r.Properties.Environment.Variables[pipeline.EnvVar]
		if !ok {
			continue
		}
		n++
		s, ok := v.(string)
		if !ok {
			t.Errorf("%s: %s is %T, want a literal JSON string", id, pipeline.EnvVar, v)
			continue
		}
		checkDeployable(t, id+" "+pipeline.EnvVar, []byte(s))
	}
	if n == 0 {
		t.Errorf("%s: no function has %s", path, pipeline.EnvVar)
	}
}

func checkDeployable(t *testing.T, what string, doc []byte) {
	t.Helper()
	c, err := pipeline.Parse(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := aggregate.CheckSupported(c); err != nil {
		t.Errorf("%s: the aggregate function refuses it: %v", what, err)
	}
}
