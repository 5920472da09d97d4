package template

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tributary-dev/tributary/emulator/standin/standintest"
)

// progressLog collects Progress messages.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) add(m string) {
	p.mu.Lock()
	p.msgs = append(p.msgs, m)
	p.mu.Unlock()
}

func (p *progressLog) count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

func TestProvision(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()
	tmpl := mustLoad(t, "testdata/Tributary.template.json")

	var cold progressLog
	start := time.Now()
	d, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Progress: cold.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold Provision (1 stream, 2 tables, 2 queues): %v", time.Since(start))
	if got := cold.count("created "); got != 5 {
		t.Errorf("cold run created %d resources, want 5: %q", got, cold.msgs)
	}

	kc, dc, qc := kinesis.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)

	t.Run("stream is ACTIVE with the template's shard count", func(t *testing.T) {
		out, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(streamName)})
		if err != nil {
			t.Fatal(err)
		}
		s := out.StreamDescriptionSummary
		if s.StreamStatus != kintypes.StreamStatusActive || aws.ToInt32(s.OpenShardCount) != 2 {
			t.Errorf("stream %s: status %s, %d shards; want ACTIVE, 2", streamName, s.StreamStatus, aws.ToInt32(s.OpenShardCount))
		}
		if got := d.Streams(); len(got) != 1 || got[0].ARN != aws.ToString(s.StreamARN) || got[0].Shards != 2 {
			t.Errorf("Streams() = %+v", got)
		}
	})

	var quarantineStream string
	t.Run("table has its stream and TTL", func(t *testing.T) {
		name := "Tributary-QuarantineA9F6A7C1"
		out, err := dc.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		ss := out.Table.StreamSpecification
		if ss == nil || !aws.ToBool(ss.StreamEnabled) || ss.StreamViewType != ddbtypes.StreamViewTypeNewAndOldImages {
			t.Errorf("stream spec = %+v, want NEW_AND_OLD_IMAGES enabled", ss)
		}
		quarantineStream = aws.ToString(out.Table.LatestStreamArn)
		if quarantineStream == "" {
			t.Fatal("no LatestStreamArn")
		}
		ttl, err := dc.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if d := ttl.TimeToLiveDescription; d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
			t.Errorf("TTL = %s on %q, want ENABLED on expiresAt", d.TimeToLiveStatus, aws.ToString(d.AttributeName))
		}
		got, err := d.Resolve(map[string]any{"Fn::GetAtt": []any{"QuarantineA9F6A7C1", "StreamArn"}})
		if err != nil || got != quarantineStream {
			t.Errorf("Resolve StreamArn = %q, %v; want %q", got, err, quarantineStream)
		}
		counts, err := dc.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Tributary-Counts8E0E1E4B")})
		if err != nil {
			t.Fatal(err)
		}
		if counts.Table.BillingModeSummary == nil || counts.Table.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
			t.Errorf("counts billing = %+v, want PAY_PER_REQUEST", counts.Table.BillingModeSummary)
		}
	})

	t.Run("queue redrives to the DLQ", func(t *testing.T) {
		url, err := qc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queueName)})
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := qc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		var rp struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &rp); err != nil {
			t.Fatalf("RedrivePolicy %q: %v", attrs.Attributes["RedrivePolicy"], err)
		}
		dlqARN := "arn:aws:sqs:us-east-1:123456789012:" + dlqName
		if rp.DeadLetterTargetArn != dlqARN {
			t.Errorf("deadLetterTargetArn = %q, want %q", rp.DeadLetterTargetArn, dlqARN)
		}
		if n, _ := json.Marshal(rp.MaxReceiveCount); strings.Trim(string(n), `"`) != "5" {
			t.Errorf("maxReceiveCount = %v, want 5", rp.MaxReceiveCount)
		}
		if attrs.Attributes["VisibilityTimeout"] != "180" {
			t.Errorf("VisibilityTimeout = %q, want 180", attrs.Attributes["VisibilityTimeout"])
		}
		qs := d.Queues()
		if len(qs) != 2 || qs[0].URL != aws.ToString(url.QueueUrl) {
			t.Errorf("Queues() = %+v, want the Failures queue at %s first", qs, aws.ToString(url.QueueUrl))
		}
	})

	t.Run("functions and mappings see the endpoint's names", func(t *testing.T) {
		fns, err := d.Functions()
		if err != nil {
			t.Fatal(err)
		}
		env := fns[2].Env
		if !strings.HasPrefix(env["FAILURES_QUEUE_URL"], srv.Endpoint()) || !strings.HasSuffix(env["FAILURES_QUEUE_URL"], "/"+queueName) {
			t.Errorf("FAILURES_QUEUE_URL = %q, want the queue's URL on %s", env["FAILURES_QUEUE_URL"], srv.Endpoint())
		}
		if env["QUARANTINE_STREAM_ARN"] != quarantineStream {
			t.Errorf("QUARANTINE_STREAM_ARN = %q, want %q", env["QUARANTINE_STREAM_ARN"], quarantineStream)
		}
		ms, err := d.Mappings()
		if err != nil {
			t.Fatal(err)
		}
		if ms[1].SourceKind != SourceDynamoDB || ms[1].SourceARN != quarantineStream {
			t.Errorf("DynamoDB mapping = %+v, want source %s", ms[1], quarantineStream)
		}
	})

	t.Run("second Provision reuses everything", func(t *testing.T) {
		var warm progressLog
		start := time.Now()
		d2, err := Provision(ctx, cfg, tmpl, ProvisionOptions{Progress: warm.add})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("warm Provision: %v", time.Since(start))
		if c, r := warm.count("created "), warm.count("reused "); c != 0 || r != 5 {
			t.Errorf("warm run: %d created, %d reused; want 0, 5: %q", c, r, warm.msgs)
		}
		for _, s := range d2.Streams() {
			if !s.Reused {
				t.Errorf("stream %s not reused", s.Name)
			}
		}
		if got := d2.Tables(); len(got) != 2 || !got[0].Reused || !got[1].Reused || got[1].StreamARN != quarantineStream {
			t.Errorf("Tables() = %+v, want both reused, quarantine stream %s", got, quarantineStream)
		}
		for _, q := range d2.Queues() {
			if !q.Reused {
				t.Errorf("queue %s not reused", q.Name)
			}
		}
	})

	t.Run("an existing table with other keys is an error, not a silent reuse", func(t *testing.T) {
		changed := mustLoad(t, "testdata/Tributary.template.json")
		ks := changed.Resources["Counts8E0E1E4B"].Properties["KeySchema"].([]any)
		changed.Resources["Counts8E0E1E4B"].Properties["KeySchema"] = ks[:1]
		_, err := Provision(ctx, cfg, changed, ProvisionOptions{})
		if err == nil || !strings.Contains(err.Error(), "Resources.Counts8E0E1E4B") || !strings.Contains(err.Error(), "another key schema") {
			t.Errorf("Provision with changed keys: %v, want an error naming Counts8E0E1E4B and the key schema", err)
		}
	})
}

