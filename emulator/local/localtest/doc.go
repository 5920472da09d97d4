// Package localtest deploys the synthesized stack (infra/cdk.out) onto a
// private stand-in and runs the real function binaries under
// aws-lambda-rie, for tests outside package local that need the whole
// topology (the console samples, make invoke).
package localtest
