package tributary

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// FunctionTimeline is the table–table join function (functions/timeline).
const FunctionTimeline = "timeline"

// Environment variables of the timeline function, read by functions/timeline.
const (
	EnvTweetsTableName     = "TWEETS_TABLE_NAME"
	EnvFollowsTableName    = "FOLLOWS_TABLE_NAME"
	EnvFollowersIndexName  = "FOLLOWERS_INDEX_NAME"
	EnvTimelinesTableName  = "TIMELINES_TABLE_NAME"
	EnvFanOutTableName     = "TIMELINE_FANOUT_TABLE_NAME"
	timelineFollowersIndex = "followers"
)

// The DynamoDB calls package timeline makes (its store interface), per
// table. Keep them in step with the package: a missing action works
// locally, where permissions are not enforced, and fails in AWS.
var (
	timelineTweetsActions    = []string{"dynamodb:GetItem", "dynamodb:Query"}
	timelineFollowsActions   = []string{"dynamodb:GetItem"}
	timelineFollowersActions = []string{"dynamodb:Query"}
	timelineViewActions      = []string{"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"}
	timelineFanOutActions    = []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}
)

// TimelinesProps configures NewTimelines.
type TimelinesProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Quarantine is the table the function sets aside the records that can
	// never succeed in (package setaside). Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record for a batch of either
	// table's changes that exhausted its retries or aged out. Required.
	OnFailure awssqs.IQueue
	// RemovalPolicy of the four tables; RETAIN if empty (tweets and
	// follows are data of record, and the view outlives the streams'
	// 24-hour retention it was built from).
	RemovalPolicy awscdk.RemovalPolicy
}

// Timelines is the table–table join of the topology: the Tweets and
// Follows tables, whose streams (NEW_AND_OLD_IMAGES) both feed the timeline
// function, which maintains the Timelines view (package timeline).
type Timelines struct {
	// Tweets: partition key authorId, sort key tweetId.
	Tweets awsdynamodb.Table
	// Follows: partition key followerId, sort key followeeId, with the
	// index FollowersIndex (followeeId, followerId) listing a user's followers.
	Follows awsdynamodb.Table
	// FollowersIndex is the name of the followers index of Follows.
	FollowersIndex string
	// View is the Timelines table: partition key userId, sort key
	// "<createdAt>#<len(authorId)>#<authorId>#<tweetId>" (timeline.SortKey).
	View awsdynamodb.Table
	// FanOut keeps the progress of tweet and follow records (partition key
	// tweet, sort key sequenceNumber, TTL expiresAt), so a redelivery of a
	// tweet with many followers, or of a follow over a long timeline,
	// resumes where the last delivery stopped.
	FanOut awsdynamodb.Table
	// Function is the timeline function; its StreamFunction mapping reads
	// Tweets' stream and FollowsSource reads Follows' stream.
	Function *StreamFunction
	// FollowsSource is the event source of Follows' stream.
	FollowsSource awslambdaeventsources.DynamoEventSource
}

// NewTimelines creates the tables and the timeline function under scope.
func NewTimelines(scope constructs.Construct, id string, props TimelinesProps) *Timelines {
	if props.OnFailure == nil || props.Quarantine == nil || props.AssetDir == "" {
		panic(fmt.Sprintf("Timelines %q: AssetDir, Quarantine and OnFailure are required", id))
	}
	removal := props.RemovalPolicy
	if removal == "" {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	table := func(name, pk, sk string, stream bool, ttl string) awsdynamodb.Table {
		p := &awsdynamodb.TableProps{
			PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(pk), Type: awsdynamodb.AttributeType_STRING},
			SortKey:      &awsdynamodb.Attribute{Name: jsii.String(sk), Type: awsdynamodb.AttributeType_STRING},
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			RemovalPolicy: removal,
		}
		if stream {
			p.Stream = awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES
		}
		if ttl != "" {
			p.TimeToLiveAttribute = jsii.String(ttl)
		}
		return awsdynamodb.NewTable(c, jsii.String(name), p)
	}
	t := &Timelines{FollowersIndex: timelineFollowersIndex}
	t.Tweets = table("Tweets", "authorId", "tweetId", true, "")
	t.Follows = table("Follows", "followerId", "followeeId", true, "")
	t.Follows.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(timelineFollowersIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("followeeId"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("followerId"), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	t.View = table("Timelines", "userId", "sk", false, "")
	t.FanOut = table("TimelineFanOut", "tweet", "sequenceNumber", false, "expiresAt")

	// StreamFunction defaults: ReportBatchItemFailures, bisect on error,
	// bounded retries and record age, TRIM_HORIZON (no change is skipped).
	sp := StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionTimeline,
			AssetDir:    props.AssetDir,
			Description: "Maintains the timelines view (tweets joined with follows) from both tables' streams",
			Environment: map[string]*string{
				EnvTweetsTableName:    t.Tweets.TableName(),
				EnvFollowsTableName:   t.Follows.TableName(),
				EnvFollowersIndexName: jsii.String(timelineFollowersIndex),
				EnvTimelinesTableName: t.View.TableName(),
				EnvFanOutTableName:    t.FanOut.TableName(),
			},
		},
		Table:     t.Tweets,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
	}
	t.Function = NewStreamFunction(c, "Timeline", sp)
	// The second mapping, on Follows' stream, with the same settings as
	// StreamFunction gives the first.
	t.FollowsSource = awslambdaeventsources.NewDynamoEventSource(t.Follows, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        sp.startingPosition(),
		BatchSize:               jsii.Number(float64(sp.batchSize())),
		ReportBatchItemFailures: jsii.Bool(true),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(float64(sp.retryAttempts())),
		MaxRecordAge:            seconds(sp.maxRecordAge()),
		OnFailure:               awslambdaeventsources.NewSqsDlq(props.OnFailure),
	})
	t.Function.Function.AddEventSource(t.FollowsSource)

	allow := func(actions []string, resources ...*string) {
		t.Function.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(actions...),
			Resources: &resources,
		}))
	}
	allow(timelineTweetsActions, t.Tweets.TableArn())
	allow(timelineFollowsActions, t.Follows.TableArn())
	allow(timelineFollowersActions, jsii.String(*t.Follows.TableArn()+"/index/"+timelineFollowersIndex))
	allow(timelineViewActions, t.View.TableArn())
	allow(timelineFanOutActions, t.FanOut.TableArn())

	// The DynamoDB event sources grant dynamodb:ListStreams on "*": the
	// action lists the account's streams and has no resource-level scope.
	cdknag.NagSuppressions_AddResourceSuppressions(t.Function.Role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("dynamodb:ListStreams, granted by the DynamoDB Streams event sources, does not support " +
			"resource-level permissions; Resource * is the only valid resource."),
		AppliesTo: &[]any{"Resource::*"},
	}}, jsii.Bool(true))
	return t
}
