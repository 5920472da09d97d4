package tributary

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// FunctionCDC is the change data capture function (functions/cdc).
const FunctionCDC = "cdc"

// ProfilesPartitionKey is the profiles table's partition key, the entity key
// the cdc function partitions the changelog by (its ENTITY_KEY_ATTRIBUTE).
const ProfilesPartitionKey = "userId"

// ProfilesCDCProps configures NewProfilesCDC.
type ProfilesCDCProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Events is the Kinesis stream the changelog is written to, partitioned
	// by ProfilesPartitionKey so that a change meets the later events of its
	// entity on one shard. Required.
	Events awskinesis.IStream
	// Quarantine is the table the function sets aside the records that can
	// never succeed in (package setaside). Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record for a batch of changes
	// that exhausted its retries or aged out. Required.
	OnFailure awssqs.IQueue
	// RemovalPolicy of the table; RETAIN if empty (the profiles are data of
	// record).
	RemovalPolicy awscdk.RemovalPolicy
}

// ProfilesCDC is the profiles table and its change data capture: the
// table's stream (NEW_AND_OLD_IMAGES) feeds the cdc function, which writes
// every change as a versioned changelog record (a tombstone for a deletion)
// to the events stream.
type ProfilesCDC struct {
	// Table is the profiles table (partition key ProfilesPartitionKey, a
	// number attribute "version" bumped by its writer on every write).
	Table awsdynamodb.Table
	// Function is the cdc function on the table's stream.
	Function *StreamFunction
}

// NewProfilesCDC creates the profiles table and the cdc function under
// scope.
func NewProfilesCDC(scope constructs.Construct, id string, props ProfilesCDCProps) *ProfilesCDC {
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.AssetDir == "" {
		panic(fmt.Sprintf("ProfilesCDC %q: AssetDir, Events, Quarantine and OnFailure are required", id))
	}
	removal := props.RemovalPolicy
	if removal == "" {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	p := &ProfilesCDC{}
	p.Table = awsdynamodb.NewTable(c, jsii.String("Profiles"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(ProfilesPartitionKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Stream:        awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		RemovalPolicy: removal,
	})
	// StreamFunction defaults: ReportBatchItemFailures, bisect on error,
	// bounded retries and record age, TRIM_HORIZON (no change is skipped).
	p.Function = NewStreamFunction(c, "CDC", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionCDC,
			AssetDir:    props.AssetDir,
			Description: "Writes the profiles table's changes to the events stream as a changelog",
			Environment: map[string]*string{
				"EVENTS_STREAM_NAME":   props.Events.StreamName(),
				"ENTITY_KEY_ATTRIBUTE": jsii.String(ProfilesPartitionKey),
			},
		},
		Table:     p.Table,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
	})
	// Only PutRecords: the function never reads the events stream.
	props.Events.Grant(p.Function.Role, jsii.String("kinesis:PutRecords"))
	// The DynamoDB event source grants dynamodb:ListStreams on "*": the
	// action lists the account's streams and has no resource-level scope.
	cdknag.NagSuppressions_AddResourceSuppressions(p.Function.Role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("dynamodb:ListStreams, granted by the DynamoDB Streams event source, does not support " +
			"resource-level permissions; Resource * is the only valid resource."),
		AppliesTo: &[]any{"Resource::*"},
	}}, jsii.Bool(true))
	return p
}
