package tributary

import (
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Defaults for StreamFunctionProps fields left zero. Retries and record age
// are always bounded: a poison record must reach the on-failure destination
// instead of blocking its shard until the record expires.
const (
	DefaultStreamBatchSize     = 100
	DefaultStreamRetryAttempts = 3
	DefaultStreamMaxRecordAge  = time.Hour
	DefaultStreamStartingPos   = awslambda.StartingPosition_TRIM_HORIZON
	maxStreamRetryAttempts     = 10000
	minStreamMaxRecordAge      = time.Minute
	maxStreamMaxRecordAge      = 7 * 24 * time.Hour
	maxStreamTumblingWindow    = 15 * time.Minute
	maxStreamParallelization   = 10
	maxStreamMaxBatchingWindow = 5 * time.Minute
)

// EnvQuarantineTableName names the quarantine table to the functions that
// write to it: the stream consumers that set records aside (package
// setaside) and the quarantine function.
const EnvQuarantineTableName = "QUARANTINE_TABLE_NAME"

// setAsideActions are the DynamoDB calls setting a record aside makes on
// the quarantine table (setaside.Sink.SetAside: BatchWriteItem of a big
// record's chunks, UpdateItem of its item, which adds the function's entry
// beside those of other functions that set the same record aside). Keep
// them in step with the package: a missing action works locally, where
// permissions are not enforced, and fails in AWS.
var setAsideActions = []string{"dynamodb:BatchWriteItem", "dynamodb:UpdateItem"}

// GrantSetAside gives fn the quarantine table's name in
// EnvQuarantineTableName and exactly the calls setting a record aside makes
// on that table, plus extra actions on it (the quarantine function's
// PutItem), nothing on anything else.
func GrantSetAside(fn *GoFunction, quarantine awsdynamodb.ITable, extra ...string) {
	fn.Function.AddEnvironment(jsii.String(EnvQuarantineTableName), quarantine.TableName(), nil)
	actions := append(append([]string(nil), setAsideActions...), extra...)
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{quarantine.TableArn()},
	}))
}

