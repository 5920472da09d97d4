package tributary

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// QuarantineProps configures NewQuarantine.
type QuarantineProps struct {
	// AssetDir holds quarantine/bootstrap. If empty, context
	// ContextAssetDir, else DefaultAssetDir.
	AssetDir string
	// MaxConcurrency bounds the quarantine function's concurrent batches
	// (2 if zero, at least 2: Lambda's minimum for SQS).
	MaxConcurrency int
}

// Quarantine is where records go that were given up on, with their data
// and a reason: Table (keys source/sequenceNumber, TTL expiresAt), which
// stream consumers set poison records aside in directly; Failures, the
// queue every stream mapping names as its on-failure destination, with
// its dead-letter queue FailuresDLQ; and Function, which reads each
// on-failure record from Failures, fetches the failed range from its
// stream and copies the records into Table.
//
// Give Table to a consumer as its SetAside (StreamFunctionProps) and
// Failures as its OnFailure. NewOperations lets Function read back the
// failed range of every stream that reports to Failures; call it last.
type Quarantine struct {
	constructs.Construct
	Table       awsdynamodb.Table
	Failures    awssqs.Queue
	FailuresDLQ awssqs.IQueue
	Function    *QueueFunction
}

// NewQuarantine creates the quarantine table, the Failures queue and its
// DLQ, and the quarantine function under scope in a construct id. It adds
// the stack outputs QuarantineTableName, FailuresQueueUrl and
// FailuresDlqUrl, so one NewQuarantine per stack. It fails on a missing
// bootstrap.
func NewQuarantine(scope constructs.Construct, id string, props QuarantineProps) (*Quarantine, error) {
	assetDir, err := assetDirOf(constructs.Node_Of(scope), props.AssetDir)
	if err != nil {
		return nil, err
	}
	if err := CheckAssets(assetDir, []string{FunctionQuarantine}); err != nil {
		return nil, err
	}
	maxConcurrency := props.MaxConcurrency
	if maxConcurrency < 2 {
		maxConcurrency = 2
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	q := &Quarantine{Construct: c}
	q.Table = awsdynamodb.NewTable(c, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("source"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sequenceNumber"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String("expiresAt"),
	})
	// Failures is the on-failure destination of every stream mapping and
	// the source of quarantine.
	q.Failures = NewQueueWithDLQ(c, "Failures", QueueWithDLQProps{
		ConsumerTimeout: quarantineTimeout,
		MaxReceiveCount: DefaultQueueMaxReceiveCount,
	})
	q.FailuresDLQ = q.Failures.DeadLetterQueue().Queue
	q.Function = NewQueueFunction(c, "Function", QueueFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionQuarantine,
			AssetDir:    assetDir,
			Description: "Copies the records of failed stream batches into the quarantine table",
			Environment: map[string]*string{EnvQuarantineTableName: q.Table.TableName()},
			Timeout:     quarantineTimeout,
			MemoryMB:    functionMemoryMB,
		},
		Queue:          q.Failures,
		BatchSize:      10,
		MaxConcurrency: maxConcurrency,
	})
	// quarantine only writes items (package setaside's Sink: BatchWriteItem
	// and UpdateItem for the messages it sets aside, and a conditional
	// PutItem for the records of failed ranges, which never replaces a
	// record its function set aside); its reads of the
	// failed ranges are granted last, over every stream that reports to
	// Failures (GrantFailedRangeReads in NewOperations).
	q.Function.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(quarantineTableActions...),
		Resources: &[]*string{q.Table.TableArn()},
	}))

	stack := awscdk.Stack_Of(c)
	output(stack, "QuarantineTableName", q.Table.TableName(), "DynamoDB table of records from failed batches")
	output(stack, "FailuresQueueUrl", q.Failures.QueueUrl(), "SQS queue of on-failure records of the stream mappings")
	output(stack, "FailuresDlqUrl", q.FailuresDLQ.QueueUrl(), "SQS dead-letter queue of failure records quarantine could not handle")
	return q, nil
}
