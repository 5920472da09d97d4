package setaside

import (
	"strings"
	"testing"
)

// TestRuleCheck: a number rule holds a value as a pipeline reads its
// value (strconv.ParseFloat, then the bound), and says what is wrong with
// any other; a rule of a kind it does not know checks nothing.
func TestRuleCheck(t *testing.T) {
	within := NumberRule(1 << 53)
	tests := []struct {
		name string
		rule *Rule
		v    string
		want string // "" when the value holds
	}{
		{"a number", within, `5`, ""},
		{"a negative fraction", within, `-12.5`, ""},
		{"2^53", within, `9007199254740992`, ""},
		{"-2^53-1, which a float64 reads as -2^53", within, `-9007199254740993`, ""},
		{"an underflow, read as 0", within, `1e-400`, ""},
		{"-0", within, `-0`, ""},
		{"missing", within, ``, "is missing"},
		{"a string", within, `"5"`, "is a string, not a number"},
		{"an object", within, `{"v":5}`, "is an object, not a number"},
		{"null", within, `null`, "is null, not a number"},
		{"a boolean", within, `true`, "is a boolean, not a number"},
		{"an array", within, `[5]`, "is an array, not a number"},
		{"past a float64", within, `1e400`, "1e400 is not a finite 64-bit number"},
		{"2^63", within, `9223372036854775808`, "9223372036854775808 is outside ±9007199254740992"},
		{"2^53+2", within, `9007199254740994`, "is outside ±9007199254740992"},
		{"a thousand digits, cut", within, strings.Repeat("9", 1000), strings.Repeat("9", 39) + "…"},
		{"no bound: 1e300", NumberRule(0), `1e300`, ""},
		{"no bound: 1e400", NumberRule(0), `1e400`, "not a finite 64-bit number"},
		{"a kind not known", &Rule{Holds: "colour"}, `"5"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v []byte
			if tt.v != "" {
				v = []byte(tt.v)
			}
			err := tt.rule.Check(v)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check(%.40s) = %v, want it to hold", tt.v, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check(%.40s) = %v, want %q", tt.v, err, tt.want)
			case err != nil && len(err.Error()) > 100:
				t.Errorf("Check(%.40s) says %d bytes: it must not repeat the value whole", tt.v, len(err.Error()))
			}
		})
	}
	if got := within.String(); got != "a JSON number within ±9007199254740992" {
		t.Errorf("String() = %q", got)
	}
}
