package tributary

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionSnapshot is the snapshot bootstrap function (functions/snapshot).
const FunctionSnapshot = "snapshot"

// snapshotTimeout is Lambda's maximum: a snapshot scans the whole table.
// A table too large for it is snapshotted with cmd/snapshot instead.
const snapshotTimeout = 15 * time.Minute

// snapshotMemoryMB is more than the other functions get: a snapshot holds
// a page of the scan and its PutRecords batches at once.
const snapshotMemoryMB = 512

// SnapshotProps configures NewSnapshot.
type SnapshotProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Table is the CDC source table (with a stream); its name is the
	// function's default table. Required.
	Table awsdynamodb.ITable
	// Events is the stream snapshot records are put on. Required.
	Events awskinesis.IStream
	// EntityKeyAttribute is the table's entity key attribute;
	// ProfilesPartitionKey if empty.
	EntityKeyAttribute string
}

// Snapshot is the bootstrap of a new consumer of a CDC changelog: a
// function, invoked by hand (console Test tab: {"table": "..."} or {}),
// that publishes the table's items to the events stream tied to its stream
// position and returns where a new consumer starts. It has no trigger.
type Snapshot struct {
	Function *GoFunction
}

// NewSnapshot creates the snapshot function under scope with exactly the
// grants a snapshot needs: DescribeTable and Scan on the table, the stream
// reads that find its position, PutRecords on the events stream.
func NewSnapshot(scope constructs.Construct, id string, props SnapshotProps) *Snapshot {
	if props.AssetDir == "" || props.Table == nil || props.Events == nil {
		panic(fmt.Sprintf("Snapshot %q: AssetDir, Table and Events are required", id))
	}
	if props.Table.TableStreamArn() == nil {
		panic(fmt.Sprintf("Snapshot %q: Table has no stream: the snapshot is tied to a stream position", id))
	}
	key := props.EntityKeyAttribute
	if key == "" {
		key = ProfilesPartitionKey
	}
	fn := NewGoFunction(scope, id, GoFunctionProps{
		Name:        FunctionSnapshot,
		AssetDir:    props.AssetDir,
		Description: "Publishes a CDC table's items to the events stream tied to its stream position (bootstrap of a new consumer)",
		Environment: map[string]*string{
			"EVENTS_STREAM_NAME":   props.Events.StreamName(),
			"PROFILES_TABLE_NAME":  props.Table.TableName(),
			"ENTITY_KEY_ATTRIBUTE": jsii.String(key),
		},
		Timeout:  snapshotTimeout,
		MemoryMB: snapshotMemoryMB,
	})
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:DescribeTable", "dynamodb:Scan"),
		Resources: &[]*string{props.Table.TableArn()},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"),
		Resources: &[]*string{props.Table.TableStreamArn()},
	}))
	props.Events.Grant(fn.Role, jsii.String("kinesis:PutRecords"))
	return &Snapshot{Function: fn}
}
