package tributary

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// FunctionArchive is the archiver (functions/archive): it writes the events
// stream to the archive bucket.
const FunctionArchive = "archive"

// EnvArchiveBucketName names the archive bucket to the archive function
// (and to cmd/replay, as the default of -archive-bucket).
const EnvArchiveBucketName = "ARCHIVE_BUCKET_NAME"

// Context keys of the archive (cdk.json, or cdk synth -c key=value).
const (
	// ContextArchiveInfrequentAccessDays is after how many days an archive
	// object moves to S3 Standard-IA (at least 30, S3's minimum for that
	// transition); DefaultArchiveInfrequentAccess if unset.
	ContextArchiveInfrequentAccessDays = "tributary:archiveInfrequentAccessDays"
	// ContextArchiveExpireDays is after how many days an archive object is
	// deleted; 0 or unset keeps it.
	ContextArchiveExpireDays = "tributary:archiveExpireDays"
	// ContextArchiveBatchingSeconds is how long Lambda gathers records
	// before invoking the archiver (whole seconds, up to 300):
	// DefaultArchiveBatching if unset. Each invocation writes an object per
	// shard, so this sets the number of S3 PUTs and objects.
	ContextArchiveBatchingSeconds = "tributary:archiveBatchingSeconds"
)

// Defaults of the archive.
const (
	DefaultArchiveInfrequentAccess = 30 * 24 * time.Hour
	DefaultArchiveBatching         = time.Minute
	minInfrequentAccess            = 30 * 24 * time.Hour
	archivePrefix                  = "archive/"
	chainPrefix                    = "chain/" // package archive's ChainPrefix
	// archiveRetryAttempts: the archive must not skip a batch, so the
	// archiver retries for as long as a record is in the stream (its
	// MaxRecordAge is the stream's retention).
	archiveRetryAttempts = maxStreamRetryAttempts
	archiveBatchSize     = 10000
	archiveTimeout       = time.Minute
)

// ArchiveProps configures NewArchive.
type ArchiveProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Events is the stream to archive. Required.
	Events awskinesis.Stream
	// OnFailure receives a batch the archiver failed to write after its
	// retries: a hole in the archive, alarmed with every failure queue.
	// Required.
	OnFailure awssqs.IQueue
	// InfrequentAccessAfter, BatchingWindow, ExpireAfter: if zero, the
	// context values (ContextArchive…), else the defaults.
	InfrequentAccessAfter, BatchingWindow, ExpireAfter time.Duration
}

// Archive keeps the events stream past its retention: an S3 bucket
// (encrypted, no public access, TLS only, retained, moved to Standard-IA
// after InfrequentAccessAfter) and the archive function on its own
// enhanced fan-out consumer of the stream, which writes every record with
// its shard and sequence number under archive/<stream>/ (package archive).
// cmd/replay rebuild -archive-bucket reads it.
type Archive struct {
	Bucket   awss3.Bucket
	Function *StreamFunction
}

