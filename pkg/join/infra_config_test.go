package join_test

import (
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// The CDK app (its own module) deploys each join file of pipelines/ (kind
// "join") and passes it to its join function as JOIN_CONFIG: a config the
// function would refuse at init fails here, in make test.
func TestRepoJoinFilesParse(t *testing.T) {
	files, err := pipeline.LoadDir(filepath.Join("..", "..", "pipelines"))
	if err != nil {
		t.Fatal(err)
	}
	joins := pipeline.OfKind(files, pipeline.KindJoin)
	if len(joins) == 0 {
		t.Fatal("pipelines/ holds no join file (kind \"join\"): the demo's join is declared there")
	}
	for _, f := range joins {
		c, err := join.Parse(f.JSON)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if c.Name != f.Name {
			t.Errorf("%s: name %q, the file says %q", f.Path, c.Name, f.Name)
		}
		if f.Name == "search-click" && (c.Left != "search" || c.Right != "click" || c.RateWindow == 0) {
			t.Errorf("%s joins %s and %s with rate window %s; the demo expects search, click and a rate", f.Path, c.Left, c.Right, c.RateWindow)
		}
	}
}
