package tributary

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// memoryOf is the memory size the stack gives function name.
func memoryOf(name string) float64 {
	switch name {
	case FunctionWorker:
		return workerMemoryMB
	case FunctionSnapshot:
		return snapshotMemoryMB
	case FunctionAggregate:
		return aggregateMemoryMB
	}
	return functionMemoryMB
}

// workerTables are TestTables' rows for the worker's tables: package
// idempotency's schema (id, TTL on expiration) and package worker's results.
func workerTables(s *TributaryStack) []struct {
	name  string
	id    string
	props map[string]any
} {
	hash := func(name string) any { return []any{map[string]any{"AttributeName": name, "KeyType": "HASH"}} }
	attr := func(name string) any { return []any{map[string]any{"AttributeName": name, "AttributeType": "S"}} }
	return []struct {
		name  string
		id    string
		props map[string]any
	}{
		{
			name: "Idempotency",
			id:   logicalID(s.Stack, s.Work.Idempotency),
			props: map[string]any{
				"KeySchema":               hash("id"),
				"AttributeDefinitions":    attr("id"),
				"GlobalSecondaryIndexes":  nil,
				"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
			},
		},
		{
			name: "Results",
			id:   logicalID(s.Stack, s.Work.Results),
			props: map[string]any{
				"KeySchema":               hash("taskId"),
				"AttributeDefinitions":    attr("taskId"),
				"GlobalSecondaryIndexes":  nil,
				"TimeToLiveSpecification": nil,
			},
		},
	}
}

func TestWorkerQueues(t *testing.T) {
	w := fx.stack.Work
	_, worker := fx.tmpl.function(t, FunctionWorker)
	timeout, _ := worker.Properties["Timeout"].(float64)
	tests := []struct {
		name      string
		queue, dl string
		fifo      bool
	}{
		{"Tasks", logicalID(fx.stack.Stack, w.Tasks), logicalID(fx.stack.Stack, w.TasksDLQ), false},
		{"TasksFifo", logicalID(fx.stack.Stack, w.TasksFifo), logicalID(fx.stack.Stack, w.TasksFifoDLQ), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := fx.tmpl.Resources[tt.queue].Properties
			vis, _ := q["VisibilityTimeout"].(float64)
			if timeout == 0 || vis < 6*timeout {
				t.Errorf("VisibilityTimeout = %v, want >= 6 x worker timeout %v", vis, timeout)
			}
			want := map[string]any{"deadLetterTargetArn": getAtt(tt.dl, "Arn"), "maxReceiveCount": 5.0}
			if !reflect.DeepEqual(q["RedrivePolicy"], want) {
				t.Errorf("RedrivePolicy = %v, want %v", q["RedrivePolicy"], want)
			}
			// The dead-letter queue takes a message as large as the queue
			// does with the reason the worker adds.
			src, dlq := q["MaximumMessageSize"], fx.tmpl.Resources[tt.dl].Properties["MaximumMessageSize"]
			if src != float64(QueueMaxMessageBytes) || dlq != float64(DeadLetterMaxMessageBytes) || QueueMaxMessageBytes+64<<10 > DeadLetterMaxMessageBytes {
				t.Errorf("MaximumMessageSize: queue %v, dead-letter queue %v; want %d and %d", src, dlq, QueueMaxMessageBytes, DeadLetterMaxMessageBytes)
			}
			for _, id := range []string{tt.queue, tt.dl} {
				p := fx.tmpl.Resources[id].Properties
				assertProps(t, id, p, map[string]any{"SqsManagedSseEnabled": true, "MessageRetentionPeriod": 1209600.0})
				if !deniesInsecureTransport(id) {
					t.Errorf("queue %s has no policy denying requests without TLS", id)
				}
				if tt.fifo {
					// A FIFO queue's dead-letter queue must be FIFO too.
					if p["FifoQueue"] != true {
						t.Errorf("queue %s: FifoQueue = %v, want true", id, p["FifoQueue"])
					}
				} else if _, ok := p["FifoQueue"]; ok {
					t.Errorf("queue %s is FIFO, want standard", id)
				}
			}
			if tt.fifo && q["ContentBasedDeduplication"] != true {
				t.Errorf("FIFO tasks queue: ContentBasedDeduplication = %v, want true", q["ContentBasedDeduplication"])
			}
		})
	}
}

