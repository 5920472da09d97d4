package local_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/tributary-dev/tributary/emulator/cloudwatchlocal"
	"github.com/tributary-dev/tributary/emulator/local"
	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// TestFanOutEverySubscriberGetsEveryRecord runs a template with two
// subscribers of one stream — one through an enhanced fan-out consumer, one
// on shared throughput — and checks that FanOut sees each deliver every
// record, while the runner publishes the queues' AWS/SQS depth metrics.
func TestFanOutEverySubscriberGetsEveryRecord(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(bin, "subscriber"), "./testdata/subscriber")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test subscriber: %v\n%s", err, out)
	}
	for _, name := range []string{"enrich", "aggregate"} {
		if err := os.MkdirAll(filepath.Join(bin, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(bin, "subscriber"), filepath.Join(bin, name, "bootstrap")); err != nil {
			t.Fatal(err)
		}
	}
	srv := standintest.Start(t)
	var progress bytes.Buffer
	stack, err := local.Up(context.Background(), local.Options{
		Template: "testdata/fanout.template.json", Functions: bin, Endpoint: srv.Endpoint(), Stack: "FanOut", Progress: &progress,
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

	var entries []ktypes.PutRecordsRequestEntry
	for i := range 40 {
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), PartitionKey: aws.String(fmt.Sprintf("key-%d", i))})
	}
	if _, err := kinesis.NewFromConfig(stack.Config()).PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("FanOut-EventsD32975C2"), Records: entries}); err != nil {
		t.Fatal(err)
	}
	f, err := stack.FanOut(ctx, "FanOut-EventsD32975C2", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if f.Records != 40 || len(f.Subscribers) != 2 || !f.Complete() {
		t.Fatalf("fan-out %+v: want 40 records, 2 subscribers, each with all of them", f)
	}
	got := map[string]local.Subscriber{}
	for _, s := range f.Subscribers {
		got[s.Function] = s
	}
	if s := got["enrich"]; s.Received != 40 || !strings.HasSuffix(s.Consumer, "/consumer/enrich-efo") {
		t.Errorf("enrich %+v: want 40 records through consumer enrich-efo", s)
	}
	if s := got["aggregate"]; s.Received != 40 || s.Consumer != "" {
		t.Errorf("aggregate %+v: want 40 records on shared throughput", s)
	}
	var out bytes.Buffer
	f.Print(&out)
	for _, want := range []string{"40 records on stream FanOut-EventsD32975C2 to 2 subscribers, each got every record its filter passes", "enrich 40/40 (EFO consumer", "aggregate 40/40 (shared throughput)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed %q, want it to contain %q", out.String(), want)
		}
	}

	since := time.Now().Add(-time.Minute)
	if err := stack.PublishQueueMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _, ok, err := cloudwatchlocal.LatestQueueMetric(ctx, stack.Config(), cloudwatchlocal.MetricMessagesVisible, "FanOut-TasksDlqDCE5596F", since); err != nil || !ok || v != 0 {
		t.Errorf("DLQ depth metric = %v (found %v, err %v), want 0 published by the runner", v, ok, err)
	}
}
