package cli

import "testing"

// TestShownQuotesWhatATerminalActsOn: a value a command prints is shown as
// it is unless it holds a character a terminal acts on, or one that hides
// or reorders the text around it; then it is quoted, that character
// escaped, so the operator sees it rather than its effect.
func TestShownQuotesWhatATerminalActsOn(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text", "data.ms", "data.ms"},
		{"text of another script", "données.durée", "données.durée"},
		{"a path step already quoted", `["\x1b[2J"]`, `["\x1b[2J"]`},
		{"an escape sequence", "\x1b]0;PWNED\a\x1b[2J", `"\x1b]0;PWNED\a\x1b[2J"`},
		{"a line break", "a\nb", `"a\nb"`},
		{"a C1 control", "a\u009bb", `"a\u009bb"`},
		{"a bidirectional override", "\u202eevil", `"\u202eevil"`},
		{"a zero-width space", "a\u200bb", `"a\u200bb"`},
		{"bytes that are not UTF-8", "a\xffb", `"a\xffb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Shown(tc.in); got != tc.want {
				t.Errorf("Shown(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}
