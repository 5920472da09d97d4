package tributary

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// TestStreamFunctionOptions covers the StreamFunction settings the later
// pipelines use (windowed aggregate, CDC on a table's stream) but the
// Tributary stack does not instantiate yet.
func TestStreamFunctionOptions(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Options"), nil)
	stream := awskinesis.NewStream(stack, jsii.String("Stream"), &awskinesis.StreamProps{ShardCount: jsii.Number(1)})
	table := awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
	})
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	fnProps := func(name string) GoFunctionProps {
		return GoFunctionProps{Name: name, AssetDir: assets}
	}

	windowed := NewStreamFunction(stack, "Windowed", StreamFunctionProps{
		Function:              fnProps(FunctionAggregate),
		Stream:                stream,
		OnFailure:             failures,
		StartingPosition:      awslambda.StartingPosition_LATEST,
		ParallelizationFactor: 4,
		TumblingWindow:        time.Minute,
		RetryAttempts:         2,
		MaxRecordAge:          10 * time.Minute,
		NoBisect:              true,
		Filters: []map[string]any{{
			"data": map[string]any{"type": awslambda.FilterRule_IsEqual(jsii.String("click"))},
		}},
	})
	cdc := NewStreamFunction(stack, "CDC", StreamFunctionProps{
		Function:  fnProps(FunctionIngest),
		Table:     table,
		OnFailure: failures,
	})
	tmpl := templateOf(stack)
	failuresArn := getAtt(logicalID(stack, failures), "Arn")

	tests := []struct {
		name   string
		fn     *StreamFunction
		props  map[string]any
		grants []string
	}{
		{
			name: "windowed kinesis",
			fn:   windowed,
			props: map[string]any{
				"EventSourceArn":             getAtt(logicalID(stack, stream), "Arn"),
				"StartingPosition":           "LATEST",
				"ParallelizationFactor":      4.0,
				"TumblingWindowInSeconds":    60.0,
				"MaximumRetryAttempts":       2.0,
				"MaximumRecordAgeInSeconds":  600.0,
				"BisectBatchOnFunctionError": false,
				"BatchSize":                  float64(DefaultStreamBatchSize),
				"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
				"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": failuresArn}},
				"FilterCriteria": map[string]any{"Filters": []any{
					map[string]any{"Pattern": `{"data":{"type":["click"]}}`},
				}},
			},
			grants: []string{
				"kinesis:GetRecords " + logicalID(stack, stream) + ".Arn",
				"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
			},
		},
		{
			name: "dynamodb streams with defaults",
			fn:   cdc,
			props: map[string]any{
				"EventSourceArn":             getAtt(logicalID(stack, table), "StreamArn"),
				"StartingPosition":           "TRIM_HORIZON",
				"BatchSize":                  float64(DefaultStreamBatchSize),
				"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
				"MaximumRecordAgeInSeconds":  DefaultStreamMaxRecordAge.Seconds(),
				"BisectBatchOnFunctionError": true,
				"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
				"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": failuresArn}},
				"ParallelizationFactor":      nil,
				"TumblingWindowInSeconds":    nil,
				"FilterCriteria":             nil,
			},
			grants: []string{
				"dynamodb:GetRecords " + logicalID(stack, table) + ".StreamArn",
				"dynamodb:GetShardIterator " + logicalID(stack, table) + ".StreamArn",
				"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fnID := logicalID(stack, tt.fn.Function)
			assertProps(t, tt.name, tmpl.mappingOf(t, fnID).Properties, tt.props)
			got := tmpl.grants(logicalID(stack, tt.fn.Role))
			for _, g := range tt.grants {
				if !got[g] {
					t.Errorf("role lacks %s", g)
				}
			}
		})
	}
}

func TestStreamFunctionPropsValidate(t *testing.T) {
	tests := []struct {
		name  string
		props StreamFunctionProps
		want  string // "" for valid
	}{
		{"defaults", StreamFunctionProps{}, ""},
		{"everything set", StreamFunctionProps{BatchSize: 10000, RetryAttempts: 10000, MaxRecordAge: 7 * 24 * time.Hour,
			ParallelizationFactor: 10, TumblingWindow: 15 * time.Minute, MaxBatchingWindow: 5 * time.Minute}, ""},
		{"batch too large", StreamFunctionProps{BatchSize: 10001}, "BatchSize 10001"},
		{"infinite retries", StreamFunctionProps{RetryAttempts: -1}, "RetryAttempts -1"},
		{"record age too short", StreamFunctionProps{MaxRecordAge: 30 * time.Second}, "MaxRecordAge 30s"},
		{"record age too long", StreamFunctionProps{MaxRecordAge: 8 * 24 * time.Hour}, "MaxRecordAge 192h0m0s"},
		{"parallelization too high", StreamFunctionProps{ParallelizationFactor: 11}, "ParallelizationFactor 11"},
		{"tumbling window too long", StreamFunctionProps{TumblingWindow: 16 * time.Minute}, "TumblingWindow 16m0s"},
		{"batching window too long", StreamFunctionProps{MaxBatchingWindow: 301 * time.Second}, "MaxBatchingWindow 5m1s"},
		{"fractional seconds", StreamFunctionProps{TumblingWindow: 1500 * time.Millisecond}, "TumblingWindow 1.5s is not a whole number of seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.props.validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestVisibilityTimeoutFor(t *testing.T) {
	tests := []struct {
		timeout, window, want time.Duration
	}{
		{30 * time.Second, 0, 180 * time.Second},
		{10 * time.Second, 5 * time.Second, 65 * time.Second},
	}
	for _, tt := range tests {
		if got := VisibilityTimeoutFor(tt.timeout, tt.window); got != tt.want {
			t.Errorf("VisibilityTimeoutFor(%v, %v) = %v, want %v", tt.timeout, tt.window, got, tt.want)
		}
	}
}

// TestQueueFunctionRejectsUnsafeQueues: synthesis stops, naming the queue,
// when a consumer could see its messages redelivered while still processing
// them, or when its failures would have nowhere to go.
func TestQueueFunctionRejectsUnsafeQueues(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("Unsafe"), nil)
	shortVisibility := NewQueueWithDLQ(stack, "Short", QueueWithDLQProps{ConsumerTimeout: 10 * time.Second})
	noDLQ := awssqs.NewQueue(stack, jsii.String("NoDlq"), &awssqs.QueueProps{VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(600))})

	tests := []struct {
		name  string
		queue awssqs.Queue
		want  string
	}{
		{"visibility below 6x timeout", shortVisibility, "has visibility timeout 1m0s, want at least 3m0s"},
		{"no dead-letter queue", noDLQ, "has no dead-letter queue"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicMessage(func() {
				NewQueueFunction(stack, fmt.Sprintf("Consumer%d", i), QueueFunctionProps{
					Function: GoFunctionProps{Name: FunctionQuarantine, AssetDir: assets, Timeout: 30 * time.Second},
					Queue:    tt.queue,
				})
			})
			if !strings.Contains(msg, tt.want) {
				t.Errorf("NewQueueFunction panic = %q, want one containing %q", msg, tt.want)
			}
		})
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
