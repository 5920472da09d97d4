package tributary

import (
	"strings"
	"testing"
)

// TestParseJoinIsStrict: a join.json the stack and the function would read
// differently (a key twice: the stack filtered on one type while the
// function joined another) or that is not UTF-8 stops synth naming the
// field.
func TestParseJoinIsStrict(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"name":"j","left":"search","right":"click","left":"view","within":"1m"}`, `join config: left: duplicate object key "left"`},
		{`{"name":"j","left":"sea` + "\xff" + `rch","right":"click","within":"1m"}`, "join config: left: invalid UTF-8"},
		{`{"name":"j","left":"search\ud800","right":"click","within":"1m"}`, "join config: left: invalid UTF-8"},
	} {
		_, err := ParseJoin([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.doc, err, tc.want)
		}
	}
	if c, err := ParseJoin([]byte(`{"name":"j","left":"search","right":"click","within":"1m"}`)); err != nil || c.Left != "search" {
		t.Errorf("a valid join: %+v %v", c, err)
	}
}
