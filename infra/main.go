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
	if _, err := NewTributaryStack(app, StackID, &TributaryStackProps{}); err != nil {
		fmt.Fprintf(os.Stderr, "tributary infra: %v\n", err)
		os.Exit(1)
	}
	// cdk-nag's AWS Solutions rules run on every synth; an unsuppressed
	// finding is an error annotation and fails cdk synth.
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}
