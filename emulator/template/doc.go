// Package template deploys what `cdk synth` produced onto a local AWS
// stand-in: it loads a cdk.out <Stack>.template.json, creates the template's
// Kinesis streams (and their enhanced fan-out stream consumers), DynamoDB
// tables, SQS queues, SSM parameters and Secrets Manager secrets (a
// generated secret gets a random value of the template's shape) on an
// endpoint (idempotently,
// so a second run reuses them), resolves CloudFormation intrinsics (Ref,
// Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::If, pseudo parameters)
// against what it created, and gives the local runner the functions, event
// source mappings, function URLs and scheduled EventBridge rules (rate
// expressions with Lambda targets) of the template as plain Go values.
// A mapping that reads through a stream consumer becomes a mapping on the
// consumer's stream (MappingSpec.ConsumerARN says which consumer): locally
// enhanced fan-out is played by polling shards with GetRecords.
//
// Resources it does not emulate (IAM, Lambda permissions, log groups, KMS,
// custom resources, CDK metadata, ...) are listed by Deployment.Skipped so the
// runner can say what a local run leaves out.
package template