func TestWorkerMappings(t *testing.T) {
	w := fx.stack.Work
	fnID, _ := fx.tmpl.function(t, FunctionWorker)
	byQueue := map[string]cfnResource{}
	for _, m := range fx.tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(m.Properties["FunctionName"], ref(fnID)) {
			byQueue[resourceName(m.Properties["EventSourceArn"])] = m
		}
	}
	if len(byQueue) != 2 {
		t.Fatalf("worker has %d event source mappings, want 2 (Tasks and TasksFifo)", len(byQueue))
	}
	for _, q := range []string{logicalID(fx.stack.Stack, w.Tasks), logicalID(fx.stack.Stack, w.TasksFifo)} {
		m, ok := byQueue[q+".Arn"]
		if !ok {
			t.Errorf("no worker mapping on queue %s (have %v)", q, keys(byQueue))
			continue
		}
		assertProps(t, q, m.Properties, map[string]any{
			"BatchSize":                      float64(workerBatchSize),
			"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
			"ScalingConfig":                  map[string]any{"MaximumConcurrency": float64(workerMaxConcurrency)},
			"MaximumBatchingWindowInSeconds": nil,
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWorkerGrants(t *testing.T) {
	s := fx.stack
	w := s.Work
	got := fx.tmpl.grants(logicalID(s.Stack, w.Worker.Role))
	idem, results := logicalID(s.Stack, w.Idempotency)+".Arn", logicalID(s.Stack, w.Results)+".Arn"
	var want []string
	for _, a := range idempotencyTableActions {
		want = append(want, a+" "+idem)
	}
	for _, a := range resultsTableActions {
		want = append(want, a+" "+results)
	}
	for _, q := range []string{logicalID(s.Stack, w.Tasks), logicalID(s.Stack, w.TasksFifo)} {
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} {
			want = append(want, a+" "+q+".Arn")
		}
		// Finding the DLQ from the RedrivePolicy.
		for _, a := range sourceQueueActions {
			want = append(want, a+" "+q+".Arn")
		}
	}
	dlqs := []string{logicalID(s.Stack, w.TasksDLQ) + ".Arn", logicalID(s.Stack, w.TasksFifoDLQ) + ".Arn"}
	// Permanent failures are sent to the DLQ by the worker itself.
	for _, q := range dlqs {
		want = append(want, "sqs:SendMessage "+q, "sqs:GetQueueUrl "+q)
	}
	want = append(want, "dynamodb:GetItem "+results)
	for _, g := range want {
		if !got[g] {
			t.Errorf("worker role lacks %s", g)
		}
	}
	// Nothing on other tables, and no wildcard DynamoDB action.
	for g := range got {
		if strings.HasPrefix(g, "dynamodb:") && !strings.HasSuffix(g, idem) && !strings.HasSuffix(g, results) {
			t.Errorf("worker role has %s, beyond its own tables", g)
		}
		if strings.HasPrefix(g, "dynamodb:*") {
			t.Errorf("worker role has a wildcard grant %s", g)
		}
	}
	// The worker only sends to its DLQs: it never consumes or purges them
	// (redrive is an operator's tool with its own credentials).
	for _, q := range dlqs {
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue", "sqs:*"} {
			if got[a+" "+q] {
				t.Errorf("worker role has %s on its DLQ %s", a, q)
			}
		}
	}
	// Scan, Query and BatchWriteItem are not needed on the idempotency table.
	for _, a := range []string{"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:Query"} {
		if got[a+" "+idem] {
			t.Errorf("worker role has %s on the idempotency table", a)
		}
	}
}

func TestWorkerOutputs(t *testing.T) {
	s := fx.stack
	w := s.Work
	want := map[string]any{
		"TasksQueueUrl":        ref(logicalID(s.Stack, w.Tasks)),
		"TasksDlqUrl":          ref(logicalID(s.Stack, w.TasksDLQ)),
		"TasksFifoQueueUrl":    ref(logicalID(s.Stack, w.TasksFifo)),
		"TasksFifoDlqUrl":      ref(logicalID(s.Stack, w.TasksFifoDLQ)),
		"IdempotencyTableName": ref(logicalID(s.Stack, w.Idempotency)),
		"ResultsTableName":     ref(logicalID(s.Stack, w.Results)),
	}
	for name, v := range want {
		o, ok := fx.tmpl.Outputs[name]
		if !ok {
			t.Errorf("output %s missing", name)
			continue
		}
		if !reflect.DeepEqual(o.Value, v) {
			t.Errorf("output %s = %v, want %v", name, o.Value, v)
		}
	}
}

// TestAddQueueRejectsWhatFIFOMappingsCannotDo: Lambda refuses a batching
// window or a batch above 10 on a FIFO queue, and AddQueue holds a second
// queue to the same safety checks as the first.
func TestAddQueueRejectsWhatFIFOMappingsCannotDo(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("FifoChecks"), nil)
	timeout := 30 * time.Second
	std := NewQueueWithDLQ(stack, "Std", QueueWithDLQProps{ConsumerTimeout: timeout})
	fifo := NewQueueWithDLQ(stack, "Ordered", QueueWithDLQProps{ConsumerTimeout: timeout, FIFO: true})
	short := NewQueueWithDLQ(stack, "Short", QueueWithDLQProps{ConsumerTimeout: time.Second})
	fn := NewQueueFunction(stack, "Consumer", QueueFunctionProps{
		Function: GoFunctionProps{Name: FunctionWorker, AssetDir: assets, Timeout: timeout},
		Queue:    std,
	})
	tests := []struct {
		name  string
		props QueueSourceProps
		want  string
	}{
		{"batching window on FIFO", QueueSourceProps{Queue: fifo, MaxBatchingWindow: time.Second}, "cannot have a MaxBatchingWindow"},
		{"batch above 10 on FIFO", QueueSourceProps{Queue: fifo, BatchSize: 11}, "at most 10"},
		{"second queue with short visibility", QueueSourceProps{Queue: short}, "want at least 3m0s"},
		{"concurrency outside 2-1000", QueueSourceProps{Queue: fifo, MaxConcurrency: 1}, "outside 2-1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg := panicMessage(func() { fn.AddQueue(tt.props) }); !strings.Contains(msg, tt.want) {
				t.Errorf("AddQueue panic = %q, want one containing %q", msg, tt.want)
			}
		})
	}
	if msg := panicMessage(func() { fn.AddQueue(QueueSourceProps{Queue: fifo, BatchSize: 10, MaxConcurrency: 2}) }); msg != "" {
		t.Errorf("a valid FIFO source panicked: %s", msg)
	}
}
