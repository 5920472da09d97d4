package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestFailUsage: a usage error is one line ending in where -h is; one
// whose message spans lines (a pipeline file's mistakes, one a line) keeps
// its lines as they are and says where -h is on a line of its own, not at
// the end of its last mistake.
func TestFailUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"one line", Usagef("n", "5000: want 1 to 1000"), "replay: -n 5000: want 1 to 1000; see go run ./cmd/replay -h\n"},
		{"several lines", Usagef("pipeline", "p.json: 2 mistakes:\n  windows: required\n  name: required"),
			"replay: -pipeline p.json: 2 mistakes:\n  windows: required\n  name: required\nsee go run ./cmd/replay -h\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if code := Fail(&b, "replay", tc.err, ""); code != ExitUsage || b.String() != tc.want {
				t.Errorf("Fail = %d %q, want %d %q", code, b.String(), ExitUsage, tc.want)
			}
		})
	}
	var b bytes.Buffer
	if code := Fail(&b, "replay", errors.New("boom"), ""); code != ExitError || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("Fail(boom) = %d %q", code, b.String())
	}
}

// TestFailUnderMake: run by a make target (EnvMakeVars set), a usage
// error names the make variables the user typed, not the flags they set,
// and points at make help; a flag no variable sets keeps its name, and a
// word with a hyphen inside is left alone.
func TestFailUnderMake(t *testing.T) {
	t.Setenv(EnvMakeVars, "key:KEY= follow:FOLLOW=1 category:CATEGORY=")
	var b bytes.Buffer
	code := Fail(&b, "results", Usagef("key", "is required (or -follow to tail the stream; -template reads a non-empty file)"), "")
	want := "results: KEY= is required (or FOLLOW=1 to tail the stream; -template reads a non-empty file); see make help\n"
	if code != ExitUsage || b.String() != want {
		t.Errorf("Fail = %d %q, want %q", code, b.String(), want)
	}
}