func TestProvisionMapsWhatDiffersLocally(t *testing.T) {
	t.Parallel()
	srv := standintest.Start(t)
	cfg := standintest.Config(t, srv)
	ctx := context.Background()

	d, err := Provision(ctx, cfg, mustLoad(t, "testdata/extras.template.json"), ProvisionOptions{Stack: "Extras"})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ON_DEMAND stream becomes 4 shards and says so", func(t *testing.T) {
		out, err := kinesis.NewFromConfig(cfg).DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("Extras-clicks")})
		if err != nil {
			t.Fatal(err)
		}
		if n := aws.ToInt32(out.StreamDescriptionSummary.OpenShardCount); n != onDemandShards {
			t.Errorf("shards = %d, want %d", n, onDemandShards)
		}
		notes := strings.Join(d.Notes(), "\n")
		for _, want := range []string{"ON_DEMAND stream Extras-clicks emulated as a provisioned stream of 4 shards", "StreamEncryption ignored locally"} {
			if !strings.Contains(notes, want) {
				t.Errorf("Notes() = %q, want %q", notes, want)
			}
		}
	})
	t.Run("global table with GSI and stream", func(t *testing.T) {
		out, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Extras-ProfilesTableV2A1B2C3D4")})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Table.GlobalSecondaryIndexes) != 1 || aws.ToString(out.Table.GlobalSecondaryIndexes[0].IndexName) != "byEmail" {
			t.Errorf("GSIs = %+v, want byEmail", out.Table.GlobalSecondaryIndexes)
		}
		if aws.ToString(out.Table.LatestStreamArn) == "" {
			t.Error("no stream")
		}
	})
	t.Run("FIFO queue gets the .fifo name and its attributes", func(t *testing.T) {
		outs, err := d.Outputs()
		if err != nil {
			t.Fatal(err)
		}
		name := outs["OrdersQueueName"]
		if name != "Extras-OrdersFifo9A8B7C6D.fifo" {
			t.Fatalf("queue name = %q", name)
		}
		qc := sqs.NewFromConfig(cfg)
		url, err := qc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := qc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if attrs.Attributes["FifoQueue"] != "true" || attrs.Attributes["ContentBasedDeduplication"] != "true" || attrs.Attributes["VisibilityTimeout"] != "45" {
			t.Errorf("attributes = %v, want FIFO, content-based dedup, visibility 45", attrs.Attributes)
		}
	})
}
