package tributary

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The event-sourcing functions (functions/<name>).
const (
	FunctionCommands = "commands"
	FunctionPublish  = "publish"
	FunctionProject  = "project"
)

// Environment variables of the event-sourcing functions (package es reads
// them; the views parameter is VIEWS_PARAMETER_NAME, as package aggregate
// follows it).
const (
	EnvESEventsTable    = "ES_EVENTS_TABLE"
	EnvESSnapshotsTable = "ES_SNAPSHOTS_TABLE"
	EnvESCommandsTable  = "ES_COMMANDS_TABLE"
	EnvESSnapshotEvery  = "ES_SNAPSHOT_EVERY"
	EnvESStreamName     = "ES_STREAM_NAME"
)

// The event store's schema, as package es declares it (es.CreateTables)
// and the views table's, as package seats does (seats.CreateViewsTable).
const (
	esSubjectIndex   = "subject"
	esViewsDayIndex  = "byDay"
	esSnapshotEvery  = 25
	esCommandTimeout = 10 * time.Second
)

// The DynamoDB calls each function makes, per table (the packages' client
// interfaces). A TransactWriteItems is authorized by the calls of its items
// (its Puts: dynamodb:PutItem). Keep them in step with the packages: a
// missing action works locally, where permissions are not enforced, and
// fails in AWS. No function may update or delete an event: the only path
// that does (es.Erase, cmd/eventstore erase) runs with an operator's own
// credentials.
var (
	// commands: es.Store (Load, Events, Version: Query; the append's event
	// Puts), snapshots (GetItem; the append's Put), command records
	// (Record: GetItem; PutRecord and the append's Put), the views (the
	// seat map's Put in the append; the API's reads).
	esCommandsEventsActions    = []string{"dynamodb:PutItem", "dynamodb:Query"}
	esCommandsSnapshotsActions = []string{"dynamodb:GetItem", "dynamodb:PutItem"}
	esCommandsRecordsActions   = []string{"dynamodb:GetItem", "dynamodb:PutItem"}
	esCommandsViewsActions     = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}
	esViewsIndexActions        = []string{"dynamodb:Query"}
	// project: the folds' UpdateItem and the entities' PutItem on the
	// views; the gap fills' Query of the events table.
	esProjectViewsActions  = []string{"dynamodb:PutItem", "dynamodb:UpdateItem"}
	esProjectEventsActions = []string{"dynamodb:Query"}
)

// EventSourcingProps configures NewEventSourcing.
type EventSourcingProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Quarantine is where publish and project set aside records that can
	// never succeed. Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives the on-failure records of the two stream
	// mappings. Required.
	OnFailure awssqs.IQueue
}

// EventSourcing is the event-sourced seat reservations (packages es,
// seats, projection): the event store, its publication on Kinesis through
// the table's own stream, and the views derived from it.
//
//	commands (Function URL, AWS_IAM) ─TransactWriteItems─► Events (+ command record, seat map, snapshot)
//	Events ─DynamoDB stream─► publish ─► Kinesis ShowEvents (key = show id) ─► project ─► views (availability, bookings)
type EventSourcing struct {
	// Events: partition key aggregateId, sort key version (N); stream
	// NEW_AND_OLD_IMAGES; the sparse index "subject" for erasures.
	Events awsdynamodb.Table
	// Snapshots: partition key aggregateId.
	Snapshots awsdynamodb.Table
	// Commands: the command records (partition key id), TTL expiresAt.
	Commands awsdynamodb.Table
	// Views: pk, sk; index byDay (day, at). Its current version is named by
	// ViewsParameter (cmd/eventstore rebuild swaps it).
	Views          awsdynamodb.Table
	ViewsParameter awsssm.StringParameter
	// Stream is where publish puts the events, keyed by aggregate.
	Stream awskinesis.Stream

	CommandsFn  *GoFunction
	CommandsURL awslambda.FunctionUrl
	Publish     *StreamFunction
	Project     *StreamFunction
}

