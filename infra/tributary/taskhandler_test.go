package tributary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestTaskHandler: an SQS function of your own gets a tasks queue with a
// dead-letter queue (redrive after MaxReceiveCount, visibility six times
// the timeout), an idempotency table of package idempotency's schema (id,
// TTL on expiration), a mapping that reports batch item failures, the
// variable handler.TasksFromEnv reads, and grants of exactly what package
// handler does (no wildcards); cdk-nag finds nothing. FIFO makes both
// queues FIFO. A missing bootstrap or a bad prop is an error naming it.
func TestTaskHandler(t *testing.T) {
	assets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(assets, FunctionReceipts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(assets, FunctionReceipts, "bootstrap"), []byte("dummy receipts"), 0o755); err != nil {
		t.Fatal(err)
	}
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Tasks"), nil)
	props := TaskHandlerProps{Name: FunctionReceipts, AssetDir: assets, BatchSize: 5, MaxReceiveCount: 3}
	h, err := NewTaskHandler(stack, "Receipts", props)
	if err != nil {
		t.Fatal(err)
	}
	addNag(app)
	tmpl := templateOf(stack)

	qID, dlqID, tableID := logicalID(stack, h.Queue), logicalID(stack, h.DLQ), logicalID(stack, h.Idempotency)
	fnID, fn := tmpl.function(t, FunctionReceipts)
	timeout, _ := fn.Properties["Timeout"].(float64)
	q := tmpl.Resources[qID]
	if q.Type != "AWS::SQS::Queue" || tmpl.Resources[dlqID].Type != "AWS::SQS::Queue" {
		t.Fatalf("queue %s, DLQ %s; want SQS queues", q.Type, tmpl.Resources[dlqID].Type)
	}
	assertProps(t, "queue", q.Properties, map[string]any{
		"RedrivePolicy":        map[string]any{"deadLetterTargetArn": getAtt(dlqID, "Arn"), "maxReceiveCount": 3.0},
		"VisibilityTimeout":    6 * timeout,
		"SqsManagedSseEnabled": true,
		"FifoQueue":            nil,
	})
	if timeout != DefaultTimeout.Seconds() {
		t.Errorf("Timeout = %v, want the default %v", timeout, DefaultTimeout.Seconds())
	}
	hash := []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}}
	assertProps(t, "idempotency table", tmpl.Resources[tableID].Properties, map[string]any{
		"KeySchema":               hash,
		"AttributeDefinitions":    []any{map[string]any{"AttributeName": "id", "AttributeType": "S"}},
		"BillingMode":             "PAY_PER_REQUEST",
		"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
		"GlobalSecondaryIndexes":  nil,
	})
	env := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	assertProps(t, "environment", env, map[string]any{"IDEMPOTENCY_TABLE_NAME": ref(tableID)})
	m := tmpl.mappingOf(t, fnID)
	assertProps(t, "mapping", m.Properties, map[string]any{
		"EventSourceArn":        getAtt(qID, "Arn"),
		"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		"BatchSize":             5.0,
	})

	grants := tmpl.grants(logicalID(stack, h.Function.Role))
	var want []string
	for _, a := range idempotencyTableActions {
		want = append(want, a+" "+tableID+".Arn")
	}
	for _, a := range sourceQueueActions {
		want = append(want, a+" "+qID+".Arn")
	}
	for _, a := range deadLetterQueueActions {
		want = append(want, a+" "+dlqID+".Arn")
	}
	want = append(want, "sqs:ReceiveMessage "+qID+".Arn", "sqs:DeleteMessage "+qID+".Arn")
	for _, g := range want {
		if !grants[g] {
			t.Errorf("role lacks %s; it has %v", g, grants)
		}
	}
	for _, g := range []string{"dynamodb:Scan " + tableID + ".Arn", "dynamodb:Query " + tableID + ".Arn", "dynamodb:BatchWriteItem " + tableID + ".Arn",
		"sqs:SendMessage " + qID + ".Arn", "sqs:ReceiveMessage " + dlqID + ".Arn", "sqs:DeleteMessage " + dlqID + ".Arn", "sqs:PurgeQueue " + dlqID + ".Arn"} {
		if grants[g] {
			t.Errorf("role may %s: more than package handler needs", g)
		}
	}
	for g := range grants {
		if strings.HasPrefix(g, "dynamodb:") && !strings.HasSuffix(g, " "+tableID+".Arn") {
			t.Errorf("role may %s: a DynamoDB grant beyond the idempotency table", g)
		}
	}
	assertNoWildcards(t, grants)

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})

	t.Run("fifo", func(t *testing.T) {
		fifo := props
		fifo.FIFO = true
		stack := awscdk.NewStack(newTestApp(t.TempDir(), nil), jsii.String("FifoTasks"), nil)
		f, err := NewTaskHandler(stack, "Fifo", fifo)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := templateOf(stack)
		for what, id := range map[string]string{"queue": logicalID(stack, f.Queue), "DLQ": logicalID(stack, f.DLQ)} {
			if got := tmpl.Resources[id].Properties["FifoQueue"]; got != true {
				t.Errorf("FIFO task handler's %s: FifoQueue = %v, want true", what, got)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name   string
			change func(p *TaskHandlerProps)
			want   string
		}{
			{"NoAsset", func(p *TaskHandlerProps) { p.AssetDir = t.TempDir() }, "receipts/bootstrap does not exist"},
			{"NoName", func(p *TaskHandlerProps) { p.Name = "" }, `Name ""`},
			{"BadName", func(p *TaskHandlerProps) { p.Name = "Receipts" }, `Name "Receipts"`},
			{"FifoBatch", func(p *TaskHandlerProps) { p.FIFO, p.BatchSize = true, 20 }, "BatchSize 20"},
			{"Concurrency", func(p *TaskHandlerProps) { p.MaxConcurrency = 1 }, "MaxConcurrency 1"},
		}
		for _, tt := range tests {
			bad := props
			tt.change(&bad)
			if _, err := NewTaskHandler(stack, tt.name, bad); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want an error naming %q", tt.name, err, tt.want)
			}
		}
	})
}
