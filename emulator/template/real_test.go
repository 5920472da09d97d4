package template

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// The infra engineer's synthesized template (infra/cdk.out is not in git, so
// a copy lives in testdata/cdk.out). It checks the contract between the CDK
// stack and the local runner: every function names its binary, its
// environment resolves, and the mappings carry the semantics the contracts
// ask for.
const realTemplate = "testdata/cdk.out/Tributary.template.json"

func TestRealTemplateProvisions(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl := mustLoad(t, realTemplate)

	d, err := Provision(ctx, cfg, tmpl, ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Streams(); len(got) != 1 || got[0].Shards != 2 {
		t.Errorf("Streams() = %+v, want one stream of 2 shards", got)
	}
	if got := d.Tables(); len(got) != 2 {
		t.Errorf("Tables() = %+v, want counts and quarantine", got)
	}
	qs := d.Queues()
	if len(qs) != 2 {
		t.Fatalf("Queues() = %+v, want failures and its DLQ", qs)
	}

	fns, err := d.Functions()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{} // binary → the contract's env variable
	byBinary := map[string]FunctionSpec{}
	for _, f := range fns {
		byBinary[f.Binary] = f
	}
	for binary, v := range map[string]string{"ingest": "EVENTS_STREAM_NAME", "aggregate": "COUNTS_TABLE_NAME", "quarantine": "QUARANTINE_TABLE_NAME"} {
		f, ok := byBinary[binary]
		if !ok {
			t.Errorf("no function with Metadata tributary:function %q", binary)
			continue
		}
		env[binary] = f.Env[v]
		if f.Env[v] == "" || !strings.HasPrefix(f.Env[v], "Tributary-") {
			t.Errorf("%s: %s = %q, want a physical name of the stack", binary, v, f.Env[v])
		}
		if f.Architecture != "arm64" || f.Runtime != "provided.al2023" || f.Handler != "bootstrap" {
			t.Errorf("%s: %s %s %s, want arm64 provided.al2023 bootstrap", binary, f.Architecture, f.Runtime, f.Handler)
		}
		if !strings.HasPrefix(f.LogGroup, "Tributary-") {
			t.Errorf("%s: LogGroup = %q, want the stack's log group from LoggingConfig", binary, f.LogGroup)
		}
	}
	if env["ingest"] != d.Streams()[0].Name {
		t.Errorf("ingest's EVENTS_STREAM_NAME = %q, want the stream %q", env["ingest"], d.Streams()[0].Name)
	}

	ms, err := d.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	var failuresARN string
	for _, q := range qs {
		if !strings.Contains(q.Name, "Dlq") {
			failuresARN = q.ARN
		}
	}
	var sawKinesis, sawSQS bool
	for _, m := range ms {
		switch m.SourceKind {
		case SourceKinesis:
			sawKinesis = true
			if m.FunctionLogicalID != byBinary["aggregate"].LogicalID || m.StartingPosition != "TRIM_HORIZON" ||
				!m.ReportBatchItemFailures || !m.BisectBatchOnFunctionError || m.MaximumRetryAttempts != 3 ||
				m.MaximumRecordAge != time.Hour || m.OnFailureARN != failuresARN {
				t.Errorf("Kinesis mapping = %+v, want aggregate, TRIM_HORIZON, item failures, bisect, 3 retries, 1h, on failure %s", m, failuresARN)
			}
		case SourceSQS:
			sawSQS = true
			if m.FunctionLogicalID != byBinary["quarantine"].LogicalID || m.SourceARN != failuresARN ||
				!m.ReportBatchItemFailures || m.BatchSize != 10 || m.MaximumConcurrency != 2 {
				t.Errorf("SQS mapping = %+v, want quarantine on %s, item failures, batch 10, concurrency 2", m, failuresARN)
			}
		}
	}
	if !sawKinesis || !sawSQS {
		t.Errorf("mappings %+v, want a Kinesis and an SQS one", ms)
	}

	us, err := d.URLs()
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].FunctionLogicalID != byBinary["ingest"].LogicalID {
		t.Errorf("URLs() = %+v, want one on ingest", us)
	}
	outs, err := d.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	if outs["EventsStreamName"] != env["ingest"] || !strings.HasPrefix(outs["FailuresQueueUrl"], srv.Endpoint()) {
		t.Errorf("Outputs() = %v", outs)
	}
	for _, s := range d.Skipped() {
		if s.Type == "AWS::Kinesis::Stream" || s.Type == "AWS::SQS::Queue" || strings.HasPrefix(s.Type, "AWS::DynamoDB::") {
			t.Errorf("%s (%s) skipped", s.LogicalID, s.Type)
		}
	}
}

// TestLiveSynthOutputPlans checks the template `cdk synth` last wrote (make
// test synthesizes first), so that a change in the stack that the runner cannot follow
// shows up here before `make local` trips on it.
func TestLiveSynthOutputPlans(t *testing.T) {
	path := filepath.Join("..", "..", "infra", "cdk.out", "Tributary.template.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no synthesized template at %s: run `make synth` first (`make test` does): %v", path, err)
	}
	d, err := Plan(mustLoad(t, path), ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fns, err := d.Functions()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if f.Binary == "" {
			t.Errorf("%s has no Metadata %q: the local runner cannot tell which binary runs it", f.LogicalID, FunctionMetadataKey)
		}
	}
	// Mappings on DynamoDB streams need a StreamArn, which only Provision
	// learns; anything else must resolve from the plan alone.
	if _, err := d.Mappings(); err != nil && !strings.Contains(err.Error(), "is not provisioned yet") {
		t.Error(err)
	}
	if _, err := d.URLs(); err != nil {
		t.Error(err)
	}
	// Every scheduled rule the runner plays invokes a function it runs.
	schedules, err := d.Schedules()
	if err != nil {
		t.Error(err)
	}
	byID := map[string]FunctionSpec{}
	for _, f := range fns {
		byID[f.LogicalID] = f
	}
	for _, s := range schedules {
		for _, tg := range s.Targets {
			if byID[tg.FunctionLogicalID].Binary == "" {
				t.Errorf("schedule %s targets %s, which has no binary", s.LogicalID, tg.FunctionLogicalID)
			}
		}
	}
}
