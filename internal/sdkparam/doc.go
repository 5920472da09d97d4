// Package sdkparam reads an SSM parameter with the SDK's SSM client, for
// the command-line tools and tests that hand aggregate.NewViewsTable a
// ParameterReader. The functions use aggregate.SSMParameters instead (one
// hand-signed request), which keeps the SSM client out of their binaries.
package sdkparam
