package tributary

import (
	"bytes"
	_ "embed"
	"encoding/json"
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

	"github.com/tributary-dev/tributary/pkg/strictjson"
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

// cepJSON is the detect function's config (its watermark and dedupe
// horizon); pkg/cep/infra_config_test.go parses it with cep.ParseConfig.
//
//go:embed cep.json
var cepJSON []byte

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
	AssetDir     string
	Events       awskinesis.IStream
	Quarantine   awsdynamodb.ITable
	OnFailure    awssqs.IQueue
	TickFailures awssqs.IQueue
}

// Detection is complex event processing with rules added at runtime: the
// Rules table, the detect function reading every event through its own
// enhanced fan-out consumer with its partial matches in State and its
// matches on Matches, and the rules function behind an IAM-authenticated
// URL (RulesURL) that manages the table.
type Detection struct {
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
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.TickFailures == nil || props.AssetDir == "" {
		return nil, fmt.Errorf("Detection %q: AssetDir, Events, Quarantine, OnFailure and TickFailures are required", id)
	}
	// Read as the detect function reads it (package strictjson), so a key
	// twice or text that is not UTF-8 stops synth naming the field.
	if err := strictjson.Check(cepJSON, strictjson.Options{Name: "config"}); err != nil {
		return nil, fmt.Errorf("cep.json: %w", err)
	}
	var cfg bytes.Buffer
	if err := json.Compact(&cfg, cepJSON); err != nil {
		return nil, fmt.Errorf("cep.json: %w", err)
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &Detection{}
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
				EnvCEPConfig:         jsii.String(cfg.String()),
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
	// Callers sign with SigV4 and need lambda:InvokeFunctionUrl on it.
	d.RulesURL = d.Admin.Function.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	return d, nil
}
