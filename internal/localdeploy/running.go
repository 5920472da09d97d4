package localdeploy

import (
	"os"
	"path/filepath"
	"strings"
)

// SynthesizedTemplate is where the CDK app synthesizes the stack's
// template (make synth-local, cdk deploy), relative to the repository
// root: what make local-up deploys when it starts, and what cdk deploy
// deployed last.
const SynthesizedTemplate = "infra/cdk.out/Tributary.template.json"

// DefaultStack is the stack name the local runner deploys under unless
// given another (STACK=, -stack).
const DefaultStack = "Tributary"

// deployedDir is where a running make local-up keeps a copy of the
// template it deployed, one file per stand-in address and stack:
// .build/up/<host>-<port>/<stack>.template.json. make results, tail,
// setaside, setaside-show, putback and logs read it while it is there (the
// Makefile's RUNNING_TEMPLATE), and replay checks its -pipeline files
// against it, so that a synth while local-up runs (make invoke, a changed
// pipeline file) does not make them read a template the running stack
// was not deployed from.
const deployedDir = ".build/up"

// DeployedTemplatePath is the copy's path under root for the stack
// deployed onto endpoint (http://127.0.0.1:4566 or 127.0.0.1:4566);
// localhost is written 127.0.0.1, as the Makefile looks it up.
func DeployedTemplatePath(root, endpoint, stack string) string {
	addr := strings.TrimPrefix(endpoint, "http://")
	addr = strings.Replace(addr, "localhost:", "127.0.0.1:", 1)
	return filepath.Join(root, deployedDir, strings.ReplaceAll(addr, ":", "-"), stack+".template.json")
}

// RunningTemplate is the template the stack runs, as the Makefile's
// RUNNING_TEMPLATE finds it for make results: with endpoint (the stand-in's
// AWS_ENDPOINT_URL) the copy a running make local-up of stack keeps there,
// when there is one; else SynthesizedTemplate. Both are under root.
func RunningTemplate(root, endpoint, stack string) string {
	if endpoint != "" {
		if p := DeployedTemplatePath(root, endpoint, stack); fileExists(p) {
			return p
		}
	}
	return filepath.Join(root, SynthesizedTemplate)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
