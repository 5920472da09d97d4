package tributary

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/tributary-dev/tributary/pkg/strictjson"
)

// FunctionJoin is the stream–stream join function (functions/join).
const FunctionJoin = "join"

// Environment variables of the join function, read by functions/join.
const (
	EnvJoinConfig         = "JOIN_CONFIG"
	EnvJoinStateTableName = "JOIN_STATE_TABLE_NAME"
	EnvJoinsStreamName    = "JOINS_STREAM_NAME"
)

// joinJSON is the join the join function runs. The root module's tests
// parse it with join.Parse (pkg/join/infra_config_test.go), so a config the
// function would refuse at init fails make test rather than a deploy.
//
//go:embed join.json
var joinJSON []byte

// JoinConfig is the part of the declared join the stack reads: its name and
// the two event types, which the mapping's filter lets through.
type JoinConfig struct {
	Name  string `json:"name"`
	Left  string `json:"left"`
	Right string `json:"right"`
	raw   []byte
}

// DefaultJoin is the join declared in join.json: searches and clicks of one
// session within 30 s, left join, click-through rate per minute.
func DefaultJoin() (JoinConfig, error) { return ParseJoin(joinJSON) }

// ParseJoin reads a join document's name and types; the document goes to
// the function whole (JOIN_CONFIG), compacted. It is read as the function
// reads it (package strictjson): text that is not UTF-8, a key twice or
// nesting past the bound stops synth naming the field, rather than the
// stack and the function each taking another copy of a key. The function's
// own checks (join.Parse: unknown fields, durations) run on join.json in
// the root module's tests (pkg/join/infra_config_test.go).
func ParseJoin(doc []byte) (JoinConfig, error) {
	var c JoinConfig
	if err := strictjson.Check(doc, strictjson.Options{Name: "config"}); err != nil {
		return c, fmt.Errorf("join config: %w", err)
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		return c, fmt.Errorf("join config: %w", err)
	}
	if c.Name == "" || c.Left == "" || c.Right == "" {
		return c, fmt.Errorf("join config: name, left and right are required")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return c, fmt.Errorf("join config: %w", err)
	}
	c.raw = b.Bytes()
	return c, nil
}

// keyedStateActions are the DynamoDB calls package keyed makes on a state
// table (package state's keyed items, watermarks and open index, and the
// dedupe ledger's reads, conditional puts and sealing transactions). Keep
// them in step with the packages: a missing action works locally, where
// permissions are not enforced, and fails in AWS.
var (
	keyedStateActions = []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:PutItem"}
	keyedIndexActions = []string{"dynamodb:Query"}
)

// TickRate is how often the join and detect functions are ticked: idle
// shards' watermarks advance, windows and absences close.
const TickRate = time.Minute

// StreamJoinProps configures NewStreamJoin.
type StreamJoinProps struct {
	// AssetDir holds the functions' bootstrap binaries. Required.
	AssetDir string
	// Events is the stream both sides are on. Required.
	Events awskinesis.IStream
	// Quarantine is where records that can never be joined are set aside.
	// Required.
	Quarantine awsdynamodb.ITable
	// OnFailure receives Lambda's on-failure record of a batch that
	// exhausted its retries. Required.
	OnFailure awssqs.IQueue
	// TickFailures receives the ticks EventBridge could not deliver.
	// Required.
	TickFailures awssqs.IQueue
	// Config is the join; DefaultJoin if nil.
	Config *JoinConfig
}

// StreamJoin is the stream–stream join of the topology: the join function
// reads the two event types of the events stream (a mapping filter passes
// only those), keeps both sides' buffered records in State, and writes
// joined, unmatched and rate records to Joins; a schedule ticks it.
type StreamJoin struct {
	Joins    awskinesis.Stream
	State    awsdynamodb.Table
	Function *StreamFunction
	Schedule awsevents.Rule
	Config   JoinConfig
}

// newKeyedStateTable is a table of package state's schema (keys pk/sk, the
// sparse index of keys with something due, TTL expiresAt).
func newKeyedStateTable(scope constructs.Construct, id string) awsdynamodb.Table {
	return NewViewsTable(scope, id)
}

// grantKeyedState lets fn do what package keyed does on table.
func grantKeyedState(fn *GoFunction, table awsdynamodb.Table) {
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(keyedStateActions...),
		Resources: &[]*string{table.TableArn()},
	}))
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(keyedIndexActions...),
		Resources: &[]*string{awscdk.Fn_Join(jsii.String(""), &[]*string{table.TableArn(), jsii.String("/index/" + ViewsOpenIndex)})},
	}))
}

