// Package tributary is Tributary's CDK construct library: the constructs a
// CDK app in Go imports to deploy Tributary's functions, and the reference
// stack (NewTributaryStack) that this repository's app (infra/main.go)
// composes from them and synthesizes to cdk.out for `cdk deploy` and for
// the local runner.
//
// It lives in the infra module, apart from the functions' module, so that
// jsii and the CDK never enter the function binaries; it imports the
// functions' module for package pipeline only, so the pipeline schema is
// written once. The functions' code is taken from prebuilt bootstrap
// binaries in the asset dir (props AssetDir, else context
// tributary:assetDir, else ../.build/lambda), one directory per function;
// every function resource carries CloudFormation Metadata
// "tributary:function" naming its binary, and a pipeline's functions
// "tributary:pipeline" naming the pipeline.
//
// # Constructs
//
// Compose them in this order; each has a props struct whose zero values are
// the defaults below, and fails (an error, at synth time) on what it cannot
// deploy. See Example for a whole stack.
//
//   - NewIngest: the events stream (a Kinesis stream, two shards,
//     encrypted, a week's retention, created unless Events is given) and
//     the ingest function behind a Function URL (AWS_IAM auth by default,
//     or HMAC-signed requests with a secret it creates), with its
//     Idempotency-Key table. Outputs IngestUrl, EventsStreamName.
//   - NewQuarantine: the quarantine table, the Failures queue (with its DLQ)
//     every stream mapping reports to, and the quarantine function that
//     copies a failed batch's records from its stream into the table.
//   - NewPipelines: every pipeline file of a directory (Dir, else context
//     tributary:pipelinesDir, else ../pipelines; one <name>.json per
//     pipeline, parsed with pipeline.LoadDir, a bad file failing synth with
//     the file and the field). Per pipeline: an aggregate function with its
//     own mapping on the events stream and a ticker with its own schedule
//     (every minute), retries and failure queue, both with PIPELINE_CONFIG
//     set to the file. Shared: the Views table (items keyed by pipeline),
//     the SSM parameter naming its current version, and the WindowResults
//     stream if any pipeline outputs to a stream. One pipeline's failures
//     stay in its own functions and mappings; with more than one pipeline
//     the aggregates read the events stream through enhanced fan-out
//     consumers of their own (PipelinesProps.FanOut says why). Adding a
//     file adds a pipeline. The directory's join and CEP files ("kind":
//     "join", "cep") are checked too and kept in Pipelines.Operators; the
//     repository's stack deploys each with NewStreamJoin (JoinFromFile) or
//     NewDetection (CEPFromFile) and NewOperatorDashboard, so adding a join
//     file adds a join.
//   - NewDashboard: one pipeline's CloudWatch dashboard (every function's
//     flow, errors and latency, the pipeline's watermark, late records and
//     duplicates, failure queues, table capacity, results from the logs),
//     its saved Logs Insights queries and its top-keys Contributor
//     Insights rule. Call it once per pipeline, after NewOperations.
//   - NewOperations: last, over everything the stack holds: tables and
//     failure queues retained, reserved concurrency from context,
//     quarantine's reads of failed ranges, and alarms on every function,
//     stream consumer, failure queue and pipeline, all notifying one
//     encrypted SNS topic (thresholds from context: OpsSettingsFromContext).
//
// Functions of your own (package handler of the functions' module, in the
// stack before NewOperations so that they are alarmed too):
//
//   - NewStreamHandler: a Kinesis consumer built with handler.WindowedFromEnv
//     (examples/functions/statuscodes): its state table, its results stream
//     (unless given), the mapping with batch item failures, bisection and an
//     on-failure queue, a tick schedule whose failures go to a queue of its
//     own (NewFailureQueue) unless TickFailures is given, and grants of
//     exactly the calls the handler makes.
//   - NewTaskHandler: an SQS consumer built with handler.TasksFromEnv
//     (examples/functions/receipts): the tasks queue and its dead-letter
//     queue, the idempotency table and the mapping with batch item failures.
//
// The building blocks under them are public too: GoFunction (a Go
// bootstrap on provided.al2023/arm64 with its own log group and least
// privilege role), StreamFunction (a consumer of a Kinesis stream or a
// DynamoDB table's stream with bounded retries, bisection, batch item
// failures, an on-failure queue and optionally its own enhanced fan-out
// consumer) and QueueFunction (an SQS consumer with batch item failures
// behind a queue with a DLQ; see NewQueueWithDLQ).
//
// Context tributary:flushIntervalSeconds (default 120, DefaultFlushInterval;
// 0 for one write per (key, window) per batch) has the aggregates write
// once per flush interval, their partials carried in the mapping's
// tumbling-window state.
//
// cdk-nag's AwsSolutions checks run on every synth of the repository's
// app; a finding that is accepted is suppressed on its resource with the
// reason.
package tributary
