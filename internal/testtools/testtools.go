// Package testtools decides what a test does when a program it needs is
// missing (python3 for the moto stand-in, node for the Powertools peer,
// curl and openssl for the documented recipes, chromium for the dashboard
// page): on a developer's machine it skips, saying what to install; where
// every test must run (.ci/run sets TRIBUTARY_REQUIRE_TOOLS after make
// deps has installed them all) it fails, so no test is skipped silently in
// CI.
package testtools

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns a missing tool into a
// failure.
const RequireEnv = "TRIBUTARY_REQUIRE_TOOLS"

// Need skips t (or fails it, under RequireEnv) unless each of tools is on
// PATH; why says what needs them.
func Need(t testing.TB, why string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, tool+" is not installed: "+why)
			return
		}
	}
}

// Missing skips t with msg, or fails it when RequireEnv is set.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("%s; %s is set (.ci/run: every test must run)", msg, RequireEnv)
		return
	}
	t.Skip(msg)
}
