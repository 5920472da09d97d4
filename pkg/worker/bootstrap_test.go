package worker

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tributary-dev/tributary/emulator/rie"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
	"github.com/tributary-dev/tributary/pkg/idempotency"
)

// TestBootstrapUnderRIE runs the real functions/worker binary under
// aws-lambda-rie against the stand-in: the sample batch with a duplicate task
// id, delivered twice, runs the task's side effect once; a payload that is
// not an event object ([1]) fails saying so; without its configuration the
// function fails at init naming the variable.
func TestBootstrapUnderRIE(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bootstrap, "../../functions/worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building functions/worker: %v\n%s", err, out)
	}
	if _, err := rie.Install(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srv := standintest.Start(t)
	db := dynamodb.NewFromConfig(standintest.Config(t, srv))
	if err := idempotency.CreateTable(ctx, db, "e2e-idempotency"); err != nil {
		t.Fatal(err)
	}
	if err := CreateResultsTable(ctx, db, "e2e-results"); err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile("../../events/worker/sqs-tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"AWS_ENDPOINT_URL":       srv.Endpoint(),
		"AWS_ACCESS_KEY_ID":      "test",
		"AWS_SECRET_ACCESS_KEY":  "test",
		"AWS_REGION":             "us-east-1",
		"IDEMPOTENCY_TABLE_NAME": "e2e-idempotency",
		"RESULTS_TABLE_NAME":     "e2e-results",
	}

	var mu sync.Mutex
	var logs strings.Builder
	start := func(name string, env map[string]string) *rie.Function {
		fn, err := rie.Start(ctx, rie.Config{Name: name, Bootstrap: bootstrap, Env: env, Timeout: 10 * time.Second,
			Logs: func(_, line string) { mu.Lock(); logs.WriteString(line + "\n"); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fn.Stop() })
		return fn
	}

	fn := start("worker", env)
	for delivery := 1; delivery <= 2; delivery++ {
		res, err := fn.Invoke(ctx, sample)
		if err != nil {
			t.Fatal(err)
		}
		if res.FunctionError != "" {
			t.Fatalf("delivery %d: function error %s", delivery, res.Payload)
		}
		var resp struct {
			BatchItemFailures []any `json:"batchItemFailures"`
		}
		if err := json.Unmarshal(res.Payload, &resp); err != nil || resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: response %s, want batchItemFailures []", delivery, res.Payload)
		}
	}
	// A payload that is not an SQS event object fails saying so, not with
	// encoding/json's words about events.SQSEvent.
	res, err := fn.Invoke(ctx, []byte(`[1]`))
	if err != nil {
		t.Fatal(err)
	}
	if res.FunctionError == "" || !strings.Contains(string(res.Payload), "not an SQS event: the event is an array, not a JSON object") {
		t.Errorf("[1]: function error %q, %s; want it refused naming an array and the SQS event", res.FunctionError, res.Payload)
	}
	f := &fixture{db: db, results: "e2e-results"}
	if n := f.executions(t, "task-1001"); n != 1 {
		t.Errorf("task-1001's side effect ran %d times over two deliveries of two copies, want 1", n)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, `"Duplicates":1`) || !strings.Contains(out, `"Duplicates":2`) {
		t.Errorf("EMF lines do not show 1 then 2 duplicates:\n%s", out)
	}

	delete(env, "RESULTS_TABLE_NAME")
	broken := start("worker-unconfigured", env)
	res, err = broken.Invoke(ctx, sample)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out = logs.String()
	mu.Unlock()
	if res.FunctionError == "" || !strings.Contains(out, "environment variable RESULTS_TABLE_NAME is not set") {
		t.Errorf("unconfigured function: error %q, logs:\n%s\nwant a failure naming RESULTS_TABLE_NAME", res.FunctionError, out)
	}
}
