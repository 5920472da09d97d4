// Package local runs the CDK-defined topology on a laptop: it deploys the
// synthesized template (cdk.out) onto the AWS stand-in, starts every function's
// real bootstrap under aws-lambda-rie with the template's environment resolved
// to the local resources, plays the template's event source mappings
// (package eventsource), serves function URLs on 127.0.0.1, and forwards the
// functions' logs and EMF metrics to the stand-in's CloudWatch, one log
// stream per execution environment, publishing the AWS/Lambda metrics of
// every invocation as Lambda would.
//
// A function is known by its binary's name, or "<binary>-<pipeline>" when
// several functions run one binary, as the aggregate and ticker functions of
// each pipeline file do (names.go); FindPipelines finds every deployed
// pipeline with its views (windows.go).
//
// It also serves Lambda's Invoke API (invoke.go: every function by that
// name, logical id, physical name or ARN, sample resource names mapped to the
// local ones) and a dashboard page (dashboard*.go): a results view of a key's
// windows first, then a few health charts per pipeline, then every
// AWS::CloudWatch::Dashboard of the template, its body resolved against the
// local deployment and drawn from the stand-in's CloudWatch in one bounded
// reading (dashboard_read.go); CheckDashboards fails when a widget cannot
// read its data. FreshSample (freshsample.go) is what `make
// invoke` sends instead of a sample file: its times moved to now and its
// positions to SampleShard and new sequence numbers and ids, so that a
// sample never becomes a real shard's position or watermark.
//
// One topology, defined once in infra/, runs in AWS and here.
package local
