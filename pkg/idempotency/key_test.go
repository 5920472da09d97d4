package idempotency

import (
	"errors"
	"testing"
)

func TestHashPath(t *testing.T) {
	h := func(payload, path string) string {
		t.Helper()
		s, err := hashPath([]byte(payload), path)
		if err != nil {
			t.Fatalf("hashPath(%s, %q): %v", payload, path, err)
		}
		return s
	}
	tests := []struct {
		name     string
		a, b     string
		path     string
		wantSame bool
	}{
		{"key order does not matter", `{"a":1,"b":2}`, `{"b":2,"a":1}`, "", true},
		{"other fields do not matter", `{"data":{"orderId":"o"},"id":"1"}`, `{"data":{"orderId":"o"},"id":"2"}`, "data.orderId", true},
		{"different values differ", `{"data":{"orderId":"o"}}`, `{"data":{"orderId":"p"}}`, "data.orderId", false},
		{"number and string differ", `{"k":1}`, `{"k":"1"}`, "k", false},
		{"JSON inside a string body", `{"body":"{\"orderId\":\"o\",\"x\":1}"}`, `{"body":"{\"x\":2,\"orderId\":\"o\"}"}`, "body.orderId", true},
		{"array index", `{"items":[{"id":"a"},{"id":"b"}]}`, `{"items":[{"id":"a"}]}`, "items.0.id", true},
		{"large numbers kept as written", `{"n":12345678901234567890}`, `{"n":12345678901234567891}`, "n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h(tt.a, tt.path) == h(tt.b, tt.path); got != tt.wantSame {
				t.Errorf("same hash = %v, want %v", got, tt.wantSame)
			}
		})
	}
	if h("not json", "") == h("not jsoN", "") {
		t.Error("raw payloads with different bytes share a hash")
	}
}

func TestHashPathErrors(t *testing.T) {
	tests := []struct{ payload, path string }{
		{`{"data":{}}`, "data.orderId"},
		{`{"data":null}`, "data"},
		{`{"data":"plain"}`, "data.orderId"},
		{`not json`, "body"},
		{`{"items":[1]}`, "items.3"},
	}
	for _, tt := range tests {
		_, err := hashPath([]byte(tt.payload), tt.path)
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Path != tt.path {
			t.Errorf("hashPath(%s, %q) = %v, want *KeyError naming the path", tt.payload, tt.path, err)
		}
	}
}
