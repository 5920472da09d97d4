package tributary

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionStatusCodes is the example stream function of your own
// (examples/functions/statuscodes, on package handler) the repo's stack
// deploys with NewStreamHandler.
const FunctionStatusCodes = "statuscodes"

// Environment variables of a stream function built on package handler
// (handler.FromEnv reads them); QUARANTINE_TABLE_NAME is
// EnvQuarantineTableName, OUTPUT_STREAM_NAME EnvOutputStreamName and
// EVENTS_STREAM_NAME (the stream the tick reads before it takes a shard
// for idle) EnvEventsStreamName.
const EnvStateTableName = "STATE_TABLE_NAME"

// StreamHandlerProps configures NewStreamHandler.
type StreamHandlerProps struct {
	// Name is the function's asset name: its code is
	// <AssetDir>/<Name>/bootstrap (for example "statuscodes"). Required.
	Name string
	// AssetDir holds <Name>/bootstrap. If empty, the context value
	// ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// Description is the Lambda function's description.
	Description string
	// Events is the stream of envelopes the function reads
	// (EVENTS_STREAM_NAME too: its tick reads it, after the last record
	// the function committed, before it takes a shard for idle). Required.
	Events awskinesis.IStream
	// EventTypes are the event types the function's Selector reads, for
	// its dashboard. The mapping hands the function every record all the
	// same (no filter): its Selector skips the others (handler.ErrSkip) and
	// it commits its position past them, which its tick needs to tell an
	// idle shard from one with records still to process — behind a filter
	// the position stopped at the last record of these types, and any
	// other event after it held the shard's windows open until the next.
	EventTypes []string
	// Quarantine is where records that can never be added are set aside
	// (QUARANTINE_TABLE_NAME). Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record of a batch that
	// exhausted its retries. Required.
	OnFailure awssqs.IQueue
	// TickFailures receives the scheduled ticks that failed after their
	// retries; if nil, a queue of its own (NewFailureQueue).
	TickFailures awssqs.IQueue
	// Output is the stream final results are put on (OUTPUT_STREAM_NAME);
	// if nil, one is created (one shard, encrypted).
	Output awskinesis.IStream
	// BatchSize is the mapping's batch size; DefaultStreamBatchSize if zero.
	BatchSize int
}

// StreamHandler is a stream function of your own (package handler) with
// what its guarantees need: its state table (package state's schema), the
// output stream, the Kinesis mapping (batch item failures, bisection, an
// on-failure destination, bounded retries), a schedule for its tick, and
// grants of exactly the calls the handler makes.
type StreamHandler struct {
	State    awsdynamodb.Table
	Output   awskinesis.IStream
	Function *StreamFunction
	Schedule awsevents.Rule
}

var assetNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// NewStreamHandler creates a stream handler function and its resources.
func NewStreamHandler(scope constructs.Construct, id string, props StreamHandlerProps) (*StreamHandler, error) {
	if props.Events == nil || props.Quarantine == nil || props.OnFailure == nil {
		return nil, fmt.Errorf("StreamHandler %q: Events, Quarantine and OnFailure are required", id)
	}
	if !assetNameRE.MatchString(props.Name) {
		return nil, fmt.Errorf("StreamHandler %q: Name %q is not an asset name (lower-case letters, digits, '-')", id, props.Name)
	}
	assetDir, err := assetDirOf(constructs.Node_Of(scope), props.AssetDir)
	if err != nil {
		return nil, fmt.Errorf("StreamHandler %q: %w", id, err)
	}
	if err := CheckAssets(assetDir, []string{props.Name}); err != nil {
		return nil, fmt.Errorf("StreamHandler %q: %w", id, err)
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	h := &StreamHandler{Output: props.Output}
	if h.Output == nil {
		out := awskinesis.NewStream(c, jsii.String("Results"), &awskinesis.StreamProps{
			StreamMode: awskinesis.StreamMode_PROVISIONED,
			ShardCount: jsii.Number(1),
			Encryption: awskinesis.StreamEncryption_MANAGED,
		})
		// Derived: replaying the events stream rebuilds it (the ids are stable).
		out.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
		h.Output = out
	}
	h.State = newKeyedStateTable(c, "State")
	desc := props.Description
	if desc == "" {
		desc = fmt.Sprintf("Stream handler %s (package handler): windows per key into its state table, final results onto its output stream", props.Name)
	}
	h.Function = NewStreamFunction(c, "Function", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        props.Name,
			AssetDir:    assetDir,
			Description: desc,
			Environment: map[string]*string{
				EnvStateTableName:   h.State.TableName(),
				EnvOutputStreamName: h.Output.StreamName(),
			},
		},
		Stream:    props.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
		BatchSize: props.BatchSize,
	})
	grantKeyedState(h.Function.GoFunction, h.State)
	grantBacklogRead(h.Function.GoFunction, props.Events)
	h.Output.Grant(h.Function.Role, jsii.String("kinesis:PutRecords"))
	tickFailures := props.TickFailures
	if tickFailures == nil {
		tickFailures = NewFailureQueue(c, "TickFailures", "the tick's asynchronous on-failure destination")
	}
	h.Schedule = addTick(c, "Tick", h.Function.GoFunction, tickFailures,
		fmt.Sprintf("Ticks %s: idle shards' watermarks advance, their windows' final results are emitted", props.Name))
	awscdk.NewCfnOutput(c, jsii.String("ResultsStreamName"), &awscdk.CfnOutputProps{
		Value: h.Output.StreamName(), Description: jsii.String(fmt.Sprintf("Kinesis stream of %s's final window results", props.Name)),
	})
	return h, nil
}
