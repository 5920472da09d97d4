package local_test

import (
	"bytes"
	"context"
	"encoding/json"
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
func templateWithFunctionURL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/operators.template.json")
	if err != nil {
		t.Fatal(err)
	}
	var tpl map[string]any
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	tpl["Resources"].(map[string]any)["IngestFnFunctionUrl"] = map[string]any{
		"Type": "AWS::Lambda::Url",
		"Properties": map[string]any{"AuthType": "NONE",
			"TargetFunctionArn": map[string]any{"Fn::GetAtt": []any{"IngestFnFunction49C815F8", "Arn"}}},
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
	if err := local.PortsFree(0, -1, 0); err != nil {
		t.Errorf("any free port and none: %v, want no error", err)
	}
	err = local.PortsFree(0, taken, -1)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d for the Lambda Invoke API is in use", taken)) || !strings.Contains(err.Error(), "-lambda-port moves this one") {
		t.Errorf("a taken Lambda port: %v, want it named with the flag that moves it", err)
	}
}
