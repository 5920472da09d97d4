// Package tributary is Tributary's CDK construct library: the constructs a
// CDK app in Go imports to deploy Tributary's functions, and the reference
// stack (NewTributaryStack) that this repository's app (infra/main.go)
// synthesizes to cdk.out for `cdk deploy` and for the local runner.
//
// It lives in the infra module, apart from the functions' module, so that
// jsii and the CDK never enter the function binaries. The functions' code is taken from prebuilt bootstrap binaries in
// the asset dir (context tributary:assetDir, default ../.build/lambda), one
// directory per function; every function resource carries CloudFormation
// Metadata "tributary:function" naming its binary.
//
// The building blocks are reusable for further pipelines: GoFunction (a Go
// bootstrap on provided.al2023/arm64 with its own log group and least
// privilege role), StreamFunction (a consumer of a Kinesis stream or a
// DynamoDB table's stream with bounded retries, bisection, batch item
// failures and an on-failure queue) and QueueFunction (an SQS consumer with
// batch item failures behind a queue with a DLQ; see NewQueueWithDLQ).
//
// The windowed pipeline that aggregate and the scheduled ticker run is
// declared in pipeline.json (embedded; see PipelineConfig) and handed to both
// as PIPELINE_CONFIG; the root module's tests parse that file with
// pipeline.Parse, so a config the functions would refuse fails `make test`.
// Context tributary:flushIntervalSeconds (default 0) switches aggregate from
// one write per (key, window) per batch to one per flush interval, carried
// in the mapping's tumbling-window state.
//
// Every failure reaches a person and state outlives the stack
// (operations.go, alarms.go, protect.go): the last step of the stack walks
// what it holds and alarms on every function (errors, throttles), stream
// consumer (iterator age, records set aside) and failure queue (depth), all
// notifying one encrypted SNS topic; it retains and deletion-protects
// every table, retains every failure queue, and lets quarantine read back
// the failed range of every stream that reports to Failures. Thresholds,
// the events stream's retention and reserved concurrency come from context
// (OpsSettingsFromContext; the README's deploy section lists the keys).
//
// cdk-nag's AwsSolutions checks run on every synth; a finding that is
// accepted is suppressed on its resource with the reason.
package tributary
