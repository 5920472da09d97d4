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
	"github.com/aws/constructs-go/constructs/v10"
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

// IngestProps configures NewIngest.
type IngestProps struct {
	// AssetDir holds ingest/bootstrap. If empty, context ContextAssetDir,
	// else DefaultAssetDir.
	AssetDir string
	// Events is the stream ingest puts events on. If nil, NewIngest
	// creates one: provisioned, two shards, encrypted, retention
	// DefaultEventsRetention.
	Events awskinesis.Stream
	// Auth is how producers authenticate. If empty, context
	// ContextIngestAuth, else AWS_IAM.
	Auth IngestAuthMode
	// Routes is the load policy per URL path (INGEST_ROUTES); IngestRoutes
	// if empty.
	Routes string
}

// Ingest is the front door: producers POST events to URL (a Lambda
// Function URL), the function validates them, stamps receivedAt, answers
// a repeated Idempotency-Key from Requests, and puts them on Events.
type Ingest struct {
	constructs.Construct
	// Events is the stream events are put on (given or created).
	Events awskinesis.Stream
	// Function is the ingest function; URL its Function URL.
	Function *GoFunction
	URL      awslambda.FunctionUrl
	// Requests holds ingest's Idempotency-Key records (a day).
	Requests awsdynamodb.Table
	// Secret is the signing secret producers sign with; nil unless Auth is
	// HMAC.
	Secret awssecretsmanager.Secret
	// Auth is the resolved auth mode.
	Auth IngestAuthMode
}

// NewIngest creates, under scope in a construct id, the ingest function,
// its Function URL (auth as props.Auth says), its idempotency-records table,
// for HMAC its signing secret, and the events stream if props.Events is
// nil; it grants the function what it calls and nothing else. It adds the
// stack outputs IngestUrl, EventsStreamName, IngestRequestsTableName (and
// IngestSecretArn), so one NewIngest per stack. It fails on an unknown auth
// mode or a missing bootstrap.
func NewIngest(scope constructs.Construct, id string, props IngestProps) (*Ingest, error) {
	node := constructs.Node_Of(scope)
	assetDir, err := assetDirOf(node, props.AssetDir)
	if err != nil {
		return nil, err
	}
	authContext, err := contextString(node, ContextIngestAuth, "")
	if err != nil {
		return nil, err
	}
	auth, err := ingestAuth(props.Auth, authContext)
	if err != nil {
		return nil, err
	}
	if err := CheckAssets(assetDir, []string{FunctionIngest}); err != nil {
		return nil, err
	}
	routes := props.Routes
	if routes == "" {
		routes = IngestRoutes
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	in := &Ingest{Construct: c, Events: props.Events, Auth: auth}
	if in.Events == nil {
		in.Events = NewEventsStream(c, "Events", DefaultEventsRetention)
	}

	// Request records of the Idempotency-Key header (package idempotency's
	// schema). They live a day (package ingest's DefaultIdempotencyExpiry):
	// nothing to keep on delete.
	in.Requests = awsdynamodb.NewTable(c, jsii.String("Requests"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(idempotencyKeyAttribute), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(idempotencyTTLAttribute),
		RemovalPolicy:       awscdk.RemovalPolicy_DESTROY,
	})

	env := map[string]*string{
		EnvEventsStreamName: in.Events.StreamName(),
		// The notes' three answers to producers outpacing consumers, per
		// route: buffer in Kinesis, push back with 429, or drop (counted).
		EnvIngestRoutes:           jsii.String(routes),
		EnvIngestDropSample:       jsii.String("100"),
		EnvIngestIdempotencyTable: in.Requests.TableName(),
		// Events older than the stream keeps are refused: a replay could
		// never rebuild their windows.
		EnvIngestMaxEventAge: jsii.String(durationEnv(streamRetention(in.Events))),
		EnvIngestAuth:        jsii.String(string(auth)),
	}
	if auth == IngestAuthHMAC {
		in.Secret = awssecretsmanager.NewSecret(c, jsii.String("SigningSecret"), &awssecretsmanager.SecretProps{
			Description: jsii.String("Tributary: the secret producers sign ingest requests with (HMAC-SHA256, see docs/events.md)"),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength:     jsii.Number(64),
				ExcludePunctuation: jsii.Bool(true),
				IncludeSpace:       jsii.Bool(false),
			},
		})
		cdknag.NagSuppressions_AddResourceSuppressions(in.Secret, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-SMG4"),
			Reason: jsii.String("The signing secret is shared with the producers (devices) that sign requests with it, so a " +
				"rotation Lambda cannot deliver a new value to them. It is rotated by hand: put a new value, hand it to the " +
				"devices; ingest accepts AWSCURRENT and AWSPREVIOUS meanwhile (docs/events.md: signed requests)."),
		}}, jsii.Bool(false))
		env[EnvIngestSecretArn] = in.Secret.SecretArn()
	}

	in.Function = NewGoFunction(c, "Function", GoFunctionProps{
		Name:        FunctionIngest,
		AssetDir:    assetDir,
		Description: "Validates producer events, stamps receivedAt and puts them on the events stream",
		Environment: env,
		Timeout:     ingestTimeout,
		MemoryMB:    functionMemoryMB,
	})
	fn := in.Function
	in.Events.Grant(fn.Role, *jsii.Strings(ingestStreamActions...)...)
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(ingestRequestsActions...),
		Resources: &[]*string{in.Requests.TableArn()},
	}))
	if in.Secret != nil {
		fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(ingestSecretActions...),
			Resources: &[]*string{in.Secret.SecretArn()},
		}))
	}

	// AWS_IAM by default: anyone who can reach the URL could otherwise
	// write to the stream (and run up the bill). With HMAC the URL is NONE,
	// which no cdk-nag AwsSolutions rule checks; the check is the function's
	// own (a 401 before anything is read or written), which is why the
	// function must run with INGEST_AUTH=HMAC and the secret whenever the
	// URL is NONE (TestIngestAuthModes holds the stack to it).
	urlAuth := awslambda.FunctionUrlAuthType_AWS_IAM
	if auth == IngestAuthHMAC {
		urlAuth = awslambda.FunctionUrlAuthType_NONE
	}
	in.URL = fn.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: urlAuth})

	stack := awscdk.Stack_Of(c)
	output(stack, "IngestUrl", in.URL.Url(), "ingest Function URL: POST events here")
	output(stack, "EventsStreamName", in.Events.StreamName(), "Kinesis stream of ingested events")
	output(stack, "IngestRequestsTableName", in.Requests.TableName(), "DynamoDB table of ingest's Idempotency-Key records (kept a day)")
	if in.Secret != nil {
		output(stack, "IngestSecretArn", in.Secret.SecretArn(), "Secrets Manager secret producers sign ingest requests with (aws secretsmanager get-secret-value --secret-id ...)")
	}
	return in, nil
}

// NewEventsStream creates an events stream: provisioned with two shards,
// encrypted with the AWS managed key, keeping records for retention
// (quarantine reads a failed record back from it, so retention is how long
// a failure can wait; see ContextEventsRetentionHours).
func NewEventsStream(scope constructs.Construct, id string, retention time.Duration) awskinesis.Stream {
	return awskinesis.NewStream(scope, jsii.String(id), &awskinesis.StreamProps{
		StreamMode:      awskinesis.StreamMode_PROVISIONED,
		ShardCount:      jsii.Number(2),
		Encryption:      awskinesis.StreamEncryption_MANAGED,
		RetentionPeriod: awscdk.Duration_Hours(jsii.Number(retention.Hours())),
	})
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
