package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// StackID is the id of the Tributary stack; cdk synth writes
// cdk.out/Tributary.template.json.
const StackID = "Tributary"

// Context keys the app reads (cdk.json, or cdk synth -c key=value).
const (
	// ContextAssetDir is the directory holding <name>/bootstrap for every
	// function, relative to infra/; DefaultAssetDir if unset.
	ContextAssetDir = "tributary:assetDir"
	// ContextIngestAuth is the ingest Function URL's auth type: AWS_IAM
	// (default) or NONE.
	ContextIngestAuth = "tributary:ingestAuth"
)

// DefaultAssetDir is where the Makefile puts the linux/arm64 bootstraps.
const DefaultAssetDir = "../.build/lambda"

// Function names: functions/<name>, <assetDir>/<name>/bootstrap and the
// "tributary:function" metadata of the function resource.
const (
	FunctionIngest     = "ingest"
	FunctionAggregate  = "aggregate"
	FunctionQuarantine = "quarantine"
)

// FunctionNames lists every function the stack deploys.
var FunctionNames = []string{FunctionIngest, FunctionAggregate, FunctionQuarantine}

// Function timeouts. The Failures queue's visibility timeout follows from
// quarantine's (see VisibilityTimeoutFor).
const (
	ingestTimeout     = 10 * time.Second
	aggregateTimeout  = 30 * time.Second
	quarantineTimeout = 30 * time.Second
	functionMemoryMB  = 256
)

// TributaryStackProps configures NewTributaryStack.
type TributaryStackProps struct {
	awscdk.StackProps
	// AssetDir holds <name>/bootstrap for each of FunctionNames. If empty,
	// context ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// IngestAuth is the ingest Function URL's auth type. If empty, context
	// ContextIngestAuth, else AWS_IAM.
	IngestAuth awslambda.FunctionUrlAuthType
}

// TributaryStack is the deployable topology: producers POST events to ingest,
// which puts them on the Events stream; aggregate counts them per key and
// event-time minute into Counts; batches that keep failing are described on
// the Failures queue, from which quarantine copies the failed records into
// Quarantine.
type TributaryStack struct {
	awscdk.Stack

	Events      awskinesis.Stream
	Counts      awsdynamodb.Table
	Quarantine  awsdynamodb.Table
	Failures    awssqs.Queue
	FailuresDLQ awssqs.IQueue

	Ingest       *GoFunction
	IngestURL    awslambda.FunctionUrl
	Aggregate    *StreamFunction
	Quarantiner  *QueueFunction
	IngestAuth   awslambda.FunctionUrlAuthType
	AssetDirUsed string
}

