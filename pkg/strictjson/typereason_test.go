package strictjson_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// TestTypeReason: encoding/json's refusal of a value of the wrong type is
// said in the sender's words (the JSON types), never the Go type.
func TestTypeReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		into any
		want string
	}{
		{"a string for an array", `{"Records":"nope"}`, new(struct{ Records []struct{} }), "must be a JSON array, not a string"},
		{"a number for bytes", `{"data":42}`, new(struct{ Data []byte }), "must be a JSON string (base64), not a number"},
		{"an array for a string", `{"body":[1,2]}`, new(struct{ Body string }), "must be a JSON string, not an array"},
		{"a fraction for an int", `{"n":1.5}`, new(struct{ N int }), "must be a JSON number (a whole number), not a number"},
		{"a boolean for an object", `{"m":true}`, new(struct{ M map[string]string }), "must be a JSON object, not a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := json.Unmarshal([]byte(tc.doc), tc.into)
			got, ok := strictjson.TypeReason(err)
			if !ok || got != tc.want {
				t.Errorf("TypeReason(%v) = %q, %t; want %q", err, got, ok, tc.want)
			}
		})
	}
	if _, ok := strictjson.TypeReason(errors.New("unexpected end of JSON input")); ok {
		t.Error("TypeReason took an error that is no UnmarshalTypeError")
	}
}
