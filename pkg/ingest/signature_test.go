package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/idempotency"
)

// The test vector of docs/events.md ("Signed requests (HMAC)"):
// implementers in other languages check their signing against it.
func TestSignTestVector(t *testing.T) {
	ts, sig := Sign([]byte("tributary-test-secret"), time.Unix(1796040000, 0), "/", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, []byte(`{"id":"evt-1"}`))
	const want = "v1=" + testVectorSignature
	if ts != "1796040000" || sig != want {
		t.Errorf("Sign = %s %s, want 1796040000 %s", ts, sig, want)
	}
	if got := string(StringToSign("1796040000", "/", "", []byte("{}"))); got != "v1\n1796040000\n/\n\n{}" {
		t.Errorf("StringToSign = %q", got)
	}
}

// testVectorSignature is HMAC-SHA256("tributary-test-secret",
// "v1\n1796040000\n/\n\"8e03978e-40d5-43e8-bc93-6894a57f9324\"\n{\"id\":\"evt-1\"}"),
// as printed by:
//
//	printf 'v1\n%s\n%s\n%s\n%s' 1796040000 / '"8e03978e-40d5-43e8-bc93-6894a57f9324"' '{"id":"evt-1"}' |
//	  openssl dgst -sha256 -hmac tributary-test-secret -r
const testVectorSignature = "3dda751373176301fab5750bff4d01654938556907a1112828009374ecd7a519"

// staticSecrets is a SecretSource of fixed secrets, for the cases that need
// no Secrets Manager.
type staticSecrets [][]byte

func (s staticSecrets) Secrets(context.Context) ([][]byte, error)       { return s, nil }
func (s staticSecrets) Refresh(context.Context) ([][]byte, bool, error) { return s, false, nil }

func signed(secret string, at time.Time, path, key, body string) events.LambdaFunctionURLRequest {
	r := postTo(path, body)
	ts, sig := Sign([]byte(secret), at, path, key, []byte(body))
	r.Headers = map[string]string{"content-type": "application/json", "x-tributary-timestamp": ts, "x-tributary-signature": sig}
	if key != "" {
		r.Headers["idempotency-key"] = key
	}
	return r
}

