package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parseFor parses args as the runner's command cmd does, with the
// TRIBUTARY_STANDIN_ADDR of env ("" for unset), and checks them.
func parseFor(t *testing.T, cmd, env string, args ...string) (*options, error) {
	t.Helper()
	t.Setenv("TRIBUTARY_STANDIN_ADDR", env)
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := bindOptions(fs)
	o.cmd = cmd
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	o.parsed(fs)
	return o, o.check()
}

// A port or a stand-in address no command can use is a usage error naming
// the flag or the variable and what is allowed: -lambda-port -1 turned the
// Invoke API off (and the banner printed its command with an empty
// --endpoint-url), 127.0.0.1:99999 and -url-port 70000 were reported as in
// use, 127.0.0.1: silently took any free port.
func TestFlagsNoCommandCanUseAreUsageErrors(t *testing.T) {
	tests := []struct {
		name, env string
		args      []string
		want      []string // nil: accepted
	}{
		{"defaults", "", nil, nil},
		{"any free ports", "", []string{"-url-port", "0", "-lambda-port", "0", "-dashboard-port", "0", "-addr", "127.0.0.1:0"}, nil},
		{"other ports", "localhost:4567", []string{"-url-port", "9100", "-lambda-port", "9200", "-dashboard-port", "9300"}, nil},
		{"negative Lambda port", "", []string{"-lambda-port", "-1"}, []string{"-lambda-port -1", "1 to 65535", "0 for any free port"}},
		{"URL port past 65535", "", []string{"-url-port", "70000"}, []string{"-url-port 70000", "1 to 65535"}},
		{"dashboard port past 65535", "", []string{"-dashboard-port", "65536"}, []string{"-dashboard-port 65536", "1 to 65535"}},
		{"variable's port past 65535", "127.0.0.1:99999", nil, []string{"TRIBUTARY_STANDIN_ADDR", `"127.0.0.1:99999"`, "1 to 65535"}},
		{"variable with no port", "127.0.0.1:", nil, []string{"TRIBUTARY_STANDIN_ADDR", `"127.0.0.1:"`, "1 to 65535"}},
		{"variable not host:port", "bogus", nil, []string{"TRIBUTARY_STANDIN_ADDR", `"bogus"`, "host:port"}},
		{"flag with no port", "127.0.0.1:4567", []string{"-addr", "127.0.0.1:"}, []string{"-addr", `"127.0.0.1:"`}},
		{"flag not on this machine", "", []string{"-standin", "10.0.0.1:4566"}, []string{"-standin", "127.0.0.1 or localhost"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFor(t, "up", tc.env, tc.args...)
			if tc.want == nil {
				if err != nil {
					t.Errorf("%v (TRIBUTARY_STANDIN_ADDR=%q): %v, want it accepted", tc.args, tc.env, err)
				}
				return
			}
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("%v (TRIBUTARY_STANDIN_ADDR=%q): %v, want a usage error", tc.args, tc.env, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v (TRIBUTARY_STANDIN_ADDR=%q): %v\nwant it to say %q", tc.args, tc.env, err, w)
				}
			}
		})
	}
}

// make logs SINCE= (-since) is how far back to read: a span of nothing or
// less, or longer than the log groups keep events, is refused naming
// SINCE=; 0 read nothing and printed no log groups as if none had logged.
func TestLogsSinceIsBounded(t *testing.T) {
	for _, tc := range []struct {
		since string
		ok    bool
	}{
		{"10m", true}, {"168h", true}, {"0s", false}, {"-5m", false}, {"169h", false},
	} {
		_, err := parseFor(t, "logs", "", "-since", tc.since)
		var ue usageError
		switch {
		case tc.ok && err != nil:
			t.Errorf("-since %s: %v, want it taken", tc.since, err)
		case !tc.ok && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "SINCE=") || !strings.Contains(err.Error(), "168h")):
			t.Errorf("-since %s: %v, want a usage error naming SINCE= and the longest span", tc.since, err)
		}
	}
}

// make logs STACK= that is no stack name is refused naming STACK=: it was
// taken as no template, and every stack's logs were printed, exit 0.
func TestLogsStackIsAName(t *testing.T) {
	for _, tc := range []struct {
		stack string
		ok    bool
	}{
		{"Tributary", true}, {"Tributary-1765000000", true}, {"`x`", false}, {"a b", false}, {"1abc", false}, {"", false}, {strings.Repeat("a", 129), false},
	} {
		_, err := parseFor(t, "logs", "", "-stack", tc.stack)
		var ue usageError
		switch {
		case tc.ok && err != nil:
			t.Errorf("-stack %q: %v, want it taken", tc.stack, err)
		case !tc.ok && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "STACK=") || len(err.Error()) > 400):
			t.Errorf("-stack %.40q: %v, want a bounded usage error naming STACK=", tc.stack, err)
		}
	}
}

// -lambda-port on the port of the stack's second function URL (-url-port
// 9100 serves ingest on 9100 and commands on 9101) is a usage error naming
// the two settings, before the stand-in step; it was reported as a port in
// use, asking whether another make local-up was running.
func TestLambdaPortOnAFunctionURLsPortNamesBoth(t *testing.T) {
	tpl := filepath.Join(t.TempDir(), "Tributary.template.json")
	doc := `{"Resources":{"IngestUrl":{"Type":"AWS::Lambda::Url","Properties":{}},"CommandsUrl":{"Type":"AWS::Lambda::Url","Properties":{}}}}`
	if err := os.WriteFile(tpl, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o, err := parseFor(t, "up", "127.0.0.1:1", "-template", tpl, "-url-port", strconv.Itoa(p), "-lambda-port", strconv.Itoa(p+1))
	if err != nil {
		t.Fatal(err)
	}
	tm := loadTimings(t.TempDir())
	defer tm.done()
	_, _, err = startStack(context.Background(), o, tm, ports{o.urlPort, o.lambdaPort, o.dashboardPort})
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("startStack: %v, want a usage error", err)
	}
	for _, w := range []string{"-lambda-port " + strconv.Itoa(p+1), "-url-port " + strconv.Itoa(p), "the same port"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("startStack: %v\nwant it to say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "in use") {
		t.Errorf("startStack: %v: says a port is in use; none is", err)
	}
}

// TestAFlagItCannotReadIsOneLine: make logs SINCE=abc printed Go's
// "invalid value" line and then the usage of every flag of every command;
// the line naming the flag is now all, with how to list the flags and what
// the flag takes (it said only "parse error").
func TestAFlagItCannotReadIsOneLine(t *testing.T) {
	var stderr strings.Builder
	opts, code := parseArgs("logs", []string{"-since", "abc"}, &stderr)
	if opts != nil || code != 2 {
		t.Fatalf("parseArgs: %v, exit %d; want exit 2", opts, code)
	}
	got := stderr.String()
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, `invalid value "abc" for flag -since`) || !strings.Contains(got, "-since is SINCE=") || !strings.Contains(got, "want a duration such as") {
		t.Errorf("stderr %q: want one line naming -since, its value, what it takes and SINCE=", got)
	}
	if opts, code := parseArgs("logs", []string{"-since", "10m"}, &stderr); opts == nil || code != 0 || opts.since != 10*time.Minute {
		t.Errorf("-since 10m: %+v, exit %d", opts, code)
	}
}
