package fntest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Package is the import path of the test function.
const Package = "github.com/tributary-dev/tributary/internal/faultyfn"

// Build compiles faultyfn for this machine with -tags lambda.norpc into
// dir/bootstrap and returns that path. It is meant for TestMain, hence no
// *testing.T.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fntest: building %s: %w\n%s", Package, err, b)
	}
	return out, nil
}
