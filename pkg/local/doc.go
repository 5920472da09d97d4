// Package local runs the CDK-defined topology on a laptop: it deploys the
// synthesized template (cdk.out) onto the AWS stand-in, starts every function's
// real bootstrap under aws-lambda-rie with the template's environment resolved
// to the local resources, plays the template's event source mappings
// (package eventsource), serves function URLs on 127.0.0.1, and forwards the
// functions' logs and EMF metrics to the stand-in's CloudWatch.
//
// One topology, defined once in infra/, runs in AWS and here.
package local
