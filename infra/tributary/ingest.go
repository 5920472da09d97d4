package tributary

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// IngestAuthMode is how producers authenticate to the ingest Function URL
// (context tributary:ingestAuth).
type IngestAuthMode string

const (
	// IngestAuthIAM: the URL's auth type is AWS_IAM; producers sign with
	// SigV4 and need lambda:InvokeFunctionUrl. The default.
	IngestAuthIAM IngestAuthMode = "AWS_IAM"
	// IngestAuthHMAC: for producers without AWS credentials (devices). The
	// URL's auth type is NONE and the function itself refuses every request
	// without a valid HMAC-SHA256 signature made with the secret the stack
	// creates in Secrets Manager (package ingest: Sign, StringToSign).
	IngestAuthHMAC IngestAuthMode = "HMAC"
)

// Environment variables of ingest, read by package ingest (EnvOptions).
const (
	EnvEventsStreamName       = "EVENTS_STREAM_NAME"
	EnvIngestRoutes           = "INGEST_ROUTES"
	EnvIngestDropSample       = "INGEST_DROP_SAMPLE"
	EnvIngestIdempotencyTable = "INGEST_IDEMPOTENCY_TABLE"
	EnvIngestMaxEventAge      = "INGEST_MAX_EVENT_AGE"
	EnvIngestAuth             = "INGEST_AUTH"
	EnvIngestSecretArn        = "INGEST_SECRET_ARN"
)

// defaultStreamRetention is a Kinesis stream's retention when its
// RetentionPeriodHours is not set.
const defaultStreamRetention = 24 * time.Hour

// The calls ingest makes: PutRecords on the events stream (nothing else:
// it never lists shards or describes the stream); package ingest's
// requestTable (PutItem to claim a key, UpdateItem to store the answer or
// resume a partial one, GetItem when an endpoint does not return the old
// item) on its requests table; GetSecretValue (AWSCURRENT and AWSPREVIOUS)
// on its signing secret. Keep them in step with those interfaces: a call
// missing here works locally, where permissions are not enforced, and fails
// in AWS.
var (
	ingestStreamActions   = []string{"kinesis:PutRecords"}
	ingestRequestsActions = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"}
	ingestSecretActions   = []string{"secretsmanager:GetSecretValue"}
)

// ingestAuth resolves the auth mode from the prop, else the context value,
// else AWS_IAM.
func ingestAuth(prop IngestAuthMode, fromContext string) (IngestAuthMode, error) {
	v := prop
	if v == "" {
		v = IngestAuthMode(fromContext)
	}
	switch v {
	case "":
		return IngestAuthIAM, nil
	case IngestAuthIAM, IngestAuthHMAC:
		return v, nil
	case "NONE":
		return "", fmt.Errorf("%s %q: a public URL without any check is no longer offered; use HMAC (requests signed with a secret the stack keeps in Secrets Manager) or AWS_IAM", ContextIngestAuth, v)
	}
	return "", fmt.Errorf("%s %q: want AWS_IAM or HMAC", ContextIngestAuth, v)
}

