package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
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

// TestParseSaysWhatAFlagTakes: a value the flag package cannot parse is
// answered with what the flag takes, not a bare "parse error"; a duration
// given as a bare number is told it lacks a unit and shown the number with
// one (it was shown "90s", which for -wait is out of range, and not told
// what was wrong), its number cut to MaxEcho however long.
func TestParseSaysWhatAFlagTakes(t *testing.T) {
	huge := strings.Repeat("9", 100_000)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-horizon", "999999999h"}, `invalid value "999999999h" for flag -horizon: parse error: want a duration such as 90s, 5m or 1h30m (at most 2562047h)`},
		{[]string{"-horizon", "abc"}, `invalid value "abc" for flag -horizon: parse error: want a duration such as 90s, 5m or 1h30m (at most 2562047h)`},
		{[]string{"-horizon", "21"}, `-horizon 21: a duration needs a unit, such as 21s`},
		{[]string{"-horizon=1.5"}, `-horizon 1.5: a duration needs a unit, such as 1.5s`},
		{[]string{"-horizon", "-5"}, `-horizon -5: a duration needs a unit, such as -5s`},
		{[]string{"-horizon", "99999999999"}, `-horizon 99999999999: a duration needs a unit (h, m, s, ms, us or ns)`},
		{[]string{"-horizon", huge}, `-horizon ` + huge[:MaxEcho] + `…: a duration needs a unit (h, m, s, ms, us or ns)`},
		{[]string{"-n", "ten"}, `invalid value "ten" for flag -n: parse error: want a whole number`},
		{[]string{"-n", "99999999999999999999"}, `for flag -n: value out of range: want a whole number`},
		{[]string{"-dry-run=maybe"}, `for -dry-run: parse error: want true or false (or the flag alone)`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.Duration("horizon", time.Hour, "")
		fs.Int("n", 0, "")
		fs.Bool("dry-run", false, "")
		err := Parse(fs, tc.args, io.Discard, "", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%.300q) = %.600v, want %.600q", tc.args, err, tc.want)
		}
		if err != nil && len(err.Error()) > 2*MaxEcho {
			t.Errorf("Parse(%.300q): %d bytes: a value repeated whole", tc.args, len(err.Error()))
		}
	}
}
