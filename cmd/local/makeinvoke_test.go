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

// make invoke without FN or EVENT, or with an EVENT file that is not
// there, says so at once: its prerequisites (the tools, every function, the
// synth) take minutes on a fresh machine, and the runner only said what was
// missing after them. make -n shows whether make would start building.
func TestMakeInvokeChecksItsArgumentsBeforeBuilding(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no FN", []string{"EVENT=events/ingest/function-url-post.json"}, "make invoke needs FN="},
		{"no EVENT", []string{"FN=ingest"}, "make invoke needs FN="},
		{"no such file", []string{"FN=ingest", "EVENT=events/ingest/no-such-sample.json"}, "EVENT=events/ingest/no-such-sample.json: no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("make", append([]string{"-n", "-C", root, "invoke"}, tc.args...)...)
			cmd.Env = append(cmd.Environ(), "FN=", "EVENT=")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("make -n invoke %s: %v, want a failure saying %q before any recipe; it printed:\n%.2000s", strings.Join(tc.args, " "), err, tc.want, out)
			}
			if strings.Contains(string(out), "go build") || strings.Contains(string(out), "npm ci") {
				t.Errorf("make -n invoke %s would build first:\n%.2000s", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// FOLLOW=0 means "do not follow" to make results as it does to make tail
// (where it is the documented way to stop at the end): make results took any
// value, 0 included, as -follow, and a user who wrote FOLLOW=0 to see a
// key's windows got a tail of the stream that waits for Ctrl-C.
func TestMakeFollowZeroDoesNotFollow(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, follow, flag string
		want                 bool
	}{
		{"results", "0", "-follow", false},
		{"results", "1", "-follow", true},
		{"results", "", "-follow", false},
		{"tail", "0", "-f", false},
		{"tail", "1", "-f", true},
		{"tail", "", "-f", true},
	} {
		cmd := exec.Command("make", append(append([]string{"-n", "-C", root, tc.target}, operatorArgs[tc.target]...), "FOLLOW="+tc.follow)...)
		cmd.Env = append(cmd.Environ(), "FOLLOW=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s FOLLOW=%s: %v\n%s", tc.target, tc.follow, err, out)
		}
		// The recipe's flags, as a word: -follow, -f.
		got := false
		for _, w := range strings.Fields(string(out)) {
			got = got || w == tc.flag
		}
		if got != tc.want {
			t.Errorf("make %s FOLLOW=%q passes %s: %v, want %v\n%s", tc.target, tc.follow, tc.flag, got, tc.want, out)
		}
	}
}

// make local-up passes LOCAL_FLAGS to the runner, as make local does: it
// ignored them, and a user who asked for other ports (LOCAL_FLAGS="-url-port
// 9100 …") got 9000, 3001 and 8090 without a word, or turned to go run
// ./cmd/local up, which skips the synth and ran an older template.
func TestMakeLocalUpPassesLocalFlags(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-n", "-C", root, "local-up", "LOCAL_FLAGS=-url-port 9100 -lambda-port 3101 -dashboard-port 8190")
	cmd.Env = append(cmd.Environ(), "LOCAL_FLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n local-up: %v\n%.2000s", err, out)
	}
	if !strings.Contains(string(out), "tributary-local up -url-port 9100 -lambda-port 3101 -dashboard-port 8190") {
		t.Errorf("make -n local-up LOCAL_FLAGS=...: the runner is not given the flags:\n%.3000s", out)
	}
}

