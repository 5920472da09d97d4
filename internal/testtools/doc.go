// Package testtools decides what a test does when a program it needs is
// missing (python3 for the moto stand-in, node for the Powertools peer,
// curl and openssl for the documented recipes, chromium for the dashboard
// page): on a developer's machine it skips, saying what to install; where
// every test must run (.ci/run sets TRIBUTARY_REQUIRE_TOOLS after make
// deps has installed them all) it fails, so no test is skipped silently in
// CI.
package testtools