// NewArchive creates the archive under scope. It fails on a context value
// out of range, naming it.
func NewArchive(scope constructs.Construct, id string, props ArchiveProps) (*Archive, error) {
	if props.AssetDir == "" || props.Events == nil || props.OnFailure == nil {
		panic(fmt.Sprintf("Archive %q: AssetDir, Events and OnFailure are required", id))
	}
	node := constructs.Node_Of(scope)
	ia, err := contextDays(node, ContextArchiveInfrequentAccessDays, props.InfrequentAccessAfter, DefaultArchiveInfrequentAccess)
	if err != nil {
		return nil, err
	}
	if ia < minInfrequentAccess {
		return nil, fmt.Errorf("context %s: %d days: S3 moves objects to Standard-IA after 30 days at the earliest", ContextArchiveInfrequentAccessDays, int(ia/(24*time.Hour)))
	}
	expire, err := contextDays(node, ContextArchiveExpireDays, props.ExpireAfter, 0)
	if err != nil {
		return nil, err
	}
	if expire != 0 && expire <= ia {
		return nil, fmt.Errorf("context %s: %d days is not after the move to Standard-IA (%s, %d days)", ContextArchiveExpireDays, int(expire/(24*time.Hour)), ContextArchiveInfrequentAccessDays, int(ia/(24*time.Hour)))
	}
	batching := props.BatchingWindow
	if batching == 0 {
		if batching, err = contextSeconds(node, ContextArchiveBatchingSeconds, DefaultArchiveBatching, int(maxStreamMaxBatchingWindow/time.Second)); err != nil {
			return nil, err
		}
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	rule := &awss3.LifecycleRule{
		Id:     jsii.String("ArchiveToInfrequentAccess"),
		Prefix: jsii.String(archivePrefix),
		Transitions: &[]*awss3.Transition{{
			StorageClass:    awss3.StorageClass_INFREQUENT_ACCESS(),
			TransitionAfter: awscdk.Duration_Days(jsii.Number(ia.Hours() / 24)),
		}},
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
	}
	if expire > 0 {
		rule.Expiration = awscdk.Duration_Days(jsii.Number(expire.Hours() / 24))
	}
	bucket := awss3.NewBucket(c, jsii.String("Bucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		LifecycleRules:    &[]*awss3.LifecycleRule{rule},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(bucket, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("The archive is written by one function and read by cmd/replay, both with their own roles, " +
			"whose calls CloudTrail data events can record; server access logs would need a second bucket that logs nothing else."),
	}}, jsii.Bool(true))

	fn := NewStreamFunction(c, "Function", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionArchive,
			AssetDir:    props.AssetDir,
			Description: "Writes the events stream to S3, each record with its shard and sequence number (cmd/replay rebuild reads it past the stream's retention)",
			Environment: map[string]*string{EnvArchiveBucketName: bucket.BucketName()},
			Timeout:     archiveTimeout,
		},
		Stream:            props.Events,
		OnFailure:         props.OnFailure,
		StartingPosition:  awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:         archiveBatchSize,
		MaxBatchingWindow: batching,
		RetryAttempts:     archiveRetryAttempts,
		MaxRecordAge:      min(streamRetention(props.Events), maxStreamMaxRecordAge),
		EnhancedFanOut:    true,
	})
	// PutObject under archive/ (it never reads or deletes the archive);
	// under chain/ it reads and writes each shard's chain head
	// (package archive: it links each object to the record before it, so
	// a rebuild sees a hole). ListBucket only so that reading a shard's
	// first head answers "no such key" (404) rather than access denied
	// (403), which S3 answers a reader without it.
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:PutObject"),
		Resources: &[]*string{bucket.ArnForObjects(jsii.String(archivePrefix + "*"))},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:GetObject", "s3:PutObject"),
		Resources: &[]*string{bucket.ArnForObjects(jsii.String(chainPrefix + "*"))},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:ListBucket"),
		Resources: &[]*string{bucket.BucketArn()},
	}))
	cdknag.NagSuppressions_AddResourceSuppressions(fn.Role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("The archiver names each object by stream, arrival hour, shard and sequence numbers " +
			"(archive/<stream>/dt=…/hh=…/<shard>-<first>-<last>[.after-<hour>-<seq>].jsonl.gz) and each shard's chain head " +
			"chain/<stream>/<shard>.json, so it may put any object under archive/, and read and put any under chain/, and nothing else."),
		AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]+\.Arn>\/(archive|chain)\/\*$/`)}},
	}}, jsii.Bool(true))

	stack := awscdk.Stack_Of(c)
	output(stack, "ArchiveBucketName", bucket.BucketName(), "S3 bucket the events stream is archived to (replay rebuild -archive-bucket)")
	return &Archive{Bucket: bucket, Function: fn}, nil
}

// contextDays is v if set, else the context value key as a whole number of
// days (0 to 36500), else def.
func contextDays(node constructs.Node, key string, v, def time.Duration) (time.Duration, error) {
	if v != 0 {
		return v, nil
	}
	n, set, err := contextNumber(node, key, "a number of days")
	if err != nil || !set {
		return def, err
	}
	if n != float64(int(n)) || n < 0 || n > 36500 {
		return 0, fmt.Errorf("context %s: %v is not a whole number of days between 0 and 36500", key, n)
	}
	return time.Duration(n) * 24 * time.Hour, nil
}