// A LOCAL_FLUSH_SECONDS the stack cannot take stops make before anything
// builds, naming the variable the user set: cdk synth refused it after
// the builds, naming only the context key make passes it as
// (tributary:flushIntervalSeconds).
func TestMakeNamesABadLocalFlushSeconds(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"abc", false}, {"", false}, {"-5", false}, {"1.5", false}, {"2m", false}, {"901", false}, {"0120", false},
		{"0", true}, {"120", true}, {"900", true},
	} {
		// -B: the synth recipe is printed even when .build/synth.local is up to date.
		cmd := exec.Command("make", "-n", "-B", "-C", root, "synth-local", "LOCAL_FLUSH_SECONDS="+tc.value)
		out, err := cmd.CombinedOutput()
		if tc.ok {
			if err != nil || !strings.Contains(string(out), "flush interval "+tc.value+" s") {
				t.Errorf("make -n synth-local LOCAL_FLUSH_SECONDS=%s: %v, want it to synthesize with it\n%.2000s", tc.value, err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(string(out), "LOCAL_FLUSH_SECONDS=") || !strings.Contains(string(out), "0 (aggregates write once per batch") ||
			strings.Contains(string(out), "tributary:flushIntervalSeconds") {
			t.Errorf("make -n synth-local LOCAL_FLUSH_SECONDS=%s: %v, want it refused naming LOCAL_FLUSH_SECONDS and what it takes, before any recipe\n%.2000s", tc.value, err, out)
		}
		if strings.Contains(string(out), "go build") || strings.Contains(string(out), "cdk synth") {
			t.Errorf("make -n synth-local LOCAL_FLUSH_SECONDS=%s would build first:\n%.2000s", tc.value, out)
		}
	}
}

// The commands that read a running make local-up take its stand-in's
// address from TRIBUTARY_STANDIN_ADDR; a malformed one is named as such
// before they start: make results said "nothing answers at http://bogus",
// as if the address were right and the stack down.
func TestMakeNamesAMalformedStandinAddr(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(t.TempDir(), "pwned")
	defer func() {
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("a TRIBUTARY_STANDIN_ADDR ran a command (it made %s)", pwned)
		}
	}()
	for _, tc := range []struct {
		addr, want string // want "": accepted, AWS_ENDPOINT_URL=http://<addr>
	}{
		{"bogus", "not host:port"},
		{"127.0.0.1:", "not host:port"},
		{":4566", "not host:port"},
		{"127.0.0.1:45x6", "not host:port"},
		{"127.0.0.1:99999", "port 99999 is not 1 to 65535"},
		// Written into the commands' recipes: a backquote ran its command,
		// and make expanded $(shell ...) under every target.
		{"`touch " + pwned + "`:4566", "not host:port"},
		{"$(shell touch " + pwned + ")127.0.0.1:4566", "not host:port"},
		{"a;touch " + pwned + ":4566", "not host:port"},
		{"127.0.0.1:4567", ""},
		{"localhost:4566", ""},
	} {
		for _, target := range []string{"results", "tail", "setaside", "putback"} {
			cmd := exec.Command("make", append([]string{"-n", "-C", root, target}, operatorArgs[target]...)...)
			cmd.Env = append(cmd.Environ(), "TRIBUTARY_STANDIN_ADDR="+tc.addr)
			out, err := cmd.CombinedOutput()
			if tc.want == "" {
				if err != nil || !strings.Contains(string(out), "AWS_ENDPOINT_URL=http://"+tc.addr+" ") {
					t.Errorf("make -n %s TRIBUTARY_STANDIN_ADDR=%s: %v, want it to reach http://%s\n%.2000s", target, tc.addr, err, tc.addr, out)
				}
				continue
			}
			if err == nil || !strings.Contains(string(out), "TRIBUTARY_STANDIN_ADDR") || !strings.Contains(string(out), tc.want) {
				t.Errorf("make -n %s TRIBUTARY_STANDIN_ADDR=%s: %v, want it refused naming the variable and %q\n%.2000s", target, tc.addr, err, tc.want, out)
			}
		}
	}
}

// make invoke FN=nope checks FN against the last synthesized template
// before it installs, builds or synthesizes anything, when that template
// is the one the synth would write again; after a change to what the
// synth reads (a pipeline file added can add a function) the synth comes
// first, and the runner checks FN against what it wrote. make -n, run on
// the Makefile in a directory that holds only what each case needs, shows
// the order of the recipes.
func TestMakeInvokeChecksFNBeforeBuilding(t *testing.T) {
	testtools.Need(t, "the Makefile is run by make", "make")
	root, err := standin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	old, now := time.Now().Add(-time.Hour), time.Now()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		check bool // FN is checked before the functions build and the synth
	}{
		{"template current", func(t *testing.T, dir string) {
			touch(t, dir, "pipelines/pageviews.json", old)
			touch(t, dir, "infra/cdk.out/Tributary.template.json", now)
			touch(t, dir, ".build/synth.local", now)
		}, true},
		{"template of the deploy synth", func(t *testing.T, dir string) {
			touch(t, dir, "pipelines/pageviews.json", old)
			touch(t, dir, "infra/cdk.out/Tributary.template.json", now)
			touch(t, dir, ".build/synth.lambda", now)
		}, true},
		{"no template yet", func(t *testing.T, dir string) {
			touch(t, dir, "pipelines/pageviews.json", old)
		}, false},
		{"a pipeline file added since", func(t *testing.T, dir string) {
			touch(t, dir, "infra/cdk.out/Tributary.template.json", old)
			touch(t, dir, ".build/synth.local", old)
			touch(t, dir, "pipelines/pageviews.json", now)
		}, false},
		{"template synthesized by hand since", func(t *testing.T, dir string) {
			touch(t, dir, "pipelines/pageviews.json", old)
			touch(t, dir, ".build/synth.local", old.Add(time.Minute))
			touch(t, dir, "infra/cdk.out/Tributary.template.json", now)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"go.mod", "go.sum", "infra/go.mod", "infra/go.sum", "infra/cdk.json", "infra/package.json", "infra/package-lock.json", "event.json"} {
				touch(t, dir, f, old.Add(-time.Hour))
			}
			tc.setup(t, dir)
			// The directory's own mtime follows its newest entry, as
			// adding a file there would set it.
			newest := old
			if fi, err := os.Stat(filepath.Join(dir, "pipelines", "pageviews.json")); err == nil {
				newest = fi.ModTime()
			}
			if err := os.Chtimes(filepath.Join(dir, "pipelines"), newest, newest); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("make", "-n", "-f", filepath.Join(root, "Makefile"), "-C", dir, "invoke", "FN=nope", "EVENT=event.json")
			cmd.Env = nil
			for _, kv := range cmd.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "FN" && k != "EVENT" && k != "LOCAL_FLUSH_SECONDS" && k != "MAKEFLAGS" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n invoke: %v\n%s", err, out)
			}
			s := string(out)
			checkAt := strings.Index(s, "invoke -check")
			build, synth := strings.Index(s, "functions for this machine"), strings.Index(s, "cdk synth")
			if build < 0 || synth < 0 {
				t.Fatalf("make -n invoke would not build the functions or synthesize:\n%s", s)
			}
			if got := checkAt >= 0 && checkAt < build && checkAt < synth; got != tc.check {
				t.Errorf("FN checked before the functions build and the synth: %v, want %v\n%s", got, tc.check, s)
			}
		})
	}
}

// touch creates dir/name (and its directories), with modification time at.
func touch(t *testing.T, dir, name string, at time.Time) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}
