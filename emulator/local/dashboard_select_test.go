package local

import (
	"html"
	"strings"
	"testing"
)

// TestKeySelectSubmitsTheKeyAsItIs: a browser submits an option's value
// attribute as it is, but its text with whitespace collapsed; each option
// carries the key, escaped, as its value, so a key with leading or doubled
// spaces (or markup) can be chosen on the dashboard.
func TestKeySelectSubmitsTheKeyAsItIs(t *testing.T) {
	keys := []string{"user-1", "  two  spaces", `<b>"x"&y</b>`}
	out := selectBox("key", keys, keys[1])
	for i, k := range keys {
		want := `<option value="` + html.EscapeString(k) + `"`
		if i == 1 {
			want += " selected"
		}
		if !strings.Contains(out, want+">") {
			t.Errorf("%s does not hold %s>", out, want)
		}
	}
}
