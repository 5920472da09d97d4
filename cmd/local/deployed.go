package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// deployedDir is where a running make local-up keeps a copy of the
// template it deployed, one file per stand-in address and stack:
// .build/up/<host>-<port>/<stack>.template.json. make results, tail,
// setaside, setaside-show, putback and logs read it while it is there (the
// Makefile's RUNNING_TEMPLATE), so that a synth while local-up runs (make
// invoke, a changed pipeline file) does not make them read a template
// the running stack was not deployed from.
const deployedDir = ".build/up"

// deployedTemplatePath is the copy's path under root for the stack
// deployed onto endpoint (http://127.0.0.1:4566 or 127.0.0.1:4566);
// localhost is written 127.0.0.1, as the Makefile looks it up.
func deployedTemplatePath(root, endpoint, stack string) string {
	addr := strings.TrimPrefix(endpoint, "http://")
	addr = strings.Replace(addr, "localhost:", "127.0.0.1:", 1)
	return filepath.Join(root, deployedDir, strings.ReplaceAll(addr, ":", "-"), stack+".template.json")
}

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
