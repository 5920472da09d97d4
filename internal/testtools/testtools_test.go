package testtools

import (
	"testing"
)

// fakeT records whether a test was skipped or failed.
type fakeT struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Skip(...any)           { f.skipped = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

// A missing tool skips on a developer's machine and fails in CI; a present
// one does neither.
func TestNeed(t *testing.T) {
	for _, tt := range []struct {
		name            string
		require         string
		tool            string
		skipped, failed bool
	}{
		{"missing, developer", "", "tributary-no-such-tool", true, false},
		{"missing, CI", "1", "tributary-no-such-tool", false, true},
		{"present, CI", "1", "go", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tt.require)
			f := &fakeT{TB: t}
			Need(f, "a test needs it", tt.tool)
			if f.skipped != tt.skipped || f.failed != tt.failed {
				t.Errorf("skipped %v failed %v, want %v %v", f.skipped, f.failed, tt.skipped, tt.failed)
			}
		})
	}
}
