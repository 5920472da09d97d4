package tributary

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TestStreamFunctionEnhancedFanOut: with EnhancedFanOut the function reads
// the stream through its own registered consumer — the mapping's source is
// the consumer ARN, the role may subscribe to the consumer's shards — while a
// plain consumer of the same stream keeps reading the stream itself.
func TestStreamFunctionEnhancedFanOut(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("FanOut"), nil)
	stream := awskinesis.NewStream(stack, jsii.String("Events"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(2),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	fnProps := func(name string) GoFunctionProps { return GoFunctionProps{Name: name, AssetDir: assets} }

	named := NewStreamFunction(stack, "Aggregate", StreamFunctionProps{
		Function:       fnProps(FunctionAggregate),
		Stream:         stream,
		OnFailure:      failures,
		EnhancedFanOut: true,
		ConsumerName:   "aggregate-efo",
	})
	defaulted := NewStreamFunction(stack, "Detect", StreamFunctionProps{
		Function:       fnProps(FunctionIngest),
		Stream:         stream,
		OnFailure:      failures,
		EnhancedFanOut: true,
	})
	// The same id in another scope must not register the same consumer
	// name on the stream (CloudFormation would fail the deploy).
	sameID := NewStreamFunction(constructs.NewConstruct(stack, jsii.String("Other")), "Detect", StreamFunctionProps{
		Function:       fnProps(FunctionWorker),
		Stream:         stream,
		OnFailure:      failures,
		EnhancedFanOut: true,
	})
	shared := NewStreamFunction(stack, "Plain", StreamFunctionProps{
		Function:  fnProps(FunctionQuarantine),
		Stream:    stream,
		OnFailure: failures,
	})
	addNag(app)
	tmpl := templateOf(stack)
	streamID := logicalID(stack, stream)

	consumers := tmpl.ofType("AWS::Kinesis::StreamConsumer")
	if len(consumers) != 3 {
		t.Fatalf("%d AWS::Kinesis::StreamConsumer resources, want 3 (one per EnhancedFanOut function)", len(consumers))
	}
	names := map[any]string{}
	for id, c := range consumers {
		if other, dup := names[c.Properties["ConsumerName"]]; dup {
			t.Errorf("consumers %s and %s both named %v on one stream", id, other, c.Properties["ConsumerName"])
		}
		names[c.Properties["ConsumerName"]] = id
	}
	if shared.Consumer != nil {
		t.Error("a function without EnhancedFanOut has a Consumer")
	}

	tests := []struct {
		name         string
		fn           *StreamFunction
		consumerName string // prefix if it ends in "*"
	}{
		{"explicit consumer name", named, "aggregate-efo"},
		{"consumer named after the construct path", defaulted, "FanOutDetect*"},
		{"same id in another scope", sameID, "FanOutOtherDetect*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fn.Consumer == nil {
				t.Fatal("Consumer is nil with EnhancedFanOut")
			}
			consumerID := logicalID(stack, tt.fn.Consumer)
			c, ok := consumers[consumerID]
			if !ok {
				t.Fatalf("no AWS::Kinesis::StreamConsumer %s", consumerID)
			}
			assertProps(t, "consumer", c.Properties, map[string]any{"StreamARN": getAtt(streamID, "Arn")})
			name, _ := c.Properties["ConsumerName"].(string)
			if prefix, ok := strings.CutSuffix(tt.consumerName, "*"); ok {
				if !strings.HasPrefix(name, prefix) || !consumerNameRE.MatchString(name) {
					t.Errorf("ConsumerName = %q, want a valid name starting %q", name, prefix)
				}
			} else if name != tt.consumerName {
				t.Errorf("ConsumerName = %q, want %q", name, tt.consumerName)
			}
			fnID := logicalID(stack, tt.fn.Function)
			m := tmpl.mappingOf(t, fnID)
			assertProps(t, "mapping", m.Properties, map[string]any{
				"EventSourceArn":             getAtt(consumerID, "ConsumerARN"),
				"StartingPosition":           "TRIM_HORIZON",
				"BisectBatchOnFunctionError": true,
				"MaximumRetryAttempts":       float64(DefaultStreamRetryAttempts),
				"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			})
			grants := tmpl.grants(logicalID(stack, tt.fn.Role))
			for _, g := range []string{
				"kinesis:SubscribeToShard " + consumerID + ".ConsumerARN",
				"kinesis:DescribeStreamConsumer " + consumerID + ".ConsumerARN",
				"kinesis:GetRecords " + streamID + ".Arn",
				"kinesis:GetShardIterator " + streamID + ".Arn",
				"kinesis:ListShards " + streamID + ".Arn",
				"sqs:SendMessage " + logicalID(stack, failures) + ".Arn",
			} {
				if !grants[g] {
					t.Errorf("role lacks %s", g)
				}
			}
			// Dedicated throughput is per consumer: a function may not
			// subscribe through another function's consumer.
			for other := range consumers {
				for g := range grants {
					if other != consumerID && strings.Contains(g, other) {
						t.Errorf("role may %s: another function's consumer", g)
					}
				}
			}
		})
	}

	t.Run("plain consumer reads the stream", func(t *testing.T) {
		m := tmpl.mappingOf(t, logicalID(stack, shared.Function))
		assertProps(t, "mapping", m.Properties, map[string]any{"EventSourceArn": getAtt(streamID, "Arn")})
		for g := range tmpl.grants(logicalID(stack, shared.Role)) {
			for c := range consumers {
				if strings.Contains(g, c) {
					t.Errorf("a shared-throughput consumer may %s", g)
				}
			}
		}
	})

	t.Run("cdk-nag", func(t *testing.T) {
		errs, warns := nagFindings(stack)
		for _, e := range append(errs, warns...) {
			t.Errorf("cdk-nag: %s", e)
		}
	})
}

// TestEnhancedFanOutRejects: settings a stream consumer cannot have stop
// synthesis with the field named.
func TestEnhancedFanOutRejects(t *testing.T) {
	assets := t.TempDir()
	writeDummyAssets(assets)
	app := newTestApp(t.TempDir(), nil)
	stack := awscdk.NewStack(app, jsii.String("FanOutRejects"), nil)
	stream := awskinesis.NewStream(stack, jsii.String("Stream"), &awskinesis.StreamProps{ShardCount: jsii.Number(1)})
	table := awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		Stream:       awsdynamodb.StreamViewType_NEW_IMAGE,
	})
	failures := NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{ConsumerTimeout: 30 * time.Second})
	fn := GoFunctionProps{Name: FunctionAggregate, AssetDir: assets}

	tests := []struct {
		name  string
		props StreamFunctionProps
		want  string
	}{
		{"on a DynamoDB stream", StreamFunctionProps{Table: table, EnhancedFanOut: true}, "EnhancedFanOut needs a Kinesis Stream"},
		{"name without fan-out", StreamFunctionProps{Stream: stream, ConsumerName: "x"}, `ConsumerName "x" is set without EnhancedFanOut`},
		{"bad name", StreamFunctionProps{Stream: stream, EnhancedFanOut: true, ConsumerName: "a b"}, `ConsumerName "a b"`},
		{"name too long", StreamFunctionProps{Stream: stream, EnhancedFanOut: true, ConsumerName: strings.Repeat("c", 129)}, "want 1-128"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.props.Function, tt.props.OnFailure = fn, failures
			msg := panicMessage(func() { NewStreamFunction(stack, "Bad"+string(rune('A'+i)), tt.props) })
			if !strings.Contains(msg, tt.want) {
				t.Errorf("NewStreamFunction panic = %q, want one containing %q", msg, tt.want)
			}
		})
	}
}
