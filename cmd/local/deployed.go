package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// keepDeployedTemplate writes b, the template as read before it was
// deployed, to dst and returns what removes the copy again, when the run
// that deployed it stops.
func keepDeployedTemplate(b []byte, dst string) (remove func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fmt.Errorf("keeping a copy of the deployed template: %w", err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, fmt.Errorf("keeping a copy of the deployed template: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("keeping a copy of the deployed template: %w", err)
	}
	return func() {
		_ = os.Remove(dst)
		_ = os.Remove(filepath.Dir(dst)) // only when no other stack's copy is left
	}, nil
}
