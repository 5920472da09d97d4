package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin"
	"github.com/tributary-dev/tributary/internal/testtools"
)

// operatorArgs are the variables each operator target needs to get as far
// as its recipe under make -n.
var operatorArgs = map[string][]string{
	"results":       {"KEY=user-1"},
	"tail":          {"STREAM=events"},
	"setaside":      nil,
	"setaside-show": {"SOURCE=s", "SEQUENCE=1"},
	"putback":       {"SOURCE=s", "SEQUENCE=1"},
	"logs":          nil,
	"invoke":        {"FN=ingest", "EVENT=events/ingest/function-url-post.json"},
}

// makeN runs make -n in the repository with args, the variables the
// operator targets read cleared from the environment (a user's own
// KEY= or JSON= would change what the tests see).
func makeN(t *testing.T, args ...string) (string, error) {
	t.Helper()
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"-n", "-C", root}, args...)...)
	cmd.Env = cmd.Environ()
	for _, v := range []string{"KEY", "STREAM", "FOLLOW", "JSON", "RAW", "FROM", "TO", "TYPE", "WHERE", "PIPELINE", "STACK", "FN", "EVENT", "SOURCE", "SEQUENCE"} {
		cmd.Env = append(cmd.Env, v+"=")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A variable an operator target does not take is refused before anything
// runs, naming it and the ones the target takes: make ignored a misspelt
// one, and make tail STREAM=events KYE=user-1 printed every record of the
// stream unfiltered, FOLOW=0 followed until Ctrl-C, make results LIMIT=1
// printed every window.
func TestMakeOperatorTargetsRefuseAnUnknownVariable(t *testing.T) {
	for _, tc := range []struct {
		target, unknown, takes string
	}{
		{"tail", "KYE=user-1", "KEY="},
		{"tail", "FOLOW=0", "FOLLOW="},
		{"results", "LIMIT=1", "PIPELINE="},
		{"results", "STREAM=events", "FOLLOW="},
		{"setaside", "CATEGRY=invalid", "CATEGORY="},
		{"setaside-show", "DATAONLY=1", "DATA_ONLY="},
		{"putback", "DRYRUN=1", "DRY_RUN="},
		{"logs", "STAKC=Tributary-1", "STACK="},
		{"invoke", "LAMBDA_PROT=3101", "LAMBDA_PORT="},
	} {
		t.Run(tc.target+" "+tc.unknown, func(t *testing.T) {
			args := append([]string{tc.target}, operatorArgs[tc.target]...)
			out, err := makeN(t, append(args, tc.unknown)...)
			name, _, _ := strings.Cut(tc.unknown, "=")
			if err == nil || !strings.Contains(out, "make "+tc.target+" takes no "+name+"=") || !strings.Contains(out, tc.takes) {
				t.Errorf("make -n %s: %v, want it refused naming %s= and listing %s\n%.2000s", strings.Join(args, " ")+" "+tc.unknown, err, name, tc.takes, out)
			}
			if strings.Contains(out, "go build") || strings.Contains(out, ".build/bin/") {
				t.Errorf("make -n %s %s would run something first:\n%.2000s", tc.target, tc.unknown, out)
			}
		})
	}
}

// Every variable the docs, the README and make help show for an operator
// target is still taken, and so are the ones every target takes (the
// stand-in's address, the go command); a goal that is not an operator
// target is not checked (make local-up LOCAL_FLAGS=..., make fuzz
// FUZZTIME=...).
func TestMakeOperatorTargetsTakeTheirDocumentedVariables(t *testing.T) {
	common := []string{"TRIBUTARY_STANDIN_ADDR=127.0.0.1:4566", "GO=go"}
	for _, tc := range []struct {
		target string
		vars   []string
	}{
		{"results", []string{"PIPELINE=pageviews", "KEY=user-1", "FROM=2h", "TO=now", "FOLLOW=1", "STACK=Tributary"}},
		{"tail", []string{"STREAM=events", "SHARD=shardId-000000000001", "KEY=user-1", "TYPE=page_view", "WHERE=data.page=/", "FROM=10m", "FOLLOW=0", "JSON=1", "STACK=Tributary"}},
		{"tail", []string{"STREAM=events", "RAW=1"}},
		{"setaside", []string{"FUNCTION=aggregate-pageviews", "CATEGORY=invalid", "SINCE=1h", "N=20", "JSON=1", "STACK=Tributary"}},
		{"setaside-show", []string{"SOURCE=s", "SEQUENCE=1", "DATA_ONLY=1", "STACK=Tributary"}},
		{"putback", []string{"SOURCE=s", "SEQUENCE=1", "DATA=record.json", "DRY_RUN=1", "AGAIN=1", "ARRIVE_NOW=1", "STACK=Tributary"}},
		{"putback", []string{"FUNCTION=aggregate-pageviews", "CATEGORY=invalid", "SINCE=1h", "N=5", "UNCHANGED=1", "HORIZON=1h", "PAST_HORIZON=1"}},
		{"logs", []string{"STACK=Tributary-1765000000", "SINCE=10m"}},
		{"invoke", []string{"FN=ingest", "EVENT=events/ingest/function-url-post.json", "LAMBDA_PORT=40123", "LOCAL_FLUSH_SECONDS=0"}},
		{"local-up", []string{"LOCAL_FLAGS=-url-port 9100"}},
		{"fuzz", []string{"FUZZTIME=1s", "FUZZFLAGS=-v"}},
	} {
		args := append(append([]string{tc.target}, tc.vars...), common...)
		if out, err := makeN(t, args...); err != nil {
			t.Errorf("make -n %s: %v, want it taken\n%.2000s", strings.Join(args, " "), err, out)
		}
	}
}

// A yes/no variable takes 1 or 0 (true/false, yes/no) and refuses anything
// else naming itself: make only asked whether it was set, and JSON=0 turned
// JSON on, RAW=0 raw output, DRY_RUN=0 a dry run.
func TestMakeYesNoVariables(t *testing.T) {
	// Every spelling on the first two (one flag on by default, one off):
	// the words are read by one definition; the others' wiring is checked
	// with 1, 0 and one refusal (each make -n parses the Makefile, about a
	// tenth of a second).
	type value struct {
		value string
		want  bool
	}
	for i, tc := range []struct {
		target, variable, flag string
		deflt                  bool // the flag's presence with the variable left out
	}{
		{"results", "FOLLOW", "-follow", false},
		{"tail", "FOLLOW", "-f", true},
		{"tail", "JSON", "-json", false},
		{"tail", "RAW", "-raw", false},
		{"setaside", "JSON", "-json", false},
		{"setaside-show", "DATA_ONLY", "-data-only", false},
		{"putback", "DRY_RUN", "-dry-run", false},
		{"putback", "UNCHANGED", "-unchanged", false},
		{"putback", "PAST_HORIZON", "-past-horizon", false},
		{"putback", "AGAIN", "-again", false},
		{"putback", "ARRIVE_NOW", "-arrive-now", false},
	} {
		values := []value{{"1", true}, {"0", false}}
		bads := []string{"maybe"}
		if i < 2 {
			values = append(values, value{"true", true}, value{"yes", true}, value{"false", false}, value{"no", false}, value{"", tc.deflt})
			bads = append(bads, "2", "on", "1 0")
		}
		for _, v := range values {
			args := append(append([]string{tc.target}, operatorArgs[tc.target]...), tc.variable+"="+v.value)
			out, err := makeN(t, args...)
			if err != nil {
				t.Errorf("make -n %s: %v\n%.2000s", strings.Join(args, " "), err, out)
				continue
			}
			got := false
			for _, w := range strings.Fields(out) {
				got = got || w == tc.flag
			}
			if got != v.want {
				t.Errorf("make %s %s=%s passes %s: %v, want %v\n%.2000s", tc.target, tc.variable, v.value, tc.flag, got, v.want, out)
			}
		}
		for _, bad := range bads {
			args := append(append([]string{tc.target}, operatorArgs[tc.target]...), tc.variable+"="+bad)
			out, err := makeN(t, args...)
			if err == nil || !strings.Contains(out, tc.variable+"="+bad+" is not yes or no: want 1 or 0") {
				t.Errorf("make -n %s: %v, want it refused naming %s\n%.2000s", strings.Join(args, " "), err, tc.variable, out)
			}
		}
	}
}

// A value reaches the tool as the user typed it, whatever its bytes: make
// wrote each into the recipe's shell text between single quotes, and make
// tail STREAM=events "KEY=it's" ended in "unexpected EOF while looking for
// matching `”" (a $(shell …) in a value ran). A checkout whose tools are
// scripts printing their arguments stands in for the repository.
func TestMakePassesValuesAsTyped(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make", "bash")
	root, dir := emptyCheckout(t)
	if err := os.MkdirAll(filepath.Join(dir, ".build", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"results", "tail", "setaside", "tributary-local"} {
		if err := os.WriteFile(filepath.Join(dir, ".build", "bin", tool), []byte("#!/bin/sh\nfor a in \"$@\"; do printf '<%s>\\n' \"$a\"; done\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	value := "it's \"q\" $HOME `id` a  b é $(shell touch pwned) #c"
	for _, tc := range []struct {
		target string
		args   []string
		flags  []string // each given value
	}{
		{"tail", []string{"STREAM=" + value, "SHARD=" + value, "KEY=" + value, "TYPE=" + value, "WHERE=" + value, "FROM=" + value, "STACK=" + value}, []string{"-stream", "-shard", "-key", "-type", "-where", "-from", "-stack"}},
		{"results", []string{"PIPELINE=" + value, "KEY=" + value, "FROM=" + value, "TO=" + value}, []string{"-pipeline", "-key", "-from", "-to"}},
		{"setaside", []string{"FUNCTION=" + value, "CATEGORY=" + value, "SINCE=" + value, "N=" + value}, []string{"-function", "-category", "-since", "-n"}},
		{"setaside-show", []string{"SOURCE=" + value, "SEQUENCE=" + value}, []string{"-source", "-sequence"}},
		{"putback", []string{"SOURCE=" + value, "SEQUENCE=" + value, "DATA=" + value, "HORIZON=" + value}, []string{"-source", "-sequence", "-data", "-horizon"}},
		{"logs", []string{"STACK=" + value, "SINCE=" + value}, []string{"-stack", "-since"}},
	} {
		cmd := exec.Command("make", append([]string{"-s", "-f", filepath.Join(root, "Makefile"), "-C", dir, tc.target}, tc.args...)...)
		cmd.Env = append(os.Environ(), "TRIBUTARY_ROOT="+dir, "TRIBUTARY_STANDIN_ADDR=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("make %s with %q: %v\n%.2000s", tc.target, value, err, out)
			continue
		}
		for _, f := range tc.flags {
			if !strings.Contains(string(out), "<"+f+">\n<"+value+">\n") {
				t.Errorf("make %s: %s is not given %q as typed; the tool was run with:\n%s", tc.target, f, value, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Errorf("a value's $(shell …) ran")
	}
}

// make tail takes SHARD= (its -shard), which FROM=<sequence number> needs
// on a stream of several shards: the tool refused FROM=<n> on the events
// stream with "-shard is required", a flag make tail had no variable
// for. Every flag an operator target gives its tool has the variable
// that sets it in TRIBUTARY_MAKE_VARS, so that the tool's usage errors
// name the variable (SHARD=), not the flag.
func TestMakeOperatorFlagsHaveTheirVariables(t *testing.T) {
	for _, tc := range []struct {
		target string
		args   []string
	}{
		{"tail", []string{"STREAM=events", "SHARD=shardId-000000000001", "FROM=49650001", "KEY=k", "TYPE=t", "WHERE=a=b", "FOLLOW=1", "JSON=1", "RAW=1", "STACK=s"}},
		{"results", []string{"PIPELINE=p", "KEY=k", "FROM=1h", "TO=now", "FOLLOW=1", "STACK=s"}},
		{"setaside", []string{"FUNCTION=f", "CATEGORY=c", "SINCE=1h", "N=2", "JSON=1", "STACK=s"}},
		{"setaside-show", []string{"SOURCE=s", "SEQUENCE=1", "DATA_ONLY=1", "STACK=s"}},
		{"putback", []string{"SOURCE=s", "SEQUENCE=1", "DATA=d", "FUNCTION=f", "CATEGORY=c", "SINCE=1h", "N=2", "DRY_RUN=1", "UNCHANGED=1", "HORIZON=1h", "PAST_HORIZON=1", "AGAIN=1", "ARRIVE_NOW=1", "STACK=s"}},
	} {
		out, err := makeN(t, append([]string{tc.target}, tc.args...)...)
		if err != nil {
			t.Errorf("make -n %s: %v\n%.2000s", tc.target, err, out)
			continue
		}
		_, vars, ok := strings.Cut(out, "TRIBUTARY_MAKE_VARS='")
		vars, _, _ = strings.Cut(vars, "'")
		if !ok {
			t.Errorf("make -n %s: no TRIBUTARY_MAKE_VARS\n%.2000s", tc.target, out)
			continue
		}
		_, recipe, _ := strings.Cut(out, ".build/bin/")
		given := map[string]bool{}
		for _, w := range strings.Fields(recipe) {
			if strings.HasPrefix(w, "-") && w != "-template" {
				given[strings.TrimPrefix(w, "-")] = true
			}
		}
		for _, a := range tc.args {
			variable, _, _ := strings.Cut(a, "=")
			found := false
			for _, m := range strings.Fields(vars) {
				flag, v, _ := strings.Cut(m, ":")
				if strings.HasPrefix(v, variable+"=") || v == variable {
					found = found || given[flag]
				}
			}
			if !found {
				t.Errorf("make %s %s: no flag of the tool's is given and mapped to %s= (TRIBUTARY_MAKE_VARS=%q)\n%.2000s", tc.target, a, variable, vars, out)
			}
		}
	}
}

// emptyCheckout is the repository's root (whose Makefile a test runs with
// -f) and an empty directory to run it in (-C, TRIBUTARY_ROOT): a go.mod
// and go.sum from an hour ago, so what make builds after them is up to
// date.
func emptyCheckout(t *testing.T) (root, dir string) {
	t.Helper()
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"go.mod", "go.sum"} {
		path := filepath.Join(dir, f)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return root, dir
}
