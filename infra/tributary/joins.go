package tributary

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	joinpkg "github.com/tributary-dev/tributary/pkg/join"
	"github.com/tributary-dev/tributary/pkg/pipeline"
)

// FunctionJoin is the stream–stream join function (functions/join).
const FunctionJoin = "join"

// Environment variables of the join function, read by functions/join.
const (
	EnvJoinConfig         = "JOIN_CONFIG"
	EnvJoinStateTableName = "JOIN_STATE_TABLE_NAME"
	EnvJoinsStreamName    = "JOINS_STREAM_NAME"
)

// JoinConfig is a join file of the pipelines directory (kind "join") as
// the stack reads it: its name and the two event types (its dashboard names
// them), and the file, which the function receives whole
// (JOIN_CONFIG, compacted).
type JoinConfig struct {
	Name  string
	Left  string
	Right string
	// Path is the file the join is declared in.
	Path string
	raw  []byte
}

// JoinFromFile reads a join file (pipeline.LoadDir or pipeline.NewFile) as
// the join function will (join.Parse), so a join it would refuse at init
// stops synth instead, naming the file and the field, for example
//
//	pipelines/orders-payments.json: right: "order" is the left type too: ...
func JoinFromFile(f pipeline.File) (JoinConfig, error) {
	if f.Kind != pipeline.KindJoin {
		return JoinConfig{}, fmt.Errorf("%s: kind %q, not a join file", f.Path, f.Kind)
	}
	c, err := joinpkg.Parse(f.JSON)
	if err != nil {
		return JoinConfig{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return JoinConfig{Name: c.Name, Left: c.Left, Right: c.Right, Path: f.Path, raw: f.JSON}, nil
}

// keyedStateActions are the DynamoDB calls package keyed makes on a state
// table (package state's keyed items, watermarks and open index, and the
// dedupe ledger's reads, conditional puts and sealing puts). Keep
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
	// TickFailures receives the ticks EventBridge could not deliver and
	// those that failed in the function after their retries.
	// Required.
	TickFailures awssqs.IQueue
	// Config is the join (JoinFromFile). Required.
	Config *JoinConfig
}

// StreamJoin is one stream–stream join, declared in a join file: the join
// function reads the two event types of the events stream (handed every
// record, so that its tick sees the shard's progress, it ignores the
// others), keeps both sides' buffered records in State, and
// writes joined, unmatched and rate records to Joins; a schedule ticks it
// (the tick reads the events stream too, grantBacklogRead). The function carries the file's name as its PipelineMetadataKey, so it
// gets alarms of its own, and the stack gives it a dashboard
// (NewOperatorDashboard).
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

// grantBacklogRead gives fn, a keyed operator's function, the stream it
// reads for its tick (package keyed's WithBacklog): before it advances an
// idle-looking shard by the clock, the tick reads the stream after the
// last record the function committed, so a shard whose records wait for a
// failing or throttled function is not taken for idle. fn gets the
// stream's name as EVENTS_STREAM_NAME and exactly GetShardIterator and
// GetRecords on it (and decrypt with its key, if it has one of its own):
// the mapping's grants serve the batches, and an enhanced fan-out
// consumer's are for SubscribeToShard.
func grantBacklogRead(fn *GoFunction, stream awskinesis.IStream) {
	fn.Function.AddEnvironment(jsii.String(EnvEventsStreamName), stream.StreamName(), nil)
	stream.Grant(fn.Role, jsii.String("kinesis:GetShardIterator"), jsii.String("kinesis:GetRecords"))
	if key := stream.EncryptionKey(); key != nil {
		key.GrantDecrypt(fn.Role)
	}
}

// addTick schedules fn's tick: the function tells the scheduled event from
// a Kinesis batch. A tick EventBridge cannot deliver (after 2 retries
// within the next tick) goes to failures, and so does a tick that failed
// in the function after Lambda's retries of the asynchronous invocation
// (as a pipeline's ticker's do: tickerRetryAttempts, tickerMaxEventAge).
func addTick(scope constructs.Construct, id string, fn *GoFunction, failures awssqs.IQueue, what string) awsevents.Rule {
	fn.Function.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(tickerRetryAttempts),
		MaxEventAge:   seconds(tickerMaxEventAge),
		OnFailure:     awslambdadestinations.NewSqsDestination(failures),
	})
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
	if props.Events == nil || props.OnFailure == nil || props.Quarantine == nil || props.TickFailures == nil || props.AssetDir == "" || props.Config == nil {
		return nil, fmt.Errorf("StreamJoin %q: AssetDir, Events, Quarantine, OnFailure, TickFailures and Config are required", id)
	}
	cfg := props.Config
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
		// Every record reaches the function, not only the two sides: it
		// ignores the others (they move no watermark) but commits its
		// position past them, and its tick reads the shard after that
		// position to tell an idle shard from one still to be processed.
		// Behind a mapping filter the position stopped at the last search
		// or click, so any other event after it held the shard's watermark
		// (and the unmatched searches) until the next search or click.
	})
	j.Function.Function.Node().DefaultChild().(awslambda.CfnFunction).AddMetadata(jsii.String(PipelineMetadataKey), jsii.String(cfg.Name))
	grantKeyedState(j.Function.GoFunction, j.State)
	grantBacklogRead(j.Function.GoFunction, props.Events)
	j.Joins.Grant(j.Function.Role, jsii.String("kinesis:PutRecords"))
	j.Schedule = addTick(c, "Tick", j.Function.GoFunction, props.TickFailures, "Ticks the join: idle shards' watermarks advance, unmatched records are emitted")
	return j, nil
}