// TestSignatureRefusals: every way a signature can be wrong is a 401 naming
// the header, and nothing is written.
func TestSignatureRefusals(t *testing.T) {
	const secret = "s3cret"
	body := batchOf("a", "b")
	good := func() events.LambdaFunctionURLRequest { return signed(secret, serverNow, "/", `"k-1"`, body) }
	with := func(r events.LambdaFunctionURLRequest, f func(*events.LambdaFunctionURLRequest)) events.LambdaFunctionURLRequest {
		f(&r)
		return r
	}
	tests := []struct {
		name   string
		req    events.LambdaFunctionURLRequest
		header string
		text   string
	}{
		{"no timestamp", with(good(), func(r *events.LambdaFunctionURLRequest) { delete(r.Headers, "x-tributary-timestamp") }), HeaderTimestamp, "is missing"},
		{"timestamp not a number", with(good(), func(r *events.LambdaFunctionURLRequest) { r.Headers["x-tributary-timestamp"] = "2026-11-29T10:41:09Z" }), HeaderTimestamp, "is not a Unix time in whole seconds"},
		{"timestamp in milliseconds", with(good(), func(r *events.LambdaFunctionURLRequest) {
			r.Headers["x-tributary-timestamp"] = strconv.FormatInt(serverNow.UnixMilli(), 10)
		}), HeaderTimestamp, "looks like milliseconds; send the Unix time in whole seconds"},
		{"signed 6 minutes ago", signed(secret, serverNow.Add(-6*time.Minute), "/", "", body), HeaderTimestamp, "is 6m0s from the server's clock; requests are accepted within 5m0s"},
		{"signed 6 minutes ahead", signed(secret, serverNow.Add(6*time.Minute), "/", "", body), HeaderTimestamp, "is 6m0s from the server's clock"},
		{"no signature", with(good(), func(r *events.LambdaFunctionURLRequest) { delete(r.Headers, "x-tributary-signature") }), HeaderSignature, "is missing"},
		{"signature without its version", with(good(), func(r *events.LambdaFunctionURLRequest) {
			r.Headers["x-tributary-signature"] = strings.TrimPrefix(r.Headers["x-tributary-signature"], "v1=")
		}), HeaderSignature, "is not v1= and 64 hex digits"},
		{"another secret", signed("not-the-secret", serverNow, "/", `"k-1"`, body), HeaderSignature, "does not match the request"},
		{"body changed after signing", with(good(), func(r *events.LambdaFunctionURLRequest) { r.Body = batchOf("a", "b", "c") }), HeaderSignature, "does not match"},
		{"sent to another route", with(good(), func(r *events.LambdaFunctionURLRequest) { r.RawPath, r.RequestContext.HTTP.Path = "/orders", "/orders" }), HeaderSignature, "does not match"},
		{"another Idempotency-Key", with(good(), func(r *events.LambdaFunctionURLRequest) { r.Headers["idempotency-key"] = `"k-2"` }), HeaderSignature, "does not match"},
		{"Idempotency-Key removed", with(good(), func(r *events.LambdaFunctionURLRequest) { delete(r.Headers, "idempotency-key") }), HeaderSignature, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(refusingPutter{t}, "events", WithRoutes(testRoutes), WithClock(func() time.Time { return serverNow }),
				WithSignedRequests(staticSecrets{[]byte(secret)}), WithLogger(slog.New(slog.DiscardHandler)))
			r, _ := h.Handle(context.Background(), tt.req)
			if r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Body, tt.header) || !strings.Contains(r.Body, tt.text) {
				t.Errorf("%d %s, want 401 naming %s: %s", r.StatusCode, r.Body, tt.header, tt.text)
			}
		})
	}
	// And the good one passes (so the cases above fail for their reason).
	p := &scriptedPutter{}
	h := New(p, "events", WithRoutes(testRoutes), WithClock(func() time.Time { return serverNow }), WithSignedRequests(staticSecrets{[]byte(secret)}))
	if r, _ := h.Handle(context.Background(), signed(secret, serverNow.Add(-4*time.Minute), "/", "", body)); r.StatusCode != 202 || len(p.calls) != 1 {
		t.Errorf("a request signed 4 minutes ago: %d %s, want 202", r.StatusCode, r.Body)
	}
}

// TestSignatureRefusalLogsABoundedPath: a refused signature is logged
// before the path is matched to a route, so the path is whatever anyone
// sent, unauthenticated: the line repeats at most the first 128 bytes of
// it, as the 404 answer does, and a long path costs no more log bytes.
func TestSignatureRefusalLogsABoundedPath(t *testing.T) {
	var buf bytes.Buffer
	h := New(refusingPutter{t}, "events", WithRoutes(testRoutes), WithClock(func() time.Time { return serverNow }),
		WithSignedRequests(staticSecrets{[]byte("s3cret")}), WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	path := "/" + strings.Repeat("p", 8<<10)
	req := postTo(path, batchOf("a"))
	if r, _ := h.Handle(context.Background(), req); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d %s, want 401", r.StatusCode, r.Body)
	}
	line := strings.TrimSpace(buf.String())
	if !strings.Contains(line, "request refused: signature") || !strings.Contains(line, `"path":"/ppp`) {
		t.Fatalf("log %q; want the refusal with the start of the path", line)
	}
	if len(line) > 1024 {
		t.Errorf("the refusal's log line is %d bytes for a path of %d; want at most 1024: %.300s…", len(line), len(path), line)
	}
}

