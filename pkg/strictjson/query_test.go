package strictjson_test

import (
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

func TestUnknownParameter(t *testing.T) {
	for _, tt := range []struct {
		name        string
		query       map[string]string
		known       []string
		wantName    string
		wantMessage string
	}{
		{"none sent", nil, []string{"after"}, "", ""},
		{"all known", map[string]string{"after": "x"}, []string{"after", "wait"}, "", ""},
		{"a misspelt one", map[string]string{"afer": "x"}, []string{"after", "wait"}, "afer", `afer: is not a parameter of GET /rules; did you mean "after"? (known: after, wait)`},
		{"nothing near", map[string]string{"zzzzzz": "1"}, []string{"after"}, "zzzzzz", "zzzzzz: is not a parameter of GET /rules (known: after)"},
		{"a route that takes none", map[string]string{"dryRun": "true"}, nil, "dryRun", "dryRun: GET /rules takes no query parameters"},
		{"the first by name", map[string]string{"b": "1", "a": "1", "after": "x"}, []string{"after"}, "a", "a: is not a parameter"},
		{"a long name is cut", map[string]string{strings.Repeat("x", 10000): "1"}, nil, strings.Repeat("x", 64), "takes no query parameters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name, msg := strictjson.UnknownParameter(tt.query, "GET /rules", tt.known...)
			if !strings.HasPrefix(name, tt.wantName) || len(name) > 80 || !strings.Contains(msg, tt.wantMessage) || (tt.wantName == "") != (name == "") || len(msg) > 300 {
				t.Errorf("UnknownParameter(%.40v) = %q, %q; want %q, %q", tt.query, name, msg, tt.wantName, tt.wantMessage)
			}
		})
	}
}

func TestRepeatedParameter(t *testing.T) {
	for _, tc := range []struct{ raw, name, message string }{
		{"", "", ""},
		{"after=a", "", ""},
		{"after=a&wait=1s", "", ""},
		{"after=a&after=b", "after", "after: given 2 times; give it once"},
		{"wait=1&after=a&%61fter=b&after=c", "after", "after: given 3 times; give it once"},
		{"a&a", "a", "a: given 2 times; give it once"},
	} {
		name, message := strictjson.RepeatedParameter(tc.raw)
		if name != tc.name || message != tc.message {
			t.Errorf("RepeatedParameter(%q) = %q, %q; want %q, %q", tc.raw, name, message, tc.name, tc.message)
		}
	}
}
