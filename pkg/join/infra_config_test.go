package join_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/pkg/join"
)

// The CDK app (its own module) declares the deployed join in
// infra/tributary/join.json and passes it to the join function as JOIN_CONFIG: a
// config the function would refuse at init fails here, in make test.
func TestInfraJoinConfigParses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "infra", "tributary", "join.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := join.Parse(raw)
	if err != nil {
		t.Fatalf("infra/tributary/join.json: %v", err)
	}
	if c.Left != "search" || c.Right != "click" || c.RateWindow == 0 {
		t.Errorf("infra/tributary/join.json joins %s and %s with rate window %s; the demo expects search, click and a rate", c.Left, c.Right, c.RateWindow)
	}
}
