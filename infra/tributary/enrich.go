package tributary

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionEnrich is the stream–table join function (functions/enrich).
const FunctionEnrich = "enrich"

// Environment variables of the enrich function, read by functions/enrich.
const (
	EnvEnrichedStreamName = "ENRICHED_STREAM_NAME"
	EnvJoinTableName      = "JOIN_TABLE_NAME"
	// EnvDedupeHorizon is how long an activity event's id suppresses its
	// copies (a Go duration; "0s": none), the pipeline's dedupeHorizon.
	EnvDedupeHorizon = "DEDUPE_HORIZON"
)

// enrichJoinActions are the DynamoDB calls package enrich makes on its join
// table (the compacted changelog): one BatchGetItem per batch, then its
// fenced writes; and the dedupe ledger's (package dedupe) conditional puts
// of a key's head, and the puts that seal a full head. Keep them in
// step with the package: a missing action works locally, where permissions
// are not enforced, and fails in AWS.
var enrichJoinActions = []string{"dynamodb:BatchGetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"}

// EnrichmentProps configures NewEnrichment.
type EnrichmentProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Events is the stream carrying both the activity events and the
	// profiles' changelog (written by cdc with the same partition key).
	// Required.
	Events awskinesis.IStream
	// Quarantine is the table the function sets aside the records that can
	// never succeed in (package setaside). Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record for a batch that
	// exhausted its retries or aged out. Required.
	OnFailure awssqs.IQueue
	// RemovalPolicy of the join table and the enriched stream; DESTROY if
	// empty: both are rebuilt from the changelog (see cmd/snapshot).
	RemovalPolicy awscdk.RemovalPolicy
	// DedupeHorizon is how long an activity event's id suppresses its
	// copies ("1h" if empty; "0s" turns it off).
	DedupeHorizon string
}

// Enrichment is the stream–table join of the topology: enrich reads the
// events stream through its own enhanced fan-out consumer (a subscriber
// next to aggregate, each receiving every record), keeps the compacted
// changelog of the profiles table in JoinTable, and writes every activity
// event joined with the profile version it saw to Enriched.
type Enrichment struct {
	// Enriched is the output stream, partitioned by the entity key.
	Enriched awskinesis.Stream
	// JoinTable is the join's local copy of the profiles table: the
	// compacted changelog per key and a tail per shard (partition key pk).
	JoinTable awsdynamodb.Table
	// Function is the enrich function and its mapping.
	Function *StreamFunction
}

// NewEnrichment creates the enriched stream, the join table and the enrich
// function under scope.
func NewEnrichment(scope constructs.Construct, id string, props EnrichmentProps) *Enrichment {
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.AssetDir == "" {
		panic(fmt.Sprintf("Enrichment %q: AssetDir, Events, Quarantine and OnFailure are required", id))
	}
	removal := props.RemovalPolicy
	if removal == "" {
		removal = awscdk.RemovalPolicy_DESTROY
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	e := &Enrichment{}
	e.Enriched = awskinesis.NewStream(c, jsii.String("Enriched"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(1),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})
	e.Enriched.ApplyRemovalPolicy(removal)
	e.JoinTable = awsdynamodb.NewTable(c, jsii.String("JoinState"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: removal,
		// The dedupe ledger's items expire; the join's own items set no TTL.
		TimeToLiveAttribute: jsii.String("expiresAt"),
	})
	horizon := props.DedupeHorizon
	if horizon == "" {
		horizon = "1h"
	}
	// StreamFunction defaults: ReportBatchItemFailures, bisect on error,
	// bounded retries and record age, TRIM_HORIZON: a new enrich rebuilds
	// its copy of the table from offset 0 of the changelog.
	e.Function = NewStreamFunction(c, "Enrich", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionEnrich,
			AssetDir:    props.AssetDir,
			Description: "Joins activity events with the profile version they follow on the events stream",
			Environment: map[string]*string{
				EnvEnrichedStreamName: e.Enriched.StreamName(),
				EnvJoinTableName:      e.JoinTable.TableName(),
				EnvDedupeHorizon:      jsii.String(horizon),
			},
		},
		Stream:    props.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
		// Fan-out: its own 2 MiB/s per shard, so adding this subscriber
		// takes no read throughput from aggregate.
		EnhancedFanOut: true,
	})
	e.Enriched.Grant(e.Function.Role, jsii.String("kinesis:PutRecords"))
	e.Function.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(enrichJoinActions...),
		Resources: &[]*string{e.JoinTable.TableArn()},
	}))
	// The dedupe ledger seals a full head with PutItems (above).
	return e
}