// StreamFunctionProps configures a Lambda function consuming a Kinesis stream
// or a DynamoDB table's stream. Exactly one of Stream and Table is set.
type StreamFunctionProps struct {
	// Function configures the consumer function.
	Function GoFunctionProps
	// Stream is the Kinesis stream to consume.
	Stream awskinesis.IStream
	// Table is the DynamoDB table whose stream to consume (the table must
	// have a stream enabled).
	Table awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record (shard, sequence range,
	// condition) for a batch that exhausted its retries or aged out. Required.
	OnFailure awssqs.IQueue
	// SetAside is the quarantine table the function sets aside the records
	// that can never succeed in (package setaside), so they never reach
	// OnFailure: the function gets its name (EnvQuarantineTableName) and may
	// call BatchWriteItem and UpdateItem on it (GrantSetAside). Optional.
	SetAside awsdynamodb.ITable

	// StartingPosition is DefaultStreamStartingPos if empty.
	StartingPosition awslambda.StartingPosition
	// BatchSize is DefaultStreamBatchSize if zero.
	BatchSize int
	// MaxBatchingWindow is how long Lambda gathers records before invoking
	// (MaximumBatchingWindowInSeconds); unset if zero.
	MaxBatchingWindow time.Duration
	// RetryAttempts bounds the retries of a failing batch
	// (MaximumRetryAttempts); DefaultStreamRetryAttempts if zero.
	RetryAttempts int
	// MaxRecordAge bounds the age of records Lambda still sends
	// (MaximumRecordAgeInSeconds); DefaultStreamMaxRecordAge if zero.
	MaxRecordAge time.Duration
	// NoBisect turns off BisectBatchOnFunctionError (on by default).
	NoBisect bool
	// ParallelizationFactor is the number of concurrent batches per shard
	// (1-10); unset (1) if zero. Above 1, order holds only per partition key.
	ParallelizationFactor int
	// TumblingWindow makes Lambda carry state between invocations for windows
	// of this length (TumblingWindowInSeconds, up to 15 minutes); unset if zero.
	TumblingWindow time.Duration
	// Filters are event filter patterns (FilterCriteria); a record is sent
	// if it matches any of them. Not for a function whose tick reads the
	// stream after the position it committed (EVENTS_STREAM_NAME): the
	// records a filter drops never reach it, so its position stops at the
	// last one that passed and the tick takes the rest for records still to
	// process, holding the shard's watermark.
	Filters []map[string]any

	// EnhancedFanOut makes the function read Stream through its own
	// registered stream consumer (AWS::Kinesis::StreamConsumer): dedicated
	// read throughput of 2 MiB/s per shard and records pushed over HTTP/2
	// (SubscribeToShard), instead of sharing the stream's 2 MiB/s per shard
	// and five GetRecords calls per second with every other consumer. Use it
	// when several functions fan out from one stream. Kinesis streams only.
	EnhancedFanOut bool
	// ConsumerName names the stream consumer (at most 128 characters of
	// letters, digits, '_', '.' and '-'; unique among the stream's
	// consumers). If empty, a name unique in the app is derived from the
	// construct path (for example "TributaryAggregate1A2B3C4D").
	// Only with EnhancedFanOut.
	ConsumerName string
}

// StreamFunction is a GoFunction with its stream event source mapping,
// its on-failure destination and the permissions both need, wired in one
// place: read on the stream, send on the destination queue. The mapping
// always reports batch item failures: every Tributary stream handler
// returns the sequence number of the first record it could not process.
type StreamFunction struct {
	*GoFunction
	// Source is the event source; its mapping id is known after deploy.
	Source awslambda.IEventSource
	// Consumer is the stream consumer the function reads through with
	// EnhancedFanOut; nil otherwise.
	Consumer awskinesis.StreamConsumer
}

// NewStreamFunction creates a StreamFunction under scope.
func NewStreamFunction(scope constructs.Construct, id string, props StreamFunctionProps) *StreamFunction {
	if (props.Stream == nil) == (props.Table == nil) {
		panic(fmt.Sprintf("StreamFunction %q: set exactly one of Stream and Table", id))
	}
	if props.OnFailure == nil {
		panic(fmt.Sprintf("StreamFunction %q: OnFailure is required", id))
	}
	if err := props.validate(); err != nil {
		panic(fmt.Sprintf("StreamFunction %q: %v", id, err))
	}

	fn := NewGoFunction(scope, id, props.Function)
	s := &StreamFunction{GoFunction: fn}
	if props.SetAside != nil {
		GrantSetAside(fn, props.SetAside)
	}

	// The event sources grant the function read on the stream (GetRecords,
	// GetShardIterator, DescribeStream, ListShards, ...) and SqsDlq grants it
	// sqs:SendMessage on the destination queue when they bind. The consumer
	// event source also grants kinesis:SubscribeToShard and
	// DescribeStreamConsumer on the consumer, and stream read on its stream.
	onFailure := awslambdaeventsources.NewSqsDlq(props.OnFailure)
	switch {
	case props.EnhancedFanOut:
		s.Consumer = awskinesis.NewStreamConsumer(fn.Construct, jsii.String("Consumer"), &awskinesis.StreamConsumerProps{
			Stream:             props.Stream,
			StreamConsumerName: jsii.String(props.consumerName(fn.Construct)),
		})
		s.Source = awslambdaeventsources.NewKinesisConsumerEventSource(s.Consumer, props.kinesisProps(onFailure))
	case props.Stream != nil:
		s.Source = awslambdaeventsources.NewKinesisEventSource(props.Stream, props.kinesisProps(onFailure))
	default:
		s.Source = awslambdaeventsources.NewDynamoEventSource(props.Table, &awslambdaeventsources.DynamoEventSourceProps{
			StartingPosition:        props.startingPosition(),
			BatchSize:               jsii.Number(float64(props.batchSize())),
			MaxBatchingWindow:       seconds(props.MaxBatchingWindow),
			ReportBatchItemFailures: jsii.Bool(true),
			BisectBatchOnError:      jsii.Bool(!props.NoBisect),
			RetryAttempts:           jsii.Number(float64(props.retryAttempts())),
			MaxRecordAge:            seconds(props.maxRecordAge()),
			ParallelizationFactor:   optionalNumber(props.ParallelizationFactor),
			TumblingWindow:          seconds(props.TumblingWindow),
			Filters:                 props.filters(),
			OnFailure:               onFailure,
		})
	}
	fn.Function.AddEventSource(s.Source)
	return s
}

// kinesisProps are the mapping settings of a Kinesis source, read directly
// or through a stream consumer.
func (p StreamFunctionProps) kinesisProps(onFailure awslambda.IEventSourceDlq) *awslambdaeventsources.KinesisEventSourceProps {
	return &awslambdaeventsources.KinesisEventSourceProps{
		StartingPosition:        p.startingPosition(),
		BatchSize:               jsii.Number(float64(p.batchSize())),
		MaxBatchingWindow:       seconds(p.MaxBatchingWindow),
		ReportBatchItemFailures: jsii.Bool(true),
		BisectBatchOnError:      jsii.Bool(!p.NoBisect),
		RetryAttempts:           jsii.Number(float64(p.retryAttempts())),
		MaxRecordAge:            seconds(p.maxRecordAge()),
		ParallelizationFactor:   optionalNumber(p.ParallelizationFactor),
		TumblingWindow:          seconds(p.TumblingWindow),
		Filters:                 p.filters(),
		OnFailure:               onFailure,
	}
}

// consumerName is ConsumerName, or a name unique in the app derived from
// the path of c: two functions with the same id in different scopes must
// not register the same consumer name on one stream.
func (p StreamFunctionProps) consumerName(c constructs.IConstruct) string {
	if p.ConsumerName != "" {
		return p.ConsumerName
	}
	return *awscdk.Names_UniqueResourceName(c, &awscdk.UniqueResourceNameOptions{MaxLength: jsii.Number(128)})
}

var consumerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

func (p StreamFunctionProps) validate() error {
	if p.EnhancedFanOut && p.Stream == nil {
		return fmt.Errorf("EnhancedFanOut needs a Kinesis Stream (DynamoDB streams have no stream consumers)")
	}
	if p.ConsumerName != "" && !p.EnhancedFanOut {
		return fmt.Errorf("ConsumerName %q is set without EnhancedFanOut", p.ConsumerName)
	}
	if p.ConsumerName != "" && !consumerNameRE.MatchString(p.ConsumerName) {
		return fmt.Errorf("ConsumerName %q: want 1-128 letters, digits, '_', '.' or '-'", p.ConsumerName)
	}
	if p.BatchSize < 0 || p.BatchSize > 10000 {
		return fmt.Errorf("BatchSize %d is outside 1-10000", p.BatchSize)
	}
	if p.RetryAttempts < 0 || p.RetryAttempts > maxStreamRetryAttempts {
		return fmt.Errorf("RetryAttempts %d is outside 1-%d", p.RetryAttempts, maxStreamRetryAttempts)
	}
	if age := p.MaxRecordAge; age != 0 && (age < minStreamMaxRecordAge || age > maxStreamMaxRecordAge) {
		return fmt.Errorf("MaxRecordAge %v is outside %v-%v", age, minStreamMaxRecordAge, maxStreamMaxRecordAge)
	}
	if p.ParallelizationFactor < 0 || p.ParallelizationFactor > maxStreamParallelization {
		return fmt.Errorf("ParallelizationFactor %d is outside 1-%d", p.ParallelizationFactor, maxStreamParallelization)
	}
	if p.TumblingWindow < 0 || p.TumblingWindow > maxStreamTumblingWindow {
		return fmt.Errorf("TumblingWindow %v is outside 1s-%v", p.TumblingWindow, maxStreamTumblingWindow)
	}
	if p.MaxBatchingWindow < 0 || p.MaxBatchingWindow > maxStreamMaxBatchingWindow {
		return fmt.Errorf("MaxBatchingWindow %v is outside 0-%v", p.MaxBatchingWindow, maxStreamMaxBatchingWindow)
	}
	for name, d := range map[string]time.Duration{
		"MaxBatchingWindow": p.MaxBatchingWindow, "MaxRecordAge": p.MaxRecordAge, "TumblingWindow": p.TumblingWindow,
	} {
		if d%time.Second != 0 {
			return fmt.Errorf("%s %v is not a whole number of seconds", name, d)
		}
	}
	return nil
}

func (p StreamFunctionProps) startingPosition() awslambda.StartingPosition {
	if p.StartingPosition == "" {
		return DefaultStreamStartingPos
	}
	return p.StartingPosition
}

func (p StreamFunctionProps) batchSize() int {
	if p.BatchSize == 0 {
		return DefaultStreamBatchSize
	}
	return p.BatchSize
}

func (p StreamFunctionProps) retryAttempts() int {
	if p.RetryAttempts == 0 {
		return DefaultStreamRetryAttempts
	}
	return p.RetryAttempts
}

func (p StreamFunctionProps) maxRecordAge() time.Duration {
	if p.MaxRecordAge == 0 {
		return DefaultStreamMaxRecordAge
	}
	return p.MaxRecordAge
}

func (p StreamFunctionProps) filters() *[]*map[string]any {
	if len(p.Filters) == 0 {
		return nil
	}
	out := make([]*map[string]any, 0, len(p.Filters))
	for _, f := range p.Filters {
		f := f
		out = append(out, awslambda.FilterCriteria_Filter(&f))
	}
	return &out
}

// seconds converts d to a CDK duration, or nil (unset) if d is zero.
func seconds(d time.Duration) awscdk.Duration {
	if d == 0 {
		return nil
	}
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// optionalNumber is nil (unset) for zero.
func optionalNumber(n int) *float64 {
	if n == 0 {
		return nil
	}
	return jsii.Number(float64(n))
}
