package tributary

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// NewFailureQueue creates a failure destination: a queue where Lambda or
// EventBridge puts what failed after its retries (a failed tick with its
// request and error), for a person to read. Retained when the stack is
// destroyed, encrypted, TLS only, kept for the longest SQS allows, and
// alarmed on its depth by NewOperations like every failure queue. Nothing
// consumes it, so it has no dead-letter queue of its own (the cdk-nag rule
// asking for one is suppressed with that reason).
func NewFailureQueue(scope constructs.Construct, id, what string) awssqs.Queue {
	q := awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(maxQueueRetention),
		RemovalPolicy:   awscdk.RemovalPolicy_RETAIN,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(q, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String(id + " is itself a failure destination (" + what + "); " +
			"nothing consumes it, so no message can fail to be processed and need a dead-letter queue."),
	}}, jsii.Bool(true))
	return q
}