// addTick schedules fn's tick: the function tells the scheduled event from
// a Kinesis batch. A tick EventBridge cannot deliver (after 2 retries
// within the next tick) goes to failures.
func addTick(scope constructs.Construct, id string, fn *GoFunction, failures awssqs.IQueue, what string) awsevents.Rule {
	return awsevents.NewRule(scope, jsii.String(id), &awsevents.RuleProps{
		Description: jsii.String(what),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(TickRate.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn.Function, &awseventstargets.LambdaFunctionProps{
			MaxEventAge:     seconds(TickRate),
			RetryAttempts:   jsii.Number(2),
			DeadLetterQueue: failures,
		})},
	})
}

// NewStreamJoin creates the join's stream, table, function and schedule.
func NewStreamJoin(scope constructs.Construct, id string, props StreamJoinProps) (*StreamJoin, error) {
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.TickFailures == nil || props.AssetDir == "" {
		return nil, fmt.Errorf("StreamJoin %q: AssetDir, Events, Quarantine, OnFailure and TickFailures are required", id)
	}
	cfg := props.Config
	if cfg == nil {
		c, err := DefaultJoin()
		if err != nil {
			return nil, err
		}
		cfg = &c
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	j := &StreamJoin{Config: *cfg}
	j.Joins = awskinesis.NewStream(c, jsii.String("Joins"), &awskinesis.StreamProps{
		StreamMode: awskinesis.StreamMode_PROVISIONED,
		ShardCount: jsii.Number(1),
		Encryption: awskinesis.StreamEncryption_MANAGED,
	})
	// Derived: replaying the events stream rebuilds it (the ids are stable).
	j.Joins.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY)
	j.State = newKeyedStateTable(c, "State")
	j.Function = NewStreamFunction(c, "Join", StreamFunctionProps{
		Function: GoFunctionProps{
			Name:        FunctionJoin,
			AssetDir:    props.AssetDir,
			Description: fmt.Sprintf("Joins %s and %s events of one key within the declared bound (join %s)", cfg.Left, cfg.Right, cfg.Name),
			Environment: map[string]*string{
				EnvJoinConfig:         jsii.String(string(cfg.raw)),
				EnvJoinStateTableName: j.State.TableName(),
				EnvJoinsStreamName:    j.Joins.StreamName(),
			},
		},
		Stream:    props.Events,
		OnFailure: props.OnFailure,
		SetAside:  props.Quarantine,
		BatchSize: 100,
		// Only the two sides reach the function: the others would be
		// ignored by it anyway (and move no watermark).
		Filters: []map[string]any{{"data": map[string]any{"type": []any{cfg.Left, cfg.Right}}}},
	})
	grantKeyedState(j.Function.GoFunction, j.State)
	j.Joins.Grant(j.Function.Role, jsii.String("kinesis:PutRecords"))
	j.Schedule = addTick(c, "Tick", j.Function.GoFunction, props.TickFailures, "Ticks the join: idle shards' watermarks advance, unmatched records are emitted")
	return j, nil
}

// addJoinsAndDetection adds the stream–stream join and CEP to the stack,
// with their outputs.
func (s *TributaryStack) addJoinsAndDetection(assetDir string) error {
	var err error
	props := StreamJoinProps{AssetDir: assetDir, Events: s.Events, OnFailure: s.Quarantine.Failures, Quarantine: s.Quarantine.Table, TickFailures: s.TickerFailures}
	if s.Joins, err = NewStreamJoin(s.Stack, "SearchClickJoin", props); err != nil {
		return err
	}
	if s.Detection, err = NewDetection(s.Stack, "Detection", DetectionProps{AssetDir: assetDir, Events: s.Events,
		OnFailure: s.Quarantine.Failures, Quarantine: s.Quarantine.Table, TickFailures: s.TickerFailures}); err != nil {
		return err
	}
	output(s.Stack, "JoinsStreamName", s.Joins.Joins.StreamName(), "Kinesis stream of joined, unmatched and click-through-rate records")
	output(s.Stack, "JoinStateTableName", s.Joins.State.TableName(), "DynamoDB table of the join's buffered records and watermarks")
	output(s.Stack, "RulesTableName", s.Detection.Rules.TableName(), "DynamoDB table of the CEP rules (go run ./cmd/rules -table ...)")
	output(s.Stack, "MatchesStreamName", s.Detection.Matches.StreamName(), "Kinesis stream of CEP matches")
	output(s.Stack, "CepStateTableName", s.Detection.State.TableName(), "DynamoDB table of CEP partial matches and watermarks")
	output(s.Stack, "RulesUrl", s.Detection.RulesURL.Url(), "rules function URL (AWS_IAM): GET/POST /rules, POST /rules/<id>/disable|enable, DELETE /rules/<id>, POST /test")
	return nil
}
