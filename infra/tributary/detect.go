package tributary

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/cep"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// The CEP functions: detect runs the rules over the events stream, rules
// manages them behind a function URL.
const (
	FunctionDetect = "detect"
	FunctionRules  = "rules"
)

// Environment variables of the CEP functions.
const (
	EnvCEPConfig         = "CEP_CONFIG"
	EnvCEPStateTableName = "CEP_STATE_TABLE_NAME"
	EnvRulesTableName    = "RULES_TABLE_NAME"
	EnvMatchesStreamName = "MATCHES_STREAM_NAME"
)

// CEPConfig is a CEP file of the pipelines directory (kind "cep"): its
// name, and the file, which the detect function receives whole
// (CEP_CONFIG, compacted).
type CEPConfig struct {
	Name string
	// Path is the file the detection is declared in.
	Path string
	raw  []byte
}

// CEPFromFile reads a CEP file as the detect function will
// (cep.ParseConfig), so a config it would refuse at init stops synth
// instead, naming the file and the field.
func CEPFromFile(f pipeline.File) (CEPConfig, error) {
	if f.Kind != pipeline.KindCEP {
		return CEPConfig{}, fmt.Errorf("%s: kind %q, not a CEP file", f.Path, f.Kind)
	}
	c, err := cep.ParseConfig(f.JSON)
	if err != nil {
		return CEPConfig{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return CEPConfig{Name: c.Name, Path: f.Path, raw: f.JSON}, nil
}

// The calls package cep makes on the rules table: detect reads its version
// item (every 5 s per warm instance) and scans it when that moved; the
// rules function reads, scans and writes it (each change a transaction of
// the rule's put and the version's update, authorized by those actions).
var (
	detectRulesActions = []string{"dynamodb:GetItem", "dynamodb:Scan"}
	adminRulesActions  = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Scan"}
)

// DetectionProps configures NewDetection.
type DetectionProps struct {
	// Config is the detection (CEPFromFile). Required.
	Config       *CEPConfig
	AssetDir     string
	Events       awskinesis.IStream
	Quarantine   awsdynamodb.ITable
	OnFailure    awssqs.IQueue
	TickFailures awssqs.IQueue
}

// Detection is complex event processing with rules added at runtime: the
// Rules table, the detect function reading every event through its own
// enhanced fan-out consumer with its partial matches in State and its
// matches on Matches (its tick reads the events stream too,
// grantBacklogRead), and the rules function behind an IAM-authenticated
// URL (RulesURL) that manages the table. It is declared in a CEP file; its
// functions carry the file's name as their PipelineMetadataKey, so they get
// alarms of their own, and the stack gives it a dashboard
// (NewOperatorDashboard).
type Detection struct {
	Config   CEPConfig
	Rules    awsdynamodb.Table
	State    awsdynamodb.Table
	Matches  awskinesis.Stream
	Detect   *StreamFunction
	Admin    *GoFunction
	RulesURL awslambda.FunctionUrl
	Schedule awsevents.Rule
}

// NewDetection creates the CEP resources under scope.
func NewDetection(scope constructs.Construct, id string, props DetectionProps) (*Detection, error) {
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.TickFailures == nil || props.AssetDir == "" || props.Config == nil {
		return nil, fmt.Errorf("Detection %q: AssetDir, Events, Quarantine, OnFailure, TickFailures and Config are required", id)
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &Detection{Config: *props.Config}
	d.Rules = awsdynamodb.NewTable(c, jsii.String("Rules"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		// Deleted rules are tombstones until their expiresAt.
		TimeToLiveAttribute: jsii.String("expiresAt"),
	})
	d.State = newKeyedStateTable(c, "State")
	d.Matches = awskinesis.NewStream(c, jsii.String("Matches"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(1),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})
	// Derived, like the joins stream: cmd/rules backfill puts a rule's
	// matches on it again from the events stream.
	d.Matches.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
	d.Detect = NewStreamFunction(c, "Detect", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionDetect,
			AssetDir:    props.AssetDir,
			Description: "Runs the CEP rules of the rules table over every event, per key; matches to the matches stream",
			Environment: map[string]*string{
				EnvCEPConfig:         jsii.String(string(props.Config.raw)),
				EnvCEPStateTableName: d.State.TableName(),
				EnvRulesTableName:    d.Rules.TableName(),
				EnvMatchesStreamName: d.Matches.StreamName(),
			},
		},
		Stream:    props.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
		BatchSize: 500,
		// Every event: its own read throughput, so the rules add no load
		// on the stream's shared reads.
		EnhancedFanOut: true,
	})
	grantKeyedState(d.Detect.GoFunction, d.State)
	grantBacklogRead(d.Detect.GoFunction, props.Events)
	d.Matches.Grant(d.Detect.Role, jsii.String("kinesis:PutRecords"))
	d.Detect.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(detectRulesActions...),
		Resources: &[]*string{d.Rules.TableArn()},
	}))
	d.Schedule = addTick(c, "Tick", d.Detect.GoFunction, props.TickFailures, "Ticks detect: idle shards' watermarks advance, absences fire")

	d.Admin = NewGoFunction(c, "RulesAdmin", GoFunctionProps{
		Name:        FunctionRules,
		AssetDir:    props.AssetDir,
		Description: "Adds, lists, disables, enables, deletes and tests CEP rules (IAM-authenticated function URL)",
		Environment: map[string]*string{EnvRulesTableName: d.Rules.TableName()},
	})
	d.Admin.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(adminRulesActions...),
		Resources: &[]*string{d.Rules.TableArn()},
	}))
	for _, fn := range []*GoFunction{d.Detect.GoFunction, d.Admin} {
		fn.Function.Node().DefaultChild().(awslambda.CfnFunction).AddMetadata(jsii.String(PipelineMetadataKey), jsii.String(props.Config.Name))
	}
	// Callers sign with SigV4 and need lambda:InvokeFunctionUrl on it.
	d.RulesURL = d.Admin.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	return d, nil
}