// NewEventSourcing creates the event store, the publication, the views and
// the three functions under scope, each granted exactly the calls it makes.
func NewEventSourcing(scope constructs.Construct, id string, props EventSourcingProps) *EventSourcing {
	if props.AssetDir == "" || props.Quarantine == nil || props.OnFailure == nil {
		panic(fmt.Sprintf("EventSourcing %q: AssetDir, Quarantine and OnFailure are required", id))
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	e := &EventSourcing{}
	table := func(name string, pk, sk *awsdynamodb.Attribute) *awsdynamodb.TableProps {
		return &awsdynamodb.TableProps{
			PartitionKey: pk,
			SortKey:      sk,
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			// The log is the data of record (and ProtectState retains every
			// table anyway).
			RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
		}
	}
	str := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
	}
	ep := table("Events", str("aggregateId"), &awsdynamodb.Attribute{Name: jsii.String("version"), Type: awsdynamodb.AttributeType_NUMBER})
	ep.Stream = awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES
	e.Events = awsdynamodb.NewTable(c, jsii.String("Events"), ep)
	// Sparse: only events with personal data carry a subject.
	e.Events.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(esSubjectIndex),
		PartitionKey:   str("subject"),
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	e.Snapshots = awsdynamodb.NewTable(c, jsii.String("Snapshots"), table("Snapshots", str("aggregateId"), nil))
	cp := table("Commands", str("id"), nil)
	cp.TimeToLiveAttribute = jsii.String("expiresAt")
	e.Commands = awsdynamodb.NewTable(c, jsii.String("CommandRecords"), cp)
	e.Views = awsdynamodb.NewTable(c, jsii.String("Views"), table("Views", str("pk"), str("sk")))
	e.Views.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(esViewsDayIndex),
		PartitionKey:   str("day"),
		SortKey:        str("at"),
		ProjectionType: awsdynamodb.ProjectionType_ALL,
	})
	e.ViewsParameter = awsssm.NewStringParameter(c, jsii.String("CurrentViews"), &awsssm.StringParameterProps{
		Description: jsii.String("The views table of the event-sourced shows; cmd/eventstore rebuild swaps it to a rebuilt version"),
		StringValue: e.Views.TableName(),
		Tier:        awsssm.ParameterTier_STANDARD,
	})
	e.Stream = awskinesis.NewStream(c, jsii.String("ShowEvents"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(1),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})

	viewsEnv := map[string]*string{
		EnvViewsParameterName: e.ViewsParameter.ParameterName(),
		EnvViewsRefresh:       jsii.String(strconv.Itoa(ViewsRefreshSeconds)),
	}
	e.CommandsFn = NewGoFunction(c, "Commands", GoFunctionProps{
		Name:        FunctionCommands,
		AssetDir:    props.AssetDir,
		Description: "Seat reservations: commands validated against the event store and appended with optimistic concurrency; the views",
		Environment: merge(viewsEnv, map[string]*string{
			EnvESEventsTable:    e.Events.TableName(),
			EnvESSnapshotsTable: e.Snapshots.TableName(),
			EnvESCommandsTable:  e.Commands.TableName(),
			EnvESSnapshotEvery:  jsii.String(strconv.Itoa(esSnapshotEvery)),
		}),
		Timeout: esCommandTimeout,
	})
	// AWS_IAM: callers sign with SigV4 and need lambda:InvokeFunctionUrl.
	e.CommandsURL = e.CommandsFn.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})

	// StreamFunction defaults: ReportBatchItemFailures, bisect on error,
	// bounded retries and record age, TRIM_HORIZON (no event is skipped).
	e.Publish = NewStreamFunction(c, "Publish", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionPublish,
			AssetDir:    props.AssetDir,
			Description: "Publishes each new event of the event store (its table's stream) on the ShowEvents stream, keyed by aggregate",
			Environment: map[string]*string{EnvESStreamName: e.Stream.StreamName()},
		},
		Table:     e.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
	})
	e.Stream.Grant(e.Publish.Role, jsii.String("kinesis:PutRecords"))

	e.Project = NewStreamFunction(c, "Project", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionProject,
			AssetDir:    props.AssetDir,
			Description: "Projects the published events into the availability and bookings views, fenced by version",
			Environment: merge(viewsEnv, map[string]*string{EnvESEventsTable: e.Events.TableName()}),
		},
		Stream:    e.Stream,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
	})

	allow := func(fn *GoFunction, actions []string, resources ...*string) {
		fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(actions...), Resources: &resources,
		}))
	}
	versions := awscdk.Fn_Join(jsii.String(""), &[]*string{e.Views.TableArn(), jsii.String("-v*")})
	index := func(table *string) *string {
		return awscdk.Fn_Join(jsii.String(""), &[]*string{table, jsii.String("/index/" + esViewsDayIndex)})
	}
	allow(e.CommandsFn, esCommandsEventsActions, e.Events.TableArn())
	allow(e.CommandsFn, esCommandsSnapshotsActions, e.Snapshots.TableArn())
	allow(e.CommandsFn, esCommandsRecordsActions, e.Commands.TableArn())
	allow(e.CommandsFn, esCommandsViewsActions, e.Views.TableArn(), versions)
	allow(e.CommandsFn, esViewsIndexActions, index(e.Views.TableArn()), index(versions))
	allow(e.Project.GoFunction, esProjectViewsActions, e.Views.TableArn(), versions)
	allow(e.Project.GoFunction, esProjectEventsActions, e.Events.TableArn())
	for _, fn := range []*GoFunction{e.CommandsFn, e.Project.GoFunction} {
		allow(fn, []string{"ssm:GetParameter"}, e.ViewsParameter.ParameterArn())
		cdknag.NagSuppressions_AddResourceSuppressions(fn.Role, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String("The views table's rebuilt versions (<views>-v2, -v3, ...) are created by cmd/eventstore rebuild after deploy, " +
				"so their names are known only by this prefix; the wildcard covers those tables and their byDay index only."),
			AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]+\.Arn>-v\*(\/index\/` + esViewsDayIndex + `)?$/`)}},
		}}, jsii.Bool(true))
	}
	// The DynamoDB event source grants dynamodb:ListStreams on "*": the
	// action lists the account's streams and has no resource-level scope.
	cdknag.NagSuppressions_AddResourceSuppressions(e.Publish.Role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("dynamodb:ListStreams, granted by the DynamoDB Streams event source, does not support " +
			"resource-level permissions; Resource * is the only valid resource."),
		AppliesTo: &[]any{"Resource::*"},
	}}, jsii.Bool(true))

	stack := awscdk.Stack_Of(c)
	output(stack, "CommandsUrl", e.CommandsURL.Url(), "commands Function URL (AWS_IAM): POST /commands; GET /shows/{id}, /shows/{id}/availability, /days/{day}/availability, /customers/{id}/bookings")
	output(stack, "EsEventsTableName", e.Events.TableName(), "DynamoDB event store (aggregateId, version): the log of the seat reservations")
	output(stack, "EsStreamName", e.Stream.StreamName(), "Kinesis stream the events are published on, keyed by aggregate")
	output(stack, "EsViewsParameterName", e.ViewsParameter.ParameterName(), "SSM parameter naming the current views table of the shows (cmd/eventstore rebuild swaps it)")
	return e
}

// merge returns the union of maps (later ones win).
func merge(ms ...map[string]*string) map[string]*string {
	out := map[string]*string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