// addIngest creates the ingest function, its Function URL (auth as
// s.IngestAuth says), its idempotency-records table and, for HMAC, its
// signing secret, and grants the function what it calls and nothing else.
func (s *TributaryStack) addIngest(assetDir string) {
	stack := s.Stack

	// Request records of the Idempotency-Key header (package idempotency's
	// schema). They live a day (package ingest's DefaultIdempotencyExpiry):
	// nothing to keep on delete.
	s.IngestRequests = awsdynamodb.NewTable(stack, jsii.String("IngestRequests"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(idempotencyKeyAttribute), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(idempotencyTTLAttribute),
		RemovalPolicy:       awscdk.RemovalPolicy_DESTROY,
	})

	env := map[string]*string{
		EnvEventsStreamName: s.Events.StreamName(),
		// The notes' three answers to producers outpacing consumers, per
		// route: buffer in Kinesis, push back with 429, or drop (counted).
		EnvIngestRoutes:           jsii.String(IngestRoutes),
		EnvIngestDropSample:       jsii.String("100"),
		EnvIngestIdempotencyTable: s.IngestRequests.TableName(),
		// Events older than the stream keeps are refused: a replay could
		// never rebuild their windows.
		EnvIngestMaxEventAge: jsii.String(durationEnv(streamRetention(s.Events))),
		EnvIngestAuth:        jsii.String(string(s.IngestAuth)),
	}
	if s.IngestAuth == IngestAuthHMAC {
		s.IngestSecret = awssecretsmanager.NewSecret(stack, jsii.String("IngestSigningSecret"), &awssecretsmanager.SecretProps{
			Description: jsii.String("Tributary: the secret producers sign ingest requests with (HMAC-SHA256, see the README)"),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength:     jsii.Number(64),
				ExcludePunctuation: jsii.Bool(true),
				IncludeSpace:       jsii.Bool(false),
			},
		})
		cdknag.NagSuppressions_AddResourceSuppressions(s.IngestSecret, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-SMG4"),
			Reason: jsii.String("The signing secret is shared with the producers (devices) that sign requests with it, so a " +
				"rotation Lambda cannot deliver a new value to them. It is rotated by hand: put a new value, hand it to the " +
				"devices; ingest accepts AWSCURRENT and AWSPREVIOUS meanwhile (README: signed requests)."),
		}}, jsii.Bool(false))
		env[EnvIngestSecretArn] = s.IngestSecret.SecretArn()
	}

	s.Ingest = NewGoFunction(stack, "IngestFn", GoFunctionProps{
		Name:        FunctionIngest,
		AssetDir:    assetDir,
		Description: "Validates producer events, stamps receivedAt and puts them on the events stream",
		Environment: env,
		Timeout:     ingestTimeout,
		MemoryMB:    functionMemoryMB,
	})
	s.Events.Grant(s.Ingest.Role, *jsii.Strings(ingestStreamActions...)...)
	s.Ingest.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(ingestRequestsActions...),
		Resources: &[]*string{s.IngestRequests.TableArn()},
	}))
	if s.IngestSecret != nil {
		s.Ingest.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(ingestSecretActions...),
			Resources: &[]*string{s.IngestSecret.SecretArn()},
		}))
	}

	// AWS_IAM by default: anyone who can reach the URL could otherwise
	// write to the stream (and run up the bill). With HMAC the URL is NONE,
	// which no cdk-nag AwsSolutions rule checks; the check is the function's
	// own (a 401 before anything is read or written), which is why the
	// function must run with INGEST_AUTH=HMAC and the secret whenever the
	// URL is NONE (TestIngestAuthModes holds the stack to it).
	urlAuth := awslambda.FunctionUrlAuthType_AWS_IAM
	if s.IngestAuth == IngestAuthHMAC {
		urlAuth = awslambda.FunctionUrlAuthType_NONE
	}
	s.IngestURL = s.Ingest.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: urlAuth})

	output(stack, "IngestRequestsTableName", s.IngestRequests.TableName(), "DynamoDB table of ingest's Idempotency-Key records (kept a day)")
	if s.IngestSecret != nil {
		output(stack, "IngestSecretArn", s.IngestSecret.SecretArn(), "Secrets Manager secret producers sign ingest requests with (aws secretsmanager get-secret-value --secret-id ...)")
	}
}

// streamRetention is stream's retention period: its RetentionPeriodHours,
// or Kinesis' default when unset.
func streamRetention(stream awskinesis.Stream) time.Duration {
	cfn, ok := stream.Node().DefaultChild().(awskinesis.CfnStream)
	if !ok {
		return defaultStreamRetention
	}
	if h := cfn.RetentionPeriodHours(); h != nil && *h > 0 {
		return time.Duration(*h * float64(time.Hour))
	}
	return defaultStreamRetention
}

// durationEnv writes d as a Go duration in hours ("24h"), as package ingest
// reads it.
func durationEnv(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
