package local_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// post is the Go example of calling the AWS_IAM ingest URL in docs/deploy.md
// ("Calling the ingest URL (SigV4)"), kept here word for word
// (TestReadmeSigV4 checks the page still holds it).
func post(ctx context.Context, url string, body []byte) (*http.Response, error) {
	cfg, err := config.LoadDefaultConfig(ctx) // github.com/aws/aws-sdk-go-v2/config
	if err != nil {
		return nil, err
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	// v4 is github.com/aws/aws-sdk-go-v2/aws/signer/v4
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", cfg.Region, time.Now()); err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// TestReadmeSigV4 runs docs/deploy.md's two ways of calling the AWS_IAM ingest
// URL — the curl --aws-sigv4 command and the Go function — against a local
// server standing in for the URL, with test credentials: both send the body
// with a SigV4 Authorization header for service lambda in the region set.
// (Whether AWS accepts the signature only AWS can say; the SDK's signer and
// curl's are the ones AWS documents.)
func TestReadmeSigV4(t *testing.T) {
	root, _, _ := paths(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_sigv4_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "func post(")
	fn, _, _ = strings.Cut(fn, "\n}\n")
	if !strings.Contains(string(doc), "func post("+fn+"\n}\n") {
		t.Errorf("docs/deploy.md's Go example is not this file's post function, word for word")
	}

	type request struct{ auth, token, body string }
	got := make(chan request, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token"), string(b)}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"events":1,"accepted":1}`)
	}))
	defer srv.Close()
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "session-token")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	signed := regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\d{8}/eu-west-1/lambda/aws4_request, SignedHeaders=\S+, Signature=[0-9a-f]{64}$`)
	check := func(how string, r request) {
		if !signed.MatchString(r.auth) || r.token != "session-token" || !strings.Contains(r.body, `"id":"evt-1"`) {
			t.Errorf("%s sent Authorization %q, token %q, body %q; want a SigV4 signature for lambda in eu-west-1, the session token and the event", how, r.auth, r.token, r.body)
		}
	}

	// The curl command, from its curl line on (the URL line asks
	// CloudFormation; here URL is the local server).
	block := recipeBlock(t, "docs/deploy.md", string(doc), "\n## Calling the ingest URL (SigV4)\n")
	i := strings.Index(block, "curl ")
	if i < 0 {
		t.Fatalf("no curl in docs/deploy.md's SigV4 block:\n%s", block)
	}
	if _, err := exec.LookPath("curl"); err == nil {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", block[i:])
		cmd.Env = append(os.Environ(), "URL="+srv.URL)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docs/deploy.md's curl --aws-sigv4: %v\n%s", err, out)
		}
		check("curl --aws-sigv4", <-got)
	}

	resp, err := post(context.Background(), srv.URL, []byte(`[{"id":"evt-1"}]`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	check("the Go example", <-got)
}
