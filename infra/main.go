// Command infra is the Tributary CDK app: it synthesizes the reference
// stack (package tributary's NewTributaryStack) to cdk.out for `cdk deploy`
// and for the local runner, which reads cdk.out/Tributary.template.json.
// cdk-nag's AWS Solutions rules run on every synth; an unsuppressed finding
// is an error annotation and fails cdk synth.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/tributary-dev/tributary/infra/tributary"
)

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	if _, err := tributary.NewTributaryStack(app, tributary.StackID, &tributary.TributaryStackProps{}); err != nil {
		fmt.Fprintf(os.Stderr, "tributary infra: %v\n", err)
		os.Exit(1)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}
