// Command app is an example CDK app of your own built on Tributary's public
// constructs (package tributary of module github.com/tributary-dev/tributary/infra)
// and nothing else: the ingest URL in front of an events stream, the
// quarantine behind every consumer, one windowed aggregation per file in
// pipelines/ (orders and signups), a function of your own with a custom
// aggregate (examples/functions/statuscodes), a dashboard per pipeline, and
// alarms and retention over all of it. See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	if _, err := NewShopStack(app, "Shop", ShopStackProps{}); err != nil {
		fmt.Fprintf(os.Stderr, "shop app: %v\n", err)
		os.Exit(1)
	}
	// cdk-nag's AWS Solutions rules: an unsuppressed finding fails cdk synth.
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}
