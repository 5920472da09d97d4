package join

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// TestParseIsStrict: a join config with a key twice (the function would run
// the last copy), text that is not UTF-8, or a misspelt field is refused
// naming the field.
func TestParseIsStrict(t *testing.T) {
	for _, tc := range []struct{ doc, field, reason string }{
		{`{"name":"j","left":"s","right":"c","within":"1m","within":"24h"}`, "within", `duplicate object key "within"`},
		{`{"name":"j","left":"s","right":"c","within":"1m","joinType":"inner","joinType":"outer"}`, "joinType", "duplicate object key"},
		{`{"name":"j","left":"se` + "\xff" + `arch","right":"c","within":"1m"}`, "left", "invalid UTF-8"},
		{`{"name":"j","left":"search\udfff","right":"c","within":"1m"}`, "left", "surrogate"},
		{`{"name":"j","left":"s","right":"c","within":"1m","alowedLateness":"5s"}`, "alowedLateness", `did you mean "allowedLateness"?`},
		{`{"name":"j","left":"s","right":"c","within":"1m","partitionKeyIsJoinKey":"yes"}`, "partitionKeyIsJoinKey", "must be a JSON boolean, not a string"},
	} {
		_, err := Parse([]byte(tc.doc))
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("%s: got %v, want field %q with %q", tc.doc, err, tc.field, tc.reason)
		}
	}
}
