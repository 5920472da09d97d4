package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/internal/testtools"
	"github.com/tributary-dev/tributary/pkg/ingest"
	"github.com/tributary-dev/tributary/pkg/stream"
)

// TestIngestIdempotencyKeyEndToEnd sends one request twice with the same
// Idempotency-Key through the function URL of the real ingest binary under
// aws-lambda-rie, with its records table from the synthesized template on
// moto: the second answer is the first, byte for byte; the stream holds one
// set of records; aggregate's windows count each event once; the same key
// with another body is refused.
func TestIngestIdempotencyKeyEndToEnd(t *testing.T) {
	t.Parallel()
	stack, _ := startTopology(t)
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	url := stack.URL("ingest")
	t.Run("bad envelopes are refused naming the field", func(t *testing.T) { ingestRejectsBadEnvelopesNamingTheField(t, url) })
	streamName := env(t, stack, "ingest", "EVENTS_STREAM_NAME")
	if env(t, stack, "ingest", "INGEST_IDEMPOTENCY_TABLE") == "" {
		t.Fatal("ingest has no INGEST_IDEMPOTENCY_TABLE")
	}
	w, err := stack.FindPipeline("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	traffic := local.Traffic{Keys: 3, Minutes: 1, Max: 6, Seed: 11, Now: now}
	evs, want := traffic.Generate()
	body, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	const key = `"5f0c9a7e-ingest-e2e-0001"`

	send := func(body []byte) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	status1, h1, body1 := send(body)
	if status1 != http.StatusAccepted {
		t.Fatalf("first: %d %s", status1, body1)
	}
	status2, h2, body2 := send(body)
	if status2 != status1 || body2 != body1 || h2.Get("Content-Type") != h1.Get("Content-Type") {
		t.Errorf("resent: %d %q %q, want the first answer %d %q %q", status2, h2.Get("Content-Type"), body2, status1, h1.Get("Content-Type"), body1)
	}
	if h2.Get("Idempotency-Replayed") != "true" || h1.Get("Idempotency-Replayed") != "" {
		t.Errorf("Idempotency-Replayed: first %q, resent %q; want only the resent one marked", h1.Get("Idempotency-Replayed"), h2.Get("Idempotency-Replayed"))
	}
	other, _ := json.Marshal(evs[:1])
	if status, _, b := send(other); status != http.StatusUnprocessableEntity || !strings.Contains(b, "different body") {
		t.Errorf("the key with another body: %d %s, want 422", status, b)
	}

	// One set of records on the stream.
	counts := map[string]int{}
	for _, e := range readEvents(t, ctx, stack.Config(), streamName) {
		counts[e.ID]++
	}
	for _, e := range evs {
		if counts[e.ID] != 1 {
			t.Errorf("event %s is on the stream %d times, want 1", e.ID, counts[e.ID])
		}
	}
	// And aggregate counted each once.
	from, to := now.Truncate(time.Minute).Add(-2*time.Minute), now.Add(time.Hour)
	vs, err := w.Wait(ctx, want, from, to, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	assertWindows(t, w, want, vs)
}

// readEvents reads every envelope on the stream, all shards.
func readEvents(t *testing.T, ctx context.Context, cfg aws.Config, name string) []stream.Envelope {
	t.Helper()
	kc := kinesis.NewFromConfig(cfg)
	shards, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []stream.Envelope
	for _, sh := range shards.Shards {
		it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			recs, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs.Records {
				var e stream.Envelope
				if stream.Unmarshal(r.Data, &e) == nil {
					out = append(out, e)
				}
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	return out
}

// TestSignedIngestEndToEnd synthesizes the stack with
// -c tributary:ingestAuth=HMAC, deploys it on moto (the local runner
// creates the signing secret), and runs the real ingest binary, which reads
// the secret at init: an unsigned request is a 401; docs/events.md's
// openssl/curl recipe, run as written, is accepted; a request signed in Go
// and sent twice is written once.
func TestSignedIngestEndToEnd(t *testing.T) {
	t.Parallel()
	testtools.Need(t, "docs/events.md's signing recipe needs it", "bash", "openssl", "curl")
	// make synth-hmac: cdk synth -c tributary:ingestAuth=HMAC, as make
	// synth-local synthesizes (the bootstraps built for this machine as
	// assets, referenced in place), remade when the app changes.
	const template = ".build/synth-hmac/Tributary.template.json"
	root, _, bin := paths(t, template)
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template: filepath.Join(root, template), Functions: bin, Endpoint: srv.Endpoint(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("local.Up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	url := stack.URL("ingest")
	streamName := env(t, stack, "ingest", "EVENTS_STREAM_NAME")
	got, err := secretsmanager.NewFromConfig(stack.Config()).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{
		SecretId: aws.String(env(t, stack, "ingest", "INGEST_SECRET_ARN")),
	})
	if err != nil {
		t.Fatalf("the signing secret the runner created: %v", err)
	}
	secret := aws.ToString(got.SecretString)

	post := func(body []byte, headers map[string]string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	now := time.Now().UTC()
	evs := []stream.Envelope{{ID: "signed-go-1", Type: "page_view", Key: "sensor-7", OccurredAt: now.Add(-time.Second), SentAt: now, Data: json.RawMessage(`{"celsius":21.5}`)}}
	body, _ := json.Marshal(evs)
	if status, _, b := post(body, nil); status != http.StatusUnauthorized || !strings.Contains(b, "X-Tributary-Timestamp: is missing") {
		t.Errorf("unsigned: %d %s, want 401 naming X-Tributary-Timestamp", status, b)
	}
	ts, sig := ingest.Sign([]byte(secret), time.Now(), "/", "", body)
	signed := map[string]string{ingest.HeaderTimestamp: ts, ingest.HeaderSignature: sig}
	status1, _, b1 := post(body, signed)
	status2, h2, b2 := post(body, signed) // a replay within the window
	if status1 != http.StatusAccepted || status2 != status1 || b2 != b1 || h2.Get("Idempotency-Replayed") != "true" {
		t.Errorf("signed in Go, sent twice: %d %s, then %d %v %s; want 202 and the same answer replayed", status1, b1, status2, h2, b2)
	}

	// The recipe under "Signed requests (HMAC)", run as written.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := recipeBlock(t, "docs/events.md", string(doc), "<!-- tested by emulator/local TestSignedIngestEndToEnd")
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", recipe)
	cmd.Env = append(os.Environ(), "URL="+url, "SECRET="+secret)
	answer, err := cmd.Output()
	if err != nil || !strings.Contains(string(answer), `"accepted":1`) {
		t.Errorf("docs/events.md's recipe: %v, answer %s; want 1 accepted", err, answer)
	}

	counts := map[string]int{}
	for _, e := range readEvents(t, ctx, stack.Config(), streamName) {
		counts[e.ID]++
	}
	if counts["signed-go-1"] != 1 || counts["evt-1"] != 1 {
		t.Errorf("stream holds %v, want signed-go-1 and the recipe's evt-1 once each", counts)
	}
}

// recipeBlock returns the first ```sh block after marker in doc, the text
// of file (README.md or a file under docs/, named in the failures).
func recipeBlock(t *testing.T, file, doc, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("%s has no %q", file, marker)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s: no ```sh block after %q", file, marker)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the recipe block is not closed")
	}
	return block
}
