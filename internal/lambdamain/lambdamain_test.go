package lambdamain

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/tributary-dev/tributary/pkg/aggregate"
)

func TestConfig(t *testing.T) {
	lambdaEnv := map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token",
	}
	with := func(extra map[string]string, drop ...string) map[string]string {
		out := map[string]string{}
		for k, v := range lambdaEnv {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		for _, k := range drop {
			delete(out, k)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		env      map[string]string
		region   string
		endpoint string // "" : none
		err      string
	}{
		{name: "lambda", env: lambdaEnv, region: "eu-west-1"},
		{name: "local runner", env: with(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}), region: "eu-west-1", endpoint: "http://127.0.0.1:4566"},
		{name: "endpoint ignored", env: with(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}), region: "eu-west-1"},
		{name: "default region", env: with(map[string]string{"AWS_DEFAULT_REGION": "us-east-2"}, "AWS_REGION"), region: "us-east-2"},
		{name: "no region", env: with(nil, "AWS_REGION"), err: "AWS_REGION"},
		{name: "no key", env: with(nil, "AWS_ACCESS_KEY_ID"), err: "AWS_ACCESS_KEY_ID"},
		{name: "no secret", env: with(nil, "AWS_SECRET_ACCESS_KEY"), err: "AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != c.region {
				t.Errorf("region %q, want %q", cfg.Region, c.region)
			}
			if got := aws.ToString(cfg.BaseEndpoint); got != c.endpoint {
				t.Errorf("endpoint %q, want %q", got, c.endpoint)
			}
			creds, err := cfg.Credentials.Retrieve(context.Background())
			if err != nil || creds.AccessKeyID != "AKIA" || creds.SecretAccessKey != "secret" || creds.SessionToken != c.env["AWS_SESSION_TOKEN"] {
				t.Errorf("credentials %+v (%v), want the environment's", creds, err)
			}
		})
	}
}

// TestConcurrentRequestsReuseTheirConnections: the aggregate handler's
// burst of requests at once (aggregate.DefaultConcurrency), then another,
// opens no connection the second time: the SDK's default transport kept 10
// idle, so the rest were closed and opened again (a TLS handshake each on
// AWS) on every burst.
func TestConcurrentRequestsReuseTheirConnections(t *testing.T) {
	var opened atomic.Int64
	release := make(chan struct{})
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every request of the burst is in flight at once
		w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cfg, err := Config(func(k string) (string, bool) {
		v, ok := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "secret"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = awshttp.NewBuildableClient() // what the SDK's clients use when the config has none
	}
	const burst = aggregate.DefaultConcurrency
	for round := 1; round <= 2; round++ {
		before := opened.Load()
		release = make(chan struct{})
		arrived.Add(burst)
		var done sync.WaitGroup
		for range burst {
			done.Add(1)
			go func() {
				defer done.Done()
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader("{}"))
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		arrived.Wait()
		close(release)
		done.Wait()
		// The transport puts a connection back in its pool just after the
		// body is read (its read loop does it): give it that moment.
		time.Sleep(100 * time.Millisecond)
		if n := opened.Load() - before; round == 2 && n != 0 {
			t.Errorf("a second burst of %d requests opened %d new connections, want 0 (each kept idle from the first)", burst, n)
		}
	}
}
