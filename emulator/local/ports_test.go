package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// TestTakenPortStopsUpBeforeItDeploys: a second make local-up beside a
// running one finds that one's stand-in and reuses it, then needs the same
// ports. It must fail before it deploys anything onto the other's stand-in
// (or starts a function), naming the port and the flag that moves it.
func TestTakenPortStopsUpBeforeItDeploys(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	tpl := templateWithFunctionURL(t)
	cases := []struct {
		name string
		opts func(port int) local.Options
		flag string
	}{
		{"function URLs", func(p int) local.Options { return local.Options{URLPort: p, LambdaPort: -1, DashboardPort: -1} }, "-url-port"},
		{"Lambda Invoke API", func(p int) local.Options { return local.Options{LambdaPort: p, DashboardPort: -1} }, "-lambda-port"},
		{"dashboard", func(p int) local.Options { return local.Options{LambdaPort: -1, DashboardPort: p} }, "-dashboard-port"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			held, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			port := held.Addr().(*net.TCPAddr).Port
			opts := tc.opts(port)
			stackName := "Second" + strconv.Itoa(i)
			opts.Template, opts.Functions, opts.Endpoint, opts.Stack = tpl, t.TempDir(), srv.Endpoint(), stackName
			var progress bytes.Buffer
			opts.Progress = &progress
			stack, err := local.Up(context.Background(), opts)
			if err == nil {
				_ = stack.Close()
				t.Fatalf("Up with port %d held elsewhere succeeded", port)
			}
			addr := "127.0.0.1:" + strconv.Itoa(port)
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "make local-up") {
				t.Errorf("Up: %v\nwant an error naming %s, the flag %s and that another make local-up may hold it", err, addr, tc.flag)
			}
			// The way to other ports that builds and synthesizes first:
			// go run ./cmd/local up ran the template of the last synth.
			if !strings.Contains(err.Error(), "make local-up LOCAL_FLAGS='-url-port 0 -lambda-port 0 -dashboard-port 0'") || strings.Contains(err.Error(), "go run") {
				t.Errorf("Up: %v\nwant it to give the make local-up LOCAL_FLAGS=... command, not go run", err)
			}
			if strings.Contains(progress.String(), "deploying") {
				t.Errorf("it deployed before finding the port taken:\n%s", progress.String())
			}
			streams, err := kinesis.NewFromConfig(cfg).ListStreams(context.Background(), &kinesis.ListStreamsInput{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range streams.StreamNames {
				if strings.HasPrefix(s, stackName+"-") {
					t.Errorf("stream %s was created on the stand-in before the port was found taken", s)
				}
			}
		})
	}
}

// templateWithFunctionURL is testdata/operators.template.json with a
// function URL for its ingest function, as the real stack has.
func templateWithFunctionURL(t *testing.T) string { return templateWithFunctionURLs(t, 1) }

// templateWithFunctionURLs is testdata/operators.template.json with n
// function URLs for its ingest function (the real stack has ingest's,
// commands' and rules').
func templateWithFunctionURLs(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile("testdata/operators.template.json")
	if err != nil {
		t.Fatal(err)
	}
	var tpl map[string]any
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		tpl["Resources"].(map[string]any)["IngestFnFunctionUrl"+strconv.Itoa(i)] = map[string]any{
			"Type": "AWS::Lambda::Url",
			"Properties": map[string]any{"AuthType": "NONE",
				"TargetFunctionArn": map[string]any{"Fn::GetAtt": []any{"IngestFnFunction49C815F8", "Arn"}}},
		}
	}
	out, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Tributary.template.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A second make local-up beside a running one stops before the stand-in
// step, naming the taken port and the flag that moves it: it used to say it
// would deploy onto the first one's stand-in, then fail on the port.
func TestPortsFreeNamesATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	tpl := templateWithFunctionURLs(t, 2)
	if err := local.PortsFree(tpl, 0, -1, 0); err != nil {
		t.Errorf("any free port and none: %v, want no error", err)
	}
	err = local.PortsFree(tpl, 0, taken, -1)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d for the Lambda Invoke API is in use", taken)) || !strings.Contains(err.Error(), "-lambda-port moves this one") {
		t.Errorf("a taken Lambda port: %v, want it named with the flag that moves it", err)
	}
}

// Ports that no run could serve are the user's mistake, named by the
// flags that asked for them, not "in use": -lambda-port on the second
// function URL's port (-url-port 9100 serves 9100 and 9101) was reported
// as held by another make local-up, and a port past 65535 as in use. Up
// refuses them before it binds or deploys anything, and so does PortsFree,
// which the runner calls before the stand-in step.
func TestPortSettingsThatCannotBeServedAreNamed(t *testing.T) {
	t.Parallel()
	tpl := templateWithFunctionURLs(t, 2)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := held.Addr().(*net.TCPAddr).Port
	held.Close()
	cases := []struct {
		name                   string
		url, lambda, dashboard int
		want                   []string
	}{
		{"Lambda API on the second function URL", p, p + 1, -1, []string{"-lambda-port " + strconv.Itoa(p+1), "-url-port " + strconv.Itoa(p), "the same port", "function URL 2's"}},
		{"dashboard on the first function URL", p, -1, p, []string{"-dashboard-port " + strconv.Itoa(p), "-url-port " + strconv.Itoa(p), "the same port"}},
		{"Lambda API and dashboard on one port", 0, p, p, []string{"-lambda-port " + strconv.Itoa(p), "-dashboard-port " + strconv.Itoa(p), "the same port"}},
		{"function URL past 65535", 70000, -1, -1, []string{"-url-port 70000", "65535"}},
		{"second function URL past 65535", 65535, -1, -1, []string{"-url-port 65535", "65535", "2 function URLs"}},
		{"Lambda API past 65535", 0, 70000, -1, []string{"-lambda-port 70000", "1 to 65535"}},
		{"dashboard below -1", 0, -1, -2, []string{"-dashboard-port -2", "1 to 65535"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				var pe *local.PortsError
				if err == nil || !errors.As(err, &pe) {
					t.Fatalf("%s: %v, want a *local.PortsError", how, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v\nwant it to say %q", how, err, w)
					}
				}
				if strings.Contains(err.Error(), "in use") {
					t.Errorf("%s: %v: says a port is in use; none is", how, err)
				}
			}
			check("PortsFree", local.PortsFree(tpl, tc.url, tc.lambda, tc.dashboard))
			var progress bytes.Buffer
			stack, err := local.Up(context.Background(), local.Options{Template: tpl, Functions: t.TempDir(), Endpoint: "http://127.0.0.1:1",
				Stack: "Ports", URLPort: tc.url, LambdaPort: tc.lambda, DashboardPort: tc.dashboard, Progress: &progress})
			if err == nil {
				_ = stack.Close()
			}
			check("Up", err)
		})
	}
}