// NewTributaryStack creates the Tributary stack in scope. It fails if the
// ingest auth type is not AWS_IAM or NONE, or if a function's bootstrap is
// missing from the asset dir.
func NewTributaryStack(scope constructs.Construct, id string, props *TributaryStackProps) (*TributaryStack, error) {
	if props == nil {
		props = &TributaryStackProps{}
	}
	node := constructs.Node_Of(scope)
	assetDir := props.AssetDir
	if assetDir == "" {
		v, err := contextString(node, ContextAssetDir, DefaultAssetDir)
		if err != nil {
			return nil, err
		}
		assetDir = v
	}
	authContext, err := contextString(node, ContextIngestAuth, "")
	if err != nil {
		return nil, err
	}
	auth, err := ingestAuth(props.IngestAuth, authContext)
	if err != nil {
		return nil, err
	}
	if err := CheckAssets(assetDir, FunctionNames); err != nil {
		return nil, err
	}

	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Tributary: serverless stream processing in Go (ingest -> Kinesis -> aggregate -> DynamoDB, failures -> quarantine)")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	s := &TributaryStack{Stack: stack, IngestAuth: auth, AssetDirUsed: assetDir}

	s.Events = awskinesis.NewStream(stack, jsii.String("Events"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(2),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})

	s.Counts = awsdynamodb.NewTable(stack, jsii.String("Counts"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("key"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("window"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})

	s.Quarantine = awsdynamodb.NewTable(stack, jsii.String("Quarantine"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("source"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sequenceNumber"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String("expiresAt"),
	})

	// Failures is the on-failure destination of every stream mapping and the
	// source of quarantine.
	s.Failures = NewQueueWithDLQ(stack, "Failures", QueueWithDLQProps{
		ConsumerTimeout: quarantineTimeout,
		MaxReceiveCount: DefaultQueueMaxReceiveCount,
	})
	s.FailuresDLQ = s.Failures.DeadLetterQueue().Queue

	s.Ingest = NewGoFunction(stack, "IngestFn", GoFunctionProps{
		Name:        FunctionIngest,
		AssetDir:    assetDir,
		Description: "Validates producer events, stamps receivedAt and puts them on the events stream",
		Environment: map[string]*string{"EVENTS_STREAM_NAME": s.Events.StreamName()},
		Timeout:     ingestTimeout,
		MemoryMB:    functionMemoryMB,
	})
	s.Events.GrantWrite(s.Ingest.Function)
	// The Function URL is IAM-authenticated by default: anyone who can reach
	// it could otherwise write to the stream (and run up the bill). Producers
	// sign requests with SigV4 and need lambda:InvokeFunctionUrl. For a demo
	// without signing, synthesize with -c tributary:ingestAuth=NONE, which
	// makes the URL public.
	s.IngestURL = s.Ingest.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: auth})

	s.Aggregate = NewStreamFunction(stack, "AggregateFn", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionAggregate,
			AssetDir:    assetDir,
			Description: "Counts events per key and event-time minute into the counts table",
			Environment: map[string]*string{"COUNTS_TABLE_NAME": s.Counts.TableName()},
			Timeout:     aggregateTimeout,
			MemoryMB:    functionMemoryMB,
		},
		Stream:    s.Events,
		OnFailure: s.Failures,
		// Large batches: aggregate writes once per (key, minute) per batch,
		// so its cost follows keys x minutes, not events.
		BatchSize:         500,
		MaxBatchingWindow: 5 * time.Second,
		StartingPosition:  awslambda.StartingPosition_TRIM_HORIZON,
		RetryAttempts:     3,
		MaxRecordAge:      time.Hour,
	})
	s.Counts.GrantWriteData(s.Aggregate.Function)

	s.Quarantiner = NewQueueFunction(stack, "QuarantineFn", QueueFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionQuarantine,
			AssetDir:    assetDir,
			Description: "Copies the records of failed stream batches into the quarantine table",
			Environment: map[string]*string{"QUARANTINE_TABLE_NAME": s.Quarantine.TableName()},
			Timeout:     quarantineTimeout,
			MemoryMB:    functionMemoryMB,
		},
		Queue:          s.Failures,
		BatchSize:      10,
		MaxConcurrency: 2,
	})
	s.Quarantine.GrantWriteData(s.Quarantiner.Function)
	// quarantine re-reads a failed batch from the stream by sequence number
	// (GetShardIterator AT_SEQUENCE_NUMBER, then GetRecords); it needs no
	// other read (no ListShards, no consumers).
	s.Events.Grant(s.Quarantiner.Function,
		jsii.String("kinesis:DescribeStream"),
		jsii.String("kinesis:GetShardIterator"),
		jsii.String("kinesis:GetRecords"))

	output(stack, "IngestUrl", s.IngestURL.Url(), "ingest Function URL: POST events here")
	output(stack, "EventsStreamName", s.Events.StreamName(), "Kinesis stream of ingested events")
	output(stack, "CountsTableName", s.Counts.TableName(), "DynamoDB table of per-key, per-minute counts")
	output(stack, "QuarantineTableName", s.Quarantine.TableName(), "DynamoDB table of records from failed batches")
	output(stack, "FailuresQueueUrl", s.Failures.QueueUrl(), "SQS queue of on-failure records of the stream mappings")
	output(stack, "FailuresDlqUrl", s.FailuresDLQ.QueueUrl(), "SQS dead-letter queue of failure records quarantine could not handle")
	return s, nil
}

func output(stack awscdk.Stack, id string, value *string, description string) {
	awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{
		Value:       value,
		Description: jsii.String(description),
	})
}

// CheckAssets reports every function in names whose <assetDir>/<name>/bootstrap
// is missing, so that synth fails naming the file instead of deep in the CDK.
func CheckAssets(assetDir string, names []string) error {
	var errs []error
	for _, name := range names {
		p := filepath.Join(assetDir, name, "bootstrap")
		info, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("function %s: %s does not exist (build the function binaries first, see the Makefile)", name, p))
		case err != nil:
			errs = append(errs, fmt.Errorf("function %s: %w", name, err))
		case info.IsDir():
			errs = append(errs, fmt.Errorf("function %s: %s is a directory, want the bootstrap binary", name, p))
		}
	}
	return errors.Join(errs...)
}

// ingestAuth resolves the Function URL auth type from the prop, else the
// context value, else AWS_IAM.
func ingestAuth(prop awslambda.FunctionUrlAuthType, fromContext string) (awslambda.FunctionUrlAuthType, error) {
	v := string(prop)
	if v == "" {
		v = fromContext
	}
	switch awslambda.FunctionUrlAuthType(v) {
	case "":
		return awslambda.FunctionUrlAuthType_AWS_IAM, nil
	case awslambda.FunctionUrlAuthType_AWS_IAM, awslambda.FunctionUrlAuthType_NONE:
		return awslambda.FunctionUrlAuthType(v), nil
	}
	return "", fmt.Errorf("%s %q: want AWS_IAM or NONE", ContextIngestAuth, v)
}

// contextString is the string context value key, or def if unset or empty.
func contextString(node constructs.Node, key, def string) (string, error) {
	switch v := node.TryGetContext(jsii.String(key)).(type) {
	case nil:
		return def, nil
	case string:
		if v == "" {
			return def, nil
		}
		return v, nil
	default:
		return "", fmt.Errorf("context %s: got %v (%T), want a string", key, v, v)
	}
}