// TestSignedRequestsWithSecretsManager: the secret is read from Secrets
// Manager (on the stand-in); a replay within the window gets the first
// answer and writes nothing; after a rotation both the new secret and the
// previous one are accepted.
func TestSignedRequestsWithSecretsManager(t *testing.T) {
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	sm, kin, db := secretsmanager.NewFromConfig(cfg), kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("ingest-signing"), SecretString: aws.String("secret-v1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("signed-events"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if err := idempotency.CreateTable(ctx, db, "signed-requests"); err != nil {
		t.Fatal(err)
	}
	// Through EnvOptions, as the function's main builds it.
	now := time.Now()
	opts, err := EnvOptions(ctx, func(k string) string {
		return map[string]string{EnvAuth: AuthHMAC, EnvSecretARN: aws.ToString(created.ARN), EnvIdempotencyTable: "signed-requests"}[k]
	}, Clients{DynamoDB: db, SecretsManager: sm})
	if err != nil {
		t.Fatal(err)
	}
	h := New(kin, "signed-events", append(opts, WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.DiscardHandler)))...)
	secret := h.signatures.secrets.(*SecretsManagerSecret)
	secret.now = func() time.Time { return now }

	req := signed("secret-v1", now, "/", "", batchOf("s-1", "s-2"))
	first, _ := h.Handle(ctx, req)
	if first.StatusCode != 202 {
		t.Fatalf("signed request: %d %s", first.StatusCode, first.Body)
	}
	replay, _ := h.Handle(ctx, req)
	if replay.StatusCode != 202 || replay.Body != first.Body || replay.Headers[HeaderReplayed] != "true" {
		t.Errorf("replay within the window: %d %v %s, want the first answer replayed", replay.StatusCode, replay.Headers, replay.Body)
	}
	now = now.Add(MaxClockSkew + time.Second)
	if late, _ := h.Handle(ctx, req); late.StatusCode != http.StatusUnauthorized {
		t.Errorf("replay after the window: %d %s, want 401", late.StatusCode, late.Body)
	}
	if got := onStream(t, idemEnv{kin: kin, stream: "signed-events"}); got["s-1"] != 1 || got["s-2"] != 1 {
		t.Errorf("stream holds %v, want s-1 and s-2 once", got)
	}

	// Rotation: the new value becomes AWSCURRENT, the old one AWSPREVIOUS.
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: aws.String("secret-v2")}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(secretMinRefresh)
	for _, s := range []string{"secret-v2", "secret-v1"} {
		r, _ := h.Handle(ctx, signed(s, now, "/", "", batchOf("rot-"+s)))
		if r.StatusCode != 202 {
			t.Errorf("signed with %s after the rotation: %d %s, want 202", s, r.StatusCode, r.Body)
		}
	}
	if r, _ := h.Handle(ctx, signed("secret-v0", now, "/", "", batchOf("never"))); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("signed with a secret never set: %d, want 401", r.StatusCode)
	}

	// A secret that cannot be read fails the function's init, naming it.
	_, err = EnvOptions(ctx, func(k string) string {
		return map[string]string{EnvAuth: AuthHMAC, EnvSecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf"}[k]
	}, Clients{SecretsManager: sm})
	if err == nil || !strings.Contains(err.Error(), "INGEST_SECRET_ARN") || !strings.Contains(err.Error(), "missing-AbCdEf") {
		t.Errorf("missing secret: %v, want an init error naming INGEST_SECRET_ARN and the secret", err)
	}
}

// failingSecret fails every read, as Secrets Manager does when the role
// lacks permission or the service is down.
type failingSecret struct{}

func (failingSecret) Secrets(context.Context) ([][]byte, error) {
	return nil, errors.New("AccessDeniedException")
}
func (failingSecret) Refresh(context.Context) ([][]byte, bool, error) {
	return nil, false, errors.New("AccessDeniedException")
}

func TestUnreadableSecretIs503(t *testing.T) {
	h := New(refusingPutter{t}, "events", WithClock(func() time.Time { return serverNow }), WithSignedRequests(failingSecret{}), WithLogger(slog.New(slog.DiscardHandler)))
	r, _ := h.Handle(context.Background(), signed("x", serverNow, "/", "", batchOf("a")))
	if r.StatusCode != http.StatusServiceUnavailable || r.Headers["Retry-After"] == "" {
		t.Errorf("%d %v %s, want 503 with Retry-After", r.StatusCode, r.Headers, r.Body)
	}
}

func ExampleSign() {
	body := []byte(`[{"id":"evt-1","type":"page_view","key":"user-42","occurredAt":"2026-11-29T07:41:07Z","sentAt":"2026-11-29T07:41:08Z"}]`)
	ts, sig := Sign([]byte("tributary-test-secret"), time.Unix(1796040000, 0), "/", "", body)
	// Send body with the headers X-Tributary-Timestamp: ts and
	// X-Tributary-Signature: sig.
	fmt.Println(HeaderTimestamp+":", ts)
	fmt.Println(HeaderSignature+":", sig[:3]+"…")
	// Output:
	// X-Tributary-Timestamp: 1796040000
	// X-Tributary-Signature: v1=…
}