// joinConstructID is the construct id of the join named name,
// "<Name>Join", except pipelines/search-click.json: the join deployed
// before joins were files keeps "SearchClickJoin", and so every logical id
// below it (its state, joins stream and mapping).
func joinConstructID(name string) string {
	if name == "search-click" {
		return "SearchClickJoin"
	}
	return exportedName(name) + "Join"
}

// cepConstructID is the construct id of the CEP file named name,
// "<Name>Detection", except pipelines/detect.json: the detection deployed
// before CEP was declared in files keeps "Detection", and so every logical
// id below it (its rules, partial matches, consumer and the URL operators
// know).
func cepConstructID(name string) string {
	if name == "detect" {
		return "Detection"
	}
	return exportedName(name) + "Detection"
}

// addJoinsAndDetection adds a stream–stream join per join file and a
// detection per CEP file of the pipelines directory (s.Pipelines.Operators),
// each with its outputs, "<Name>JoinsStreamName", "<Name>RulesUrl" and so
// on.
func (s *TributaryStack) addJoinsAndDetection(assetDir string) error {
	for _, f := range s.Pipelines.Operators {
		name := exportedName(f.Name)
		switch f.Kind {
		case pipeline.KindJoin:
			cfg, err := JoinFromFile(f)
			if err != nil {
				return err
			}
			j, err := NewStreamJoin(s.Stack, joinConstructID(f.Name), StreamJoinProps{AssetDir: assetDir, Events: s.Events,
				OnFailure: s.Quarantine.Failures, Quarantine: s.Quarantine.Table, TickFailures: s.TickerFailures, Config: &cfg})
			if err != nil {
				return err
			}
			s.Joins = append(s.Joins, j)
			output(s.Stack, name+"JoinsStreamName", j.Joins.StreamName(), fmt.Sprintf("Kinesis stream of join %s's joined, unmatched and rate records (%s)", f.Name, f.Path))
			output(s.Stack, name+"JoinStateTableName", j.State.TableName(), fmt.Sprintf("DynamoDB table of join %s's buffered records and watermarks", f.Name))
		case pipeline.KindCEP:
			cfg, err := CEPFromFile(f)
			if err != nil {
				return err
			}
			d, err := NewDetection(s.Stack, cepConstructID(f.Name), DetectionProps{AssetDir: assetDir, Events: s.Events,
				OnFailure: s.Quarantine.Failures, Quarantine: s.Quarantine.Table, TickFailures: s.TickerFailures, Config: &cfg})
			if err != nil {
				return err
			}
			s.Detections = append(s.Detections, d)
			output(s.Stack, name+"RulesTableName", d.Rules.TableName(), fmt.Sprintf("DynamoDB table of detection %s's CEP rules (go run ./cmd/rules -table ...)", f.Name))
			output(s.Stack, name+"MatchesStreamName", d.Matches.StreamName(), fmt.Sprintf("Kinesis stream of detection %s's CEP matches (%s)", f.Name, f.Path))
			output(s.Stack, name+"CepStateTableName", d.State.TableName(), fmt.Sprintf("DynamoDB table of detection %s's partial matches and watermarks", f.Name))
			output(s.Stack, name+"RulesUrl", d.RulesURL.Url(), fmt.Sprintf("detection %s's rules function URL (AWS_IAM): GET/POST /rules, POST /rules/<id>/disable|enable, DELETE /rules/<id>, POST /test", f.Name))
		}
	}
	return nil
}

// addOperatorDashboards adds a dashboard per join and detection, over what
// the stack holds (call it where the pipelines' dashboards are added).
func (s *TributaryStack) addOperatorDashboards() error {
	for _, j := range s.Joins {
		d, err := NewOperatorDashboard(s.Stack, "Join"+exportedName(j.Config.Name), OperatorDashboardProps{
			Name: j.Config.Name, Kind: pipeline.KindJoin, Path: j.Config.Path,
			Summary:   fmt.Sprintf("Joins `%s` and `%s` events of one key; joined, unmatched and rate records go to the joins stream (output %sJoinsStreamName).", j.Config.Left, j.Config.Right, exportedName(j.Config.Name)),
			Functions: []*GoFunction{j.Function.GoFunction},
			Tables:    []awsdynamodb.ITable{j.State},
		})
		if err != nil {
			return err
		}
		s.OperatorDashboards = append(s.OperatorDashboards, d)
	}
	for _, x := range s.Detections {
		d, err := NewOperatorDashboard(s.Stack, "Cep"+exportedName(x.Config.Name), OperatorDashboardProps{
			Name: x.Config.Name, Kind: pipeline.KindCEP, Path: x.Config.Path,
			Summary:   fmt.Sprintf("Runs the rules of its rules table (output %sRulesTableName) over every event; matches go to its matches stream (output %sMatchesStreamName).", exportedName(x.Config.Name), exportedName(x.Config.Name)),
			Functions: []*GoFunction{x.Detect.GoFunction, x.Admin},
			Tables:    []awsdynamodb.ITable{x.State, x.Rules},
		})
		if err != nil {
			return err
		}
		s.OperatorDashboards = append(s.OperatorDashboards, d)
	}
	return nil
}
