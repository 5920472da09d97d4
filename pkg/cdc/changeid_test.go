package cdc

import (
	"strings"
	"testing"
)

// IsChangeID takes the ids changeID gives, also hashed ones, and nothing a
// producer could mistake for them: enrich sets aside a changelog record
// whose id is not the one cdc gives its key and version.
func TestIsChangeID(t *testing.T) {
	long := strings.Repeat("k", 250)
	for _, tt := range []struct {
		id, key, version string
		want             bool
	}{
		{changeID("profiles", "user-42", "2"), "user-42", "2", true},
		{changeID("Tributary-Profiles", "a/b", "10"), "a/b", "10", true},
		{changeID("profiles", long, "7"), long, "7", true},
		{"r1-c1", "user-42", "99", false},
		{"profiles/user-42/2", "user-42", "99", false},
		{"profiles/user-43/2", "user-42", "2", false},
		{"/user-42/2", "user-42", "2", false},
		{"x/profiles/user-42/2", "user-42", "2", false},
		{"cdc:0123/7", long, "7", false},
		{"cdc:" + strings.Repeat("g", 40) + "/7", long, "7", false},
		{changeID("profiles", long, "7"), long, "8", false},
	} {
		if got := IsChangeID(tt.id, tt.key, tt.version); got != tt.want {
			t.Errorf("IsChangeID(%.60q, %.20q, %q) = %v, want %v", tt.id, tt.key, tt.version, got, tt.want)
		}
	}
}
