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
