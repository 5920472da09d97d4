package tributary

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// FunctionMetadataKey is the CloudFormation Metadata key on every
// AWS::Lambda::Function whose value is the function's name (the directory
// under functions/ and under the asset dir). The local runner maps a function
// resource to its bootstrap binary by it.
const FunctionMetadataKey = "tributary:function"

// Defaults for GoFunctionProps fields left zero.
const (
	DefaultMemoryMB     = 256
	DefaultTimeout      = 30 * time.Second
	DefaultLogRetention = awslogs.RetentionDays_TWO_WEEKS
)

// GoFunctionProps configures a Go Lambda function whose code is a prebuilt
// bootstrap binary (see the Makefile: linux/arm64, -tags lambda.norpc).
type GoFunctionProps struct {
	// Name is the function's name: its code is <AssetDir>/<Name>/bootstrap and
	// its Metadata "tributary:function" is Name. Required.
	Name string
	// AssetDir holds one directory per function, each with a bootstrap. Required.
	AssetDir string
	// Description is the Lambda function's description.
	Description string
	// Environment is the function's environment variables.
	Environment map[string]*string
	// Timeout is the invocation timeout, in whole seconds; DefaultTimeout if zero.
	Timeout time.Duration
	// MemoryMB is the memory size; DefaultMemoryMB if zero.
	MemoryMB int
	// LogRetention is how long the function's log group keeps logs;
	// DefaultLogRetention if empty.
	LogRetention awslogs.RetentionDays
	// Tracing turns on X-Ray active tracing (off by default: it adds a
	// wildcard xray:Put* grant and per-trace cost).
	Tracing bool
}

// GoFunction is a Lambda function running a Go bootstrap binary on
// provided.al2023/arm64, with its own log group and its own execution role
// that can write only to that log group (no AWS managed policy).
type GoFunction struct {
	constructs.Construct
	// Name is GoFunctionProps.Name.
	Name string
	// Timeout is the resolved invocation timeout.
	Timeout time.Duration
	// Function is the Lambda function.
	Function awslambda.Function
	// Role is the function's execution role; grant to it (or to Function).
	Role awsiam.Role
	// LogGroup receives the function's logs.
	LogGroup awslogs.LogGroup
}

// NewGoFunction creates a GoFunction under scope.
func NewGoFunction(scope constructs.Construct, id string, props GoFunctionProps) *GoFunction {
	if props.Name == "" {
		panic(fmt.Sprintf("GoFunction %q: Name is required", id))
	}
	if props.AssetDir == "" {
		panic(fmt.Sprintf("GoFunction %q: AssetDir is required", id))
	}
	timeout := props.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout%time.Second != 0 {
		panic(fmt.Sprintf("GoFunction %q: Timeout %v is not a whole number of seconds", id, timeout))
	}
	memory := props.MemoryMB
	if memory == 0 {
		memory = DefaultMemoryMB
	}
	retention := props.LogRetention
	if retention == "" {
		retention = DefaultLogRetention
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	g := &GoFunction{Construct: c, Name: props.Name, Timeout: timeout}

	g.LogGroup = awslogs.NewLogGroup(c, jsii.String("LogGroup"), &awslogs.LogGroupProps{
		Retention: retention,
		// Logs are diagnostics, not data of record: they go with the stack.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})

	// An explicit role instead of Lambda's default one: the default attaches
	// the AWS managed AWSLambdaBasicExecutionRole (logs:* on every log group);
	// this one may only write to the function's own log group.
	g.Role = awsiam.NewRole(c, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(fmt.Sprintf("Execution role of the Tributary %s function", props.Name)),
	})
	g.LogGroup.GrantWrite(g.Role)

	tracing := awslambda.Tracing_DISABLED
	if props.Tracing {
		tracing = awslambda.Tracing_ACTIVE
	}
	var description *string
	if props.Description != "" {
		description = jsii.String(props.Description)
	}
	var env *map[string]*string
	if len(props.Environment) > 0 {
		env = &props.Environment
	}

	g.Function = awslambda.NewFunction(c, jsii.String("Function"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(props.AssetDir, props.Name)), nil),
		Description:  description,
		Environment:  env,
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeout.Seconds())),
		MemorySize:   jsii.Number(float64(memory)),
		Role:         g.Role,
		LogGroup:     g.LogGroup,
		Tracing:      tracing,
	})
	cfn := g.Function.Node().DefaultChild().(awslambda.CfnFunction)
	cfn.AddMetadata(jsii.String(FunctionMetadataKey), jsii.String(props.Name))

	if props.Tracing {
		cdknag.NagSuppressions_AddResourceSuppressions(g.Role, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String("X-Ray's PutTraceSegments and PutTelemetryRecords do not support " +
				"resource-level permissions; Resource * is the only valid resource."),
			AppliesTo: &[]any{"Resource::*"},
		}}, jsii.Bool(true))
	}
	return g
}
