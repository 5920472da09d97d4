package strictjson

import (
	"strings"
	"testing"
)

func TestCompressedBody(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers map[string]string
		want    string // "": not refused
	}{
		{"no headers", nil, ""},
		{"no Content-Encoding", map[string]string{"content-type": "application/json"}, ""},
		{"identity", map[string]string{"content-encoding": "identity"}, ""},
		{"identity listed twice, in capitals", map[string]string{"Content-Encoding": "Identity, IDENTITY"}, ""},
		{"empty", map[string]string{"content-encoding": ""}, ""},
		{"gzip", map[string]string{"content-encoding": "gzip"}, "Content-Encoding: gzip: the body must be sent uncompressed (identity); send it without Content-Encoding"},
		{"header spelt in capitals", map[string]string{"CONTENT-ENCODING": "br"}, "Content-Encoding: br:"},
		{"identity then a coding", map[string]string{"content-encoding": "identity, br"}, "Content-Encoding: identity, br:"},
		{"a long value is cut", map[string]string{"content-encoding": strings.Repeat("x", 10000)}, "Content-Encoding: " + strings.Repeat("x", 64) + "…:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, compressed := CompressedBody(tt.headers)
			if compressed != (tt.want != "") || !strings.Contains(msg, tt.want) || len(msg) > 300 {
				t.Errorf("CompressedBody(%.80v) = %q, %v; want refused %v with %q", tt.headers, msg, compressed, tt.want != "", tt.want)
			}
		})
	}
}
