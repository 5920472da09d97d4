package cep

import (
	"os"
	"path/filepath"
	"testing"
)

// infra/tributary/cep.json is the detect function's CEP_CONFIG: a config it would
// refuse at init fails here, in make test.
func TestInfraCEPConfigParses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "infra", "tributary", "cep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfig(raw); err != nil {
		t.Fatalf("infra/tributary/cep.json: %v", err)
	}
}

func TestParseConfigRefusesNamingTheField(t *testing.T) {
	for doc, field := range map[string]string{
		`{"name":""}`: "name", `{"name":"d","outOfOrderness":"2h"}`: "outOfOrderness", `{"name":"d","idleTimeout":"0s"}`: "idleTimeout",
		`{"name":"d","dedupeHorizon":"1.5s"}`: "dedupeHorizon", `{"name":"d","lateness":"1s"}`: "lateness",
	} {
		_, err := ParseConfig([]byte(doc))
		ce, ok := err.(*ConfigError)
		if !ok || ce.Field != field {
			t.Errorf("%s: %v, want field %s", doc, err, field)
		}
	}
}
